"""Local files written whole: a temp file with a unique name beside the target, then `os.replace`.
Several processes may write the same file at once (region tasks of one run write the run's job spec,
attempts rewrite state files): each has its own temp file, readers see an old or a new file whole.
And the end of a log file (`tail`), which every error naming a process's log quotes."""
from __future__ import annotations

import json
import os
import uuid
from typing import Any


def write_text_atomically(path: str, text: str) -> str:
    """Write `text` to `path` in one move; returns `path`."""
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    return path


def write_json_atomically(path: str, data: Any) -> str:
    """`data` as JSON at `path`, written in one move; returns `path`."""
    return write_text_atomically(path, json.dumps(data))


def tail(path: str, lines: int = 40) -> str:
    """The last `lines` lines of the text file at `path`, or ``(no log)`` when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return "(no log)"


__all__ = ["tail", "write_json_atomically", "write_text_atomically"]
