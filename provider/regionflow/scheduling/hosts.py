"""Hosts and clusters: the places that offer slots to the pool.

A `Host` has a name, a number of slots, the resources of the whole host (a `ResourceProfile`),
optionally the cpu core ids it is pinned to, an `address`: where its runtime is reached, as the
user wrote it (the ``master`` field), and optionally a `properties_file` its runtime's applications
load (an authenticated standalone master's secret lives there, never in the spec). Scheduling stores
address and file and never reads them; the runtime layer reads them, checks them, and gives a host
without an address its default.
A `Cluster` is an ordered list of hosts with unique names; host order breaks every tie the
slot pool has to break.

Slot rule (one rule, used everywhere): each slot offers the host's resources divided evenly by
its slot count; a ``slot_<dim>`` field overrides that one dimension for every slot of the host.
A host dimension that is not declared is derived from the slot override when there is one,
otherwise it defaults to one cpu core and 1 GiB heap (the usual default executor memory) per slot
and zero of everything else. Whatever is given, ``slots x slot profile`` must fit in the host.
So ``gpu=2`` on a 2-slot host gives ``gpu=1`` per slot, and ``gpu=1`` on a 2-slot host gives
``gpu=0.5`` per slot, which no ``gpu=1`` request fits: give the host one slot, or more gpus.

Text form used by ``--hosts`` (JSON, starting with ``[`` or ``{``, is accepted too)::

    h1:slots=2,cpu=2,mem=4g;h2:slots=2,master=ADDRESS,gpu=1
    h1:2,h2:2                       # NAME:SLOTS, hosts separated by ',' or ';'
    gpu1:4,gpu=4,slot_mem=8g,affinity=0-3+8

Fields: ``slots``; host totals ``cpu``, ``mem`` (alias ``heap``), ``off_heap``, ``managed``,
``gpu``, ``ext.<name>``; per-slot overrides ``slot_cpu``, ``slot_mem``, ... ``slot_ext.<name>``;
``master`` (the address; its forms are the runtime layer's); ``affinity`` (core ids, ranges joined
by ``+``: ``0-3+8``; the runtime layer allows it only where it runs on this machine);
``properties_file`` (an absolute path). Sizes take k/m/g/t suffixes; a bare number is MiB.

The dict form (for airflow.cfg / JSON) mirrors it: ``{"name": "h1", "slots": 2, "cpu": 2,
"mem": "4g", "gpu": 1, "ext": {"fpga": 1}, "master": "...", "affinity": [0, 1],
"slot": {"mem": "2g"}}``. The text form is read into that dict (`hostspec.hosts_from_text`), so both
forms are checked by one model, `hostspec.HOST`, field by field; this module adds the rules across
fields and builds the `Host`.
"""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import SpecError
from ..core.resources import ResourceProfile
from .hostspec import HOST, affinity_cores, hosts_from_text, size_mib

DEFAULT_HEAP_MIB_PER_SLOT = 1024

_MEMORY_DIMS = ("heap", "off_heap", "managed")
_DIM_ALIASES = {"mem": "heap", "heap": "heap", "off_heap": "off_heap", "managed": "managed", "cpu": "cpu"}
_PLAIN_FIELDS = ("slots", "master", "affinity", "properties_file", "conn_id")
_EPS = 1e-9


