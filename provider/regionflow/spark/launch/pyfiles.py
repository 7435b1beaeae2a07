"""Zips of regionflow and a job's modules for spark-submit's ``--py-files``, cached by content.

A top-level import name (``regionflow``, ``my_jobs``) becomes one zip of its package directories (or its
one module file), without bytecode, named by a hash of what it holds: an unchanged package is zipped
once, and concurrent submissions never see a half-written zip (each writes a private file, then
renames it into place).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import threading
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .submit_args import SubmitConfigError


@dataclass(frozen=True)
class _Source:
    """What to zip for one top-level import name: a package's directories or one module file."""

    top: str
    paths: tuple[str, ...]
    is_package: bool


def build_py_files(dest_dir: str, modules: Sequence[str]) -> list[str]:
    """Zips (in `dest_dir`) of regionflow and of the top-level packages of `modules`, for --py-files.

    Each zip is named after the hash of its content, so an unchanged package is zipped once per
    `dest_dir` whatever the number of calls. Submodules of an already shipped package add nothing.
    """
    os.makedirs(dest_dir, exist_ok=True)
    sources: dict[str, _Source] = {}
    for module in ["regionflow", *modules]:
        source = _locate(module)
        sources.setdefault(source.top, source)
    return [_cached_zip(dest_dir, source) for source in sources.values()]


def _locate(module: str) -> _Source:
    if not isinstance(module, str) or not re.match(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$", module):
        raise SubmitConfigError(f"module {module!r} is not an import name such as 'my_jobs' or 'my_pkg.jobs'")
    top, _, rest = module.partition(".")
    spec = importlib.util.find_spec(top)
    if spec is None:
        raise SubmitConfigError(
            f"module {top!r} (of {module!r}) cannot be imported here; install it or add its directory to PYTHONPATH"
        )
    source = _source_of(top, spec)
    if rest and not _contains(source, rest):
        raise SubmitConfigError(f"module {module!r} does not exist inside {top!r} ({', '.join(source.paths)})")
    return source


def _source_of(top: str, spec: Any) -> _Source:
    if spec.submodule_search_locations:
        return _Source(top, tuple(os.path.abspath(p) for p in spec.submodule_search_locations), True)
    if spec.origin and spec.origin.endswith(".py"):
        return _Source(top, (os.path.abspath(spec.origin),), False)
    raise SubmitConfigError(
        f"module {top!r} is not Python source ({spec.origin}); compiled modules cannot travel in --py-files, "
        "install them where Spark runs"
    )


def _contains(source: _Source, dotted_rest: str) -> bool:
    if not source.is_package:
        return False
    relative = os.path.join(*dotted_rest.split("."))
    return any(
        os.path.isfile(os.path.join(root, relative + ".py")) or os.path.isdir(os.path.join(root, relative))
        for root in source.paths
    )


def _archive_members(source: _Source) -> list[tuple[str, str]]:
    """(arcname, file path) pairs, sorted, without bytecode caches and hidden entries."""
    if not source.is_package:
        return [(os.path.basename(source.paths[0]), source.paths[0])]
    members: dict[str, str] = {}
    for root in source.paths:
        for directory, subdirs, files in os.walk(root):
            subdirs[:] = sorted(d for d in subdirs if d != "__pycache__" and not d.startswith("."))
            for filename in files:
                if filename.endswith((".pyc", ".pyo")) or filename.startswith("."):
                    continue
                path = os.path.join(directory, filename)
                members.setdefault(os.path.join(source.top, os.path.relpath(path, root)), path)
    return sorted(members.items())


def _cached_zip(dest_dir: str, source: _Source) -> str:
    members = [(arcname, _read(path)) for arcname, path in _archive_members(source)]
    digest = hashlib.sha256()
    for arcname, data in members:
        digest.update(arcname.encode() + b"\0" + hashlib.sha256(data).digest())
    target = os.path.join(os.path.abspath(dest_dir), f"{source.top}-{digest.hexdigest()[:16]}.zip")
    if not os.path.exists(target):
        _write_zip(target, members)
    return target


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _write_zip(target: str, members: list[tuple[str, bytes]]) -> None:
    # Written under a private name and renamed: concurrent builders never see half a zip.
    partial = f"{target}.{os.getpid()}.{threading.get_ident()}.partial"
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for arcname, data in members:
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    os.replace(partial, target)


