"""The JVM options of every JVM the test suite starts (Connect servers, spark-submit drivers, standalone masters,
workers and executors, and the launcher JVM in front of each): C1 only and the serial collector. tests/conftest.py
sets them as ``JAVA_TOOL_OPTIONS``, inherited by every child process, unless the caller set that variable;
benchmarks/suite_jvm.py measures what they save. Why: CONTRIBUTING.md ("Tests")."""

SUITE_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
