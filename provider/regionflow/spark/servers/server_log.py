"""What a Spark Connect server's own log and JVM options say about how it ended (`connect.ConnectServer`)."""
from __future__ import annotations

from ...localfiles import tail

EXIT_ON_OOM = "-XX:+ExitOnOutOfMemoryError"


def log_cause(path: str) -> str:
    """The error a server's log ends with: its last OutOfMemoryError line, else its last error or exception
    line that is not a stack frame."""
    lines = [line.strip() for line in tail(path, 400).splitlines()]
    for wanted in ("OutOfMemoryError", "Exception", "Error"):
        found = [line for line in lines if wanted in line and not line.startswith("at ")]
        if found:
            return found[-1][:500]
    return "its log names no error"


__all__ = ["EXIT_ON_OOM", "log_cause"]
