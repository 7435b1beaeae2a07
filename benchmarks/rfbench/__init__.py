"""Benchmark code, outside the runtime package: the core benches of ``python benchmarks/micro.py ...``
(topology, pool; machine, the speed probe they print), the Spark probes of the benchmark scripts and tests
(core_sharing, spark_counts) and TPC-H data generation (tpch_data). Each bench returns a JSON-able dict of
figures. Importable as ``rfbench`` with benchmarks/ on sys.path (a script there, or pytest's ``pythonpath``)."""
