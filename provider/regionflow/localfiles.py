"""Local files written whole: a temp file with a unique name beside the target, then `os.replace`.
Several processes may write the same file at once (region tasks of one run write the run's job spec,
attempts rewrite state files): each has its own temp file, readers see an old or a new file whole.
Also an exclusive lock file across processes (`exclusive_lock`), and the end of a log file (`tail`),
which every error naming a process's log quotes."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def _replaced(path: str) -> Iterator[str]:
    """A temp file name beside `path`; what the block writes there replaces `path` in one move when the
    block ends, and nothing is left behind when it fails."""
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield temporary
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def write_text_atomically(path: str, text: str) -> str:
    """Write `text` to `path` in one move; returns `path`."""
    with _replaced(path) as temporary, open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def copy_atomically(source: str, path: str) -> str:
    """Copy the file `source` to `path` in one move; returns `path`."""
    with _replaced(path) as temporary:
        shutil.copyfile(source, temporary)
    return path


@contextlib.contextmanager
def exclusive_lock(path: str) -> Iterator[None]:
    """An exclusive lock on the file `path` across processes (flock), held for the `with` block."""
    with open(path, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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


__all__ = ["copy_atomically", "exclusive_lock", "tail", "write_json_atomically", "write_text_atomically"]
