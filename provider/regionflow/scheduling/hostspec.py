"""The declared model of a host (`HOST`, printed by ``regionflow schema hosts``) and the compact text
form that reads into it.

Both forms of a host go through `HOST`, field by field, so each rule on one field is written once, here:
the JSON form (``[regionflow] hosts`` as JSON, `Host.from_dict`) as is, and the text form
(``a:slots=2,cpu=2,mem=4g``, `hosts_from_text`) after it is turned into the same dict, each value typed
as the model declares its field (``2`` an integer, ``nan`` a float, ``4g`` text). Rules across fields
(slots x slot profile fit the host, affinity covers cpu, mem and heap not both) are `hosts`' job.
"""
from __future__ import annotations

import math
import re
from typing import Any

from ..core.errors import SpecError
from ..core.schema import Field, Model

MAX_SLOTS_PER_HOST = 32768  # as many as the largest vertex parallelism; a typo must not build a huge pool
MAX_CORE_ID = 8192  # Linux's largest CONFIG_NR_CPUS default; a typo like 0-100000000 must not list 10^8 cores

NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?$", re.IGNORECASE)
_SIZE_FACTOR_TO_MIB = {"": 1.0, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 * 1024.0}
_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
_NUMBER_RE = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$|^[+-]?(nan|inf|infinity)$", re.IGNORECASE)
_INTEGER_RE = re.compile(r"^[+-]?\d+$")
BUILT_IN_RESOURCES = ("cpu", "mem", "heap", "off_heap", "managed")  # not names of extended resources


# --- reading values the model has accepted -----------------------------------------------------

def size_mib(value: Any) -> int | None:
    """A memory size in MiB: a finite number >= 0 is MiB, text such as ``4g`` or ``512m``; None if not a size."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value) if math.isfinite(value) and value >= 0 else None
    match = _SIZE_RE.match(value.strip()) if isinstance(value, str) else None
    return int(float(match.group(1)) * _SIZE_FACTOR_TO_MIB[match.group(2).lower()]) if match else None


def affinity_cores(value: Any) -> tuple[int, ...]:
    """The core ids of an accepted ``affinity`` (a list, or ranges joined by ``+`` such as ``0-3+8``)."""
    if not isinstance(value, str):
        return tuple(value)
    return tuple(core for low, high in _affinity_ranges(value) or () for core in range(low, high + 1))


def _affinity_ranges(text: str) -> list[tuple[int, int]] | None:
    ranges = []
    for item in text.split("+"):
        match = _RANGE_RE.match(item.strip())
        if not match:
            return None
        low = int(match.group(1))
        ranges.append((low, int(match.group(2)) if match.group(2) else low))
    return ranges


# --- rules on one field beyond type and range --------------------------------------------------

def _name_problem(name: str) -> str | None:
    return None if NAME_RE.match(name) else "a host name uses only letters, digits, '.', '-' or '_' (e.g. 'worker-1')"


def _size_problem(value: Any) -> str | None:
    if isinstance(value, str) and size_mib(value) is None:
        return "not a memory size; write e.g. 4g, 512m or 2048 (MiB)"
    return None


def _affinity_problem(value: Any) -> str | None:
    if isinstance(value, str):
        ranges = _affinity_ranges(value)
        if ranges is None or any(high < low for low, high in ranges):
            return "not core ids; write core ids and ranges joined by '+', e.g. 0-3+8"
        largest = max(high for _, high in ranges)
        if largest >= MAX_CORE_ID:
            return f"names core {largest}; core ids are below {MAX_CORE_ID}"
    else:
        ranges = [(core, core) for core in value]
    ordered = sorted(ranges)
    if any(following[0] <= previous[1] for previous, following in zip(ordered, ordered[1:], strict=False)):
        return "lists a core twice; list each core id once"
    return None


def _path_problem(value: str) -> str | None:
    if not value.startswith("/"):
        return "not an absolute path; give the file's full path, e.g. /home/me/cluster/app.properties"
    return None


def _conn_id_problem(value: str) -> str | None:
    if not NAME_RE.match(value):
        return "not an Airflow connection id; use letters, digits, '.', '-' or '_' (e.g. team_runtime)"
    return None


def _ext_problem(amounts: dict[str, Any]) -> str | None:
    for name in amounts:
        if not NAME_RE.match(name) or name in BUILT_IN_RESOURCES:
            return (f"{name!r} is not an extended resource name; use letters, digits, '.', '-' or '_', other "
                    f"than {', '.join(BUILT_IN_RESOURCES)} (which are fields of their own)")
    return None


_SIZE = ("number", "string")
_SIZE_DOC = "MiB as a number, or a size such as '4g', '512m'"


def _resources(scope: str) -> tuple[Field, ...]:
    """The resource fields, ``scope`` being "per slot" or "of the whole host"."""
    return (
        Field("cpu", "number", f"cores {scope}", minimum=0, above=True),
        Field("mem", _SIZE, f"heap {scope}, {_SIZE_DOC}", minimum=0, check=_size_problem),
        Field("heap", _SIZE, f"heap {scope} (alias of mem), {_SIZE_DOC}", minimum=0, check=_size_problem),
        Field("off_heap", _SIZE, f"off-heap memory {scope}, {_SIZE_DOC}", minimum=0, check=_size_problem),
        Field("managed", _SIZE, f"managed memory {scope}, {_SIZE_DOC}", minimum=0, check=_size_problem),
        Field("gpu", "number", f"GPUs {scope}", minimum=0),
        Field("ext", "object", f"extended resources {scope}, e.g. {{\"fpga\": 1}}", values="number", minimum=0,
              check=_ext_problem),
    )


SLOT = Model("slot", "per-slot overrides of the host's evenly divided resources", _resources("per slot"))

HOST = Model("host", "a place that offers slots to the pool (a resource not given defaults to "
             "one cpu and 1g heap per slot, none of the others)", (
    Field("name", "string", "the host's unique name", required=True, non_empty=True, check=_name_problem),
    Field("slots", "integer", f"its slot count, 1 to {MAX_SLOTS_PER_HOST}", required=True,
          minimum=1, maximum=MAX_SLOTS_PER_HOST),
    *_resources("of the whole host"),
    Field("slot", SLOT, "per-slot overrides"),
    Field("master", "string", "the address of the host's runtime, checked by the runtime layer "
          "(default: this machine)", non_empty=True),
    Field("affinity", ("array", "string"), f"core ids to pin a local host to (0 to {MAX_CORE_ID - 1}), a list or "
          "'0-3+8'", items="integer", minimum=0, maximum=MAX_CORE_ID - 1, check=_affinity_problem),
    Field("properties_file", "string", "the absolute path of a file every application on the host's runtime loads, "
          "private to its owner (e.g. the secret of an authenticated master); checked when used", non_empty=True,
          check=_path_problem),
    Field("conn_id", "string", "the Airflow connection of a runtime that someone else runs, on any machine, checked "
          "by the runtime layer; regionflow never starts, stops or restarts it (not with master, affinity or "
          "properties_file)", non_empty=True,
          check=_conn_id_problem),
))


# --- the text form -----------------------------------------------------------------------------

# a text field other than these is `<field>`, `slot_<field>`, `ext.<name>` or `slot_ext.<name>`
_NOT_TEXT_FIELDS = {"name": "the host's name goes before ':', as in 'h1:slots=2'",
                    "slot": "write slot_<field>=<value>, e.g. slot_mem=2g",
                    "ext": "write ext.<name>=<amount>, e.g. ext.fpga=1"}
TEXT_FIELDS = ", ".join([f.name for f in HOST.fields if f.name not in _NOT_TEXT_FIELDS]
                        + ["ext.<name>", "slot_<any of those>"])


def hosts_from_text(text: str) -> list[dict[str, Any]]:
    """``h1:slots=2,cpu=2;h2:2`` as the JSON form's host dicts (``NAME:SLOTS`` or ``NAME:field=value``
    starts a host; hosts and fields are separated by ``,`` or ``;``). Only the syntax is checked here;
    `HOST` checks the values."""
    hosts: list[dict[str, Any]] = []
    for part in text.split(";"):
        for token in (t.strip() for t in part.split(",")):
            if not token:
                continue
            if _starts_a_host(token):
                name, _, token = token.partition(":")
                hosts.append({"name": name.strip()})
                token = token.strip()
                if not token:
                    continue
            if not hosts:
                raise SpecError(f"the hosts spec must start with NAME:SLOTS, got '{token}'; e.g. 'h1:2;h2:2'")
            _add_text_field(hosts[-1], token)
    if not hosts:
        raise SpecError("the hosts spec names no host; expected e.g. 'h1:2;h2:slots=2,gpu=1'")
    return hosts


def _starts_a_host(token: str) -> bool:
    """``h1:2`` and ``h1:slots=2`` start a host; ``master=scheme://x:7077`` is a field."""
    colon = token.find(":")
    equals = token.find("=")
    return colon >= 0 and (equals < 0 or colon < equals)