@dataclass(frozen=True)
class Host:
    """A place with `slots` slots each offering `slot_profile`; `profile` is the whole host's.

    `address` is where the host's runtime is reached (None: this machine, the runtime layer's default),
    `cpu_affinity` the core ids it is pinned to and `properties_file` a file its runtime's applications
    load (None: none), `conn_id` the Airflow connection of a runtime someone else runs (None:
    regionflow runs the host's runtime); scheduling keeps them for the runtime layer."""

    name: str
    slots: int
    profile: ResourceProfile
    slot_profile: ResourceProfile
    address: str | None = None
    cpu_affinity: tuple[int, ...] = ()
    properties_file: str | None = None
    conn_id: str | None = None

    @classmethod
    def of(
        cls,
        name: str,
        slots: int,
        *,
        cpu: float | None = None,
        mem: int | str | None = None,
        off_heap: int | str | None = None,
        managed: int | str | None = None,
        gpu: float | None = None,
        ext: Mapping[str, float] | None = None,
        slot: Mapping[str, Any] | None = None,
        master: str | None = None,
        affinity: Iterable[int] | str | None = None,
        properties_file: str | None = None,
        conn_id: str | None = None,
    ) -> Host:
        """Build a host from keyword fields, applying the module's slot rule and defaults."""
        data: dict[str, Any] = {"name": name, "slots": slots}
        optional = {"cpu": cpu, "mem": mem, "off_heap": off_heap, "managed": managed, "gpu": gpu,
                    "ext": ext, "slot": slot, "master": master, "affinity": affinity,
                    "properties_file": properties_file, "conn_id": conn_id}
        data.update({key: value for key, value in optional.items() if value is not None})
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Host:
        if not isinstance(data, Mapping):
            raise SpecError(f"a host must be an object with at least 'name' and 'slots', got {data!r}")
        label = data.get("name")
        HOST.validate(data, f"host {label!r}" if isinstance(label, str) else "host")
        return _build_host(data["name"], _flatten_host_dict(data))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "slots": self.slots}
        data.update(_profile_fields(self.profile))
        if self.address is not None:
            data["master"] = self.address
        if self.cpu_affinity:
            data["affinity"] = list(self.cpu_affinity)
        if self.properties_file is not None:
            data["properties_file"] = self.properties_file
        if self.conn_id is not None:
            data["conn_id"] = self.conn_id
        if self.slot_profile != _evenly_divided(self.profile, self.slots):
            data["slot"] = _profile_fields(self.slot_profile)
        return data

    def describe(self) -> str:
        """E.g. ``h1: 2 x [cpu=1, heap=1024m]``."""
        return f"{self.name}: {self.slots} x [{self.slot_profile.describe()}]"


@dataclass(frozen=True)
class Cluster:
    """An ordered list of hosts with unique names."""

    hosts: tuple[Host, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "hosts", tuple(self.hosts))
        if not self.hosts:
            raise SpecError("a cluster needs at least one host; e.g. --hosts 'localhost:4'")
        seen: set[str] = set()
        for host in self.hosts:
            if host.name in seen:
                raise SpecError(f"host '{host.name}' is listed twice; host names must be unique")
            seen.add(host.name)

    @classmethod
    def local_default(cls, slots: int | None = None) -> Cluster:
        """One host ``localhost`` (this machine) with one slot and one cpu per cpu core (or `slots`)."""
        count = slots if slots is not None else (os.cpu_count() or 1)
        return cls((Host.of("localhost", count),))

    @classmethod
    def parse(cls, spec: str) -> Cluster:
        """Parse the ``--hosts`` text form, or JSON when the text starts with ``[`` or ``{``."""
        text = (spec or "").strip()
        if not text:
            raise SpecError("the hosts spec is empty; expected e.g. 'h1:2;h2:slots=2,gpu=1'")
        if text[0] in "[{":
            return cls.from_json(text)
        return cls.from_dicts(hosts_from_text(text))

    @classmethod
    def from_json(cls, text: str) -> Cluster:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"the hosts JSON is malformed at line {exc.lineno} column {exc.colno}: {exc.msg}") from None
        return cls.from_dicts(data)

    @classmethod
    def from_dicts(cls, data: Iterable[Mapping[str, Any]] | Mapping[str, Any]) -> Cluster:
        """Load ``[{host}, ...]`` or ``{"hosts": [{host}, ...]}``."""
        hosts: Any = data
        if isinstance(data, Mapping):
            if "hosts" not in data:
                raise SpecError("a cluster object needs a 'hosts' list, e.g. "
                                "{\"hosts\": [{\"name\": \"h1\", \"slots\": 2}]}")
            hosts = data["hosts"]
        if isinstance(hosts, (str, bytes)) or not isinstance(hosts, Iterable):
            raise SpecError(f"a cluster must be a list of hosts, got {hosts!r}")
        return cls(tuple(Host.from_dict(item) for item in hosts))

    def to_dicts(self) -> list[dict[str, Any]]:
        return [host.to_dict() for host in self.hosts]

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    @property
    def total_slots(self) -> int:
        return sum(host.slots for host in self.hosts)

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        raise SpecError(f"no host named '{name}'; the cluster has {', '.join(h.name for h in self.hosts)}")

    def describe_capacity(self) -> str:
        """E.g. ``4 slots in all (localhost: 4)``."""
        return describe_slot_counts((host.name, host.slots) for host in self.hosts)


