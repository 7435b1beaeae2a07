"""Replacing files of a published sink path all at once: a rerun of the same run whose committed output differs
from what the path holds (`SinkCommitter.publish`).

On a local file system the new state is built beside the path, in a hidden sibling directory (hard links to
every file the path keeps, and the new files), then swapped with the path by one ``renameat2(RENAME_EXCHANGE)``
(Linux): a reader that lists the path sees the old set of files or the new one, never a mix. Publishers of one
path hold a lock file beside it (``.<name>.rf-lock``), so a unit linking its files in never races another's swap.
Elsewhere (HDFS, object stores, a kernel without the call) each file is replaced on its own, atomically per file.
Never imports PySpark.
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping

from .filesystems import FileSystem, LocalFileSystem, join, local_path

AT_FDCWD = -100
RENAME_EXCHANGE = 2


@contextlib.contextmanager
def publishing(fs: FileSystem, path: str) -> Iterator[None]:
    """Hold the path's publish lock (local paths; a no-op elsewhere)."""
    if not isinstance(fs, LocalFileSystem):
        yield
        return
    import fcntl

    target = local_path(path).rstrip("/")
    lock = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.rf-lock")
    with open(lock, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def same_file(fs: FileSystem, a: str, b: str) -> bool:
    """Whether two published files hold the same bytes (the same inode, or equal contents)."""
    if isinstance(fs, LocalFileSystem):
        left, right = local_path(a), local_path(b)
        try:
            if os.path.samefile(left, right):
                return True
            if os.path.getsize(left) != os.path.getsize(right):
                return False
        except FileNotFoundError:
            return False
    elif fs.size(a) != fs.size(b):
        return False  # remote: two sizes before two downloads
    return fs.read_bytes(a) == fs.read_bytes(b)


def replace_files(fs: FileSystem, path: str, replacements: Mapping[str, str]) -> None:
    """Make `path` hold `replacements` (file name -> source file) instead of its files of those names, every
    other entry kept: one directory swap where the file system can, else file by file."""
    if isinstance(fs, LocalFileSystem) and _swap_directory(local_path(path).rstrip("/"), replacements):
        return
    for name, source in sorted(replacements.items()):
        parent, _, base = join(path, name).rpartition("/")
        temp = f"{parent}/.{base}.{uuid.uuid4().hex}.tmp"
        fs.publish_file(source, temp)
        fs.replace(temp, join(path, name))


def _swap_directory(target: str, replacements: Mapping[str, str]) -> bool:
    parent, name = os.path.dirname(target), os.path.basename(target)
    swap = os.path.join(parent, f".{name}.rf-swap-{uuid.uuid4().hex[:12]}")
    os.mkdir(swap)
    try:
        for entry in os.listdir(target):
            if entry not in replacements:
                _link_tree(os.path.join(target, entry), os.path.join(swap, entry))
        for entry, source in replacements.items():
            _link_tree(local_path(source), os.path.join(swap, entry))
        if not exchange(swap, target):
            return False
    finally:
        shutil.rmtree(swap, ignore_errors=True)  # the old state after a swap, the unused new one otherwise
    return True


def exchange(a: str, b: str) -> bool:
    """Swap two paths atomically (Linux ``renameat2`` with ``RENAME_EXCHANGE``); False where unsupported."""
    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    if call(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(code, f"cannot swap {a} and {b}: {os.strerror(code)}")


def _link_tree(source: str, target: str) -> None:
    if os.path.isdir(source) and not os.path.islink(source):
        shutil.copytree(source, target, copy_function=_link_or_copy)
    else:
        _link_or_copy(source, target)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError as error:
        if error.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        shutil.copyfile(source, target)


__all__ = ["exchange", "publishing", "replace_files", "same_file"]