def _add_text_field(host: dict[str, Any], token: str) -> None:
    key, has_value, value = token.partition("=")
    key, value = key.strip(), value.strip()
    if not has_value:
        if len(host) > 1:
            raise SpecError(f"host {host['name']!r}: {token!r} is not a field; expected key=value (fields: "
                            f"{TEXT_FIELDS})")
        key, value = "slots", token
    target, model, inner = host, HOST, key
    kinds: tuple[Any, ...] = ("number",)
    if inner.startswith("slot_"):
        target, model, inner = target.setdefault("slot", {}), SLOT, inner[len("slot_"):]
    if inner.startswith("ext."):
        target, inner = target.setdefault("ext", {}), inner[len("ext."):]  # an amount: kinds stays number
    elif inner in _NOT_TEXT_FIELDS:
        raise SpecError(f"host {host['name']!r}: {key!r} is not a field of the text form; {_NOT_TEXT_FIELDS[inner]}")
    else:
        declared = next((f for f in model.fields if f.name == inner), None)  # unknown: the model says so
        kind = declared.kind if declared else "string"
        kinds = kind if isinstance(kind, tuple) else (kind,)
    if inner in target:
        raise SpecError(f"host {host['name']!r}: field {key!r} is given twice")
    target[inner] = _typed(value, kinds)


def _typed(text: str, kinds: tuple[Any, ...]) -> Any:
    """`text` as a number when its field takes one and it reads as one (``nan`` too, for the model to
    refuse), else the text itself."""
    if ("integer" in kinds or "number" in kinds) and _NUMBER_RE.match(text):
        if not _INTEGER_RE.match(text):
            return float(text)
        if len(text) <= 100:  # longer is no count or amount (and past Python's int-from-text limit)
            return int(text)
    return text


__all__ = ["HOST", "MAX_CORE_ID", "MAX_SLOTS_PER_HOST", "SLOT", "TEXT_FIELDS", "affinity_cores", "hosts_from_text",
           "size_mib"]