def describe_slot_counts(counts: Iterable[tuple[str, int]]) -> str:
    pairs = list(counts)
    total = sum(count for _, count in pairs)
    listed = ", ".join(f"{name}: {count}" for name, count in pairs) or "no hosts"
    return f"{total} slot{'s' if total != 1 else ''} in all ({listed})"


# --- dict form ---------------------------------------------------------------------------------

def _flatten_host_dict(data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a host `HOST` has accepted as one flat map: ``slot_<field>``, ``ext.<name>``."""
    fields: dict[str, Any] = {}
    for key, value in data.items():
        if key == "ext":
            fields.update({f"ext.{ext}": amount for ext, amount in value.items()})
        elif key == "slot":
            for slot_key, slot_value in value.items():
                if slot_key == "ext":
                    fields.update({f"slot_ext.{ext}": amount for ext, amount in slot_value.items()})
                else:
                    fields[f"slot_{slot_key}"] = slot_value
        elif key != "name":
            fields[key] = value
    return fields


# --- building a host from its flat fields ------------------------------------------------------

def _build_host(name: str, fields: Mapping[str, Any]) -> Host:
    host_dims, slot_dims, plain = _classify_fields(name, fields)
    slots = int(plain["slots"])
    affinity = affinity_cores(plain["affinity"]) if "affinity" in plain else ()
    totals = _host_totals(host_dims, slot_dims, slots, affinity)
    per_slot = {dim: slot_dims.get(dim, _divide(dim, total, slots)) for dim, total in totals.items()}
    _check_slots_fit_host(name, slots, totals, per_slot)
    _check_affinity_covers_cpu(name, affinity, totals["cpu"])
    _check_conn_id_alone(name, plain)
    return Host(name, slots, _profile(totals), _profile(per_slot), plain.get("master"), affinity,
                plain.get("properties_file"), plain.get("conn_id"))


def _classify_fields(name: str, fields: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
    host_dims: dict[str, float] = {}
    slot_dims: dict[str, float] = {}
    plain: dict[str, Any] = {}
    for key, value in fields.items():
        if key in _PLAIN_FIELDS:
            plain[key] = value
        elif key.startswith("slot_"):
            dim = _dimension(key[len("slot_"):])
            _put_once(name, slot_dims, dim, key, _amount(dim, value))
        else:
            dim = _dimension(key)
            _put_once(name, host_dims, dim, key, _amount(dim, value))
    return host_dims, slot_dims, plain


def _dimension(key: str) -> str:
    """The resource dimension of an accepted field: cpu, heap (mem), off_heap, managed, gpu, or ext.<name>."""
    return _DIM_ALIASES.get(key) or key.removeprefix("ext.")


def _amount(dim: str, value: Any) -> float:
    """An accepted amount: sizes in MiB for the memory dimensions."""
    return float(size_mib(value) or 0) if dim in _MEMORY_DIMS else float(value)


def _put_once(name: str, dims: dict[str, float], dim: str, field: str, value: float) -> None:
    if dim in dims:
        raise SpecError(f"host '{name}': '{field}' sets '{dim}' a second time (mem and heap are the same field)")
    dims[dim] = value


def _host_totals(host_dims: Mapping[str, float], slot_dims: Mapping[str, float], slots: int,
                 affinity: tuple[int, ...]) -> dict[str, float]:
    defaults = {"cpu": float(len(affinity) or slots), "heap": DEFAULT_HEAP_MIB_PER_SLOT * slots,
                "off_heap": 0, "managed": 0}
    totals: dict[str, float] = {}
    for dim in list(defaults) + sorted((set(host_dims) | set(slot_dims)) - set(defaults)):
        if dim in host_dims:
            totals[dim] = host_dims[dim]
        elif dim in slot_dims:
            totals[dim] = slot_dims[dim] * slots
        else:
            totals[dim] = defaults.get(dim, 0)
    return totals


def _divide(dim: str, total: float, slots: int) -> float:
    return total // slots if dim in _MEMORY_DIMS else total / slots


def _check_slots_fit_host(name: str, slots: int, totals: Mapping[str, float], per_slot: Mapping[str, float]) -> None:
    for dim, amount in per_slot.items():
        if amount * slots > totals[dim] + _EPS:
            raise SpecError(
                f"host '{name}': {slots} slots x slot_{_field_name(dim)}={_fmt(amount)} exceed the host's "
                f"{_field_name(dim)}={_fmt(totals[dim])}; lower slot_{_field_name(dim)} or raise {_field_name(dim)}"
            )


def _check_conn_id_alone(name: str, plain: Mapping[str, Any]) -> None:
    clashing = [field for field in ("master", "affinity", "properties_file") if field in plain]
    if "conn_id" in plain and clashing:
        raise SpecError(f"host '{name}': conn_id names a runtime that someone else runs, and "
                        f"{', '.join(clashing)} describe(s) a runtime regionflow starts; give one or the other")


def _check_affinity_covers_cpu(name: str, affinity: tuple[int, ...], cpu: float) -> None:
    if affinity and cpu > len(affinity) + _EPS:
        raise SpecError(
            f"host '{name}': cpu={_fmt(cpu)} but affinity pins only {len(affinity)} cores; "
            f"list more cores or lower cpu"
        )


def _profile(dims: Mapping[str, float]) -> ResourceProfile:
    extended = {dim: amount for dim, amount in dims.items() if dim not in _DIM_ALIASES.values()}
    return ResourceProfile.of(
        cpu=float(dims["cpu"]),
        heap_mib=int(dims["heap"]),
        off_heap_mib=int(dims["off_heap"]),
        managed_mib=int(dims["managed"]),
        **extended,
    )


def _evenly_divided(profile: ResourceProfile, slots: int) -> ResourceProfile:
    dims: dict[str, float] = {"cpu": profile.cpu, "heap": profile.heap_mib, "off_heap": profile.off_heap_mib,
                              "managed": profile.managed_mib, **profile.extended_map}
    return _profile({dim: _divide(dim, amount, slots) for dim, amount in dims.items()})


def _profile_fields(profile: ResourceProfile) -> dict[str, Any]:
    fields: dict[str, Any] = {"cpu": profile.cpu, "mem": profile.heap_mib}
    if profile.off_heap_mib:
        fields["off_heap"] = profile.off_heap_mib
    if profile.managed_mib:
        fields["managed"] = profile.managed_mib
    extended = profile.extended_map
    if "gpu" in extended:
        fields["gpu"] = extended.pop("gpu")
    if extended:
        fields["ext"] = extended
    return fields


def _field_name(dim: str) -> str:
    if dim == "heap":
        return "mem"
    if dim in _DIM_ALIASES or dim == "gpu":
        return dim
    return f"ext.{dim}"


def _fmt(value: float) -> str:
    return f"{value:g}"


__all__ = ["Host", "Cluster", "describe_slot_counts", "DEFAULT_HEAP_MIB_PER_SLOT"]
