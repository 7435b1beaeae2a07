"""Machine-readable output: a ``--format json`` command prints exactly one JSON document on stdout.

While such a command runs, everything else that would reach stdout goes to stderr instead: our own
progress lines, a library's prints, and the output of child processes that inherit the descriptor
(a Spark JVM, spark-submit). `print_document` writes the one document to the real stdout.

The redirect is made on file descriptor 1 when stdout is the process's real stdout (a command line), and
on ``sys.stdout`` alone otherwise (a test's captured stream, which has no descriptor).
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator
from typing import TextIO

_document_stream: TextIO | None = None  # set while a --format json command runs


def print_document(text: str) -> None:
    """Print the command's document: on the real stdout, even while `document_only` sends other output to
    stderr."""
    stream = _document_stream if _document_stream is not None else sys.stdout
    stream.write(text + "\n")
    stream.flush()


@contextlib.contextmanager
def document_only(enabled: bool = True) -> Iterator[None]:
    """While the block runs, stdout carries only what `print_document` writes; the rest goes to stderr."""
    global _document_stream
    if not enabled:
        yield
        return
    stdout, saved_fd = sys.stdout, _real_stdout_fd(sys.stdout)
    if saved_fd is not None:
        stdout.flush()
        os.dup2(_stderr_fd(), 1)  # children and C code writing to descriptor 1 write to stderr
        document: TextIO = open(saved_fd, "w", encoding="utf-8", closefd=False)  # noqa: SIM115 - closed below
    else:
        document = stdout
    previous, _document_stream = _document_stream, document
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _document_stream = previous
        if saved_fd is not None:
            document.flush()
            document.close()
            sys.stderr.flush()
            os.dup2(saved_fd, 1)
            os.close(saved_fd)


def _stderr_fd() -> int:
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return 2


def _real_stdout_fd(stream: TextIO) -> int | None:
    """A duplicate of descriptor 1 when `stream` writes to it, else None."""
    try:
        if stream.fileno() != 1:
            return None
    except (AttributeError, OSError, io.UnsupportedOperation, ValueError):
        return None
    return os.dup(1)


__all__ = ["document_only", "print_document"]
