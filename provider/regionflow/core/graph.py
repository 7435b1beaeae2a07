"""The job graph a user writes: vertices with a parallelism, edges with a distribution and exchange.

Owns `Distribution`, `Exchange`, `Vertex`, `Edge`, `JobGraph`, the JSON job spec format, loading a job
from a spec file or a ``package.module:attribute`` reference, and validation. Validation names the
vertex or edge at fault and the fix; a graph that passes `JobGraph.validate` can always be planned.
"""
from __future__ import annotations

import importlib
import os
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from .errors import JobGraphError, SpecError
from .resources import UNKNOWN, ResourceProfile


class Distribution(Enum):
    """How a consumer's subtasks are wired to a producer's partitions."""

    FORWARD = "forward"  # pointwise, equal parallelism: subtask i reads partition i
    RESCALE = "rescale"  # pointwise, Flink's wiring for unequal parallelism
    HASH = "hash"  # all-to-all, partitioned by key columns
    REBALANCE = "rebalance"  # all-to-all, round robin
    BROADCAST = "broadcast"  # all-to-all, every consumer reads every partition whole

    @property
    def is_pointwise(self) -> bool:
        return self in (Distribution.FORWARD, Distribution.RESCALE)

    @classmethod
    def parse(cls, value: str | Distribution, where: str = "") -> Distribution:
        if isinstance(value, Distribution):
            return value
        key = str(value).strip().lower().replace("-", "_")
        key = _DISTRIBUTION_SYNONYMS.get(key, key)
        for member in cls:
            if member.value == key:
                return member
        names = ", ".join(m.name for m in cls) + " (synonyms POINTWISE, ALL_TO_ALL)"
        raise SpecError(f"{where}unknown distribution {value!r}; use one of {names}")


_DISTRIBUTION_SYNONYMS = {"pointwise": "rescale", "all_to_all": "broadcast"}


class Exchange(Enum):
    """Whether a consumer reads while the producer writes (pipelined) or after it finished (blocking)."""

    PIPELINED = "pipelined"
    BLOCKING = "blocking"

    @classmethod
    def parse(cls, value: str | Exchange | None, where: str = "") -> Exchange | None:
        if value is None or isinstance(value, Exchange):
            return value
        key = str(value).strip().lower()
        for member in cls:
            if member.value == key:
                return member
        raise SpecError(
            f"{where}unknown exchange {value!r}; use PIPELINED, BLOCKING, or leave it unset so the mode decides"
        )


@dataclass(frozen=True)
class Sink:
    """Where a sink vertex's output goes: written through regionflow's committer, so readers see
    each subtask's output whole and once."""

    path: str
    format: str = "parquet"

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path.strip():
            raise JobGraphError(f"sink path {self.path!r} is empty; give the directory the output goes to")
        if not self.is_absolute and os.path.normpath(self.path).split(os.sep)[0] in ("..", "."):
            raise JobGraphError(
                f"sink path {self.path!r} leaves the data directory's sinks/ folder (a relative sink path lives "
                f"under it); give a path inside it, or an absolute path or URI")
        if self.format not in SINK_FORMATS:
            raise JobGraphError(f"sink format {self.format!r} is not supported; use one of {', '.join(SINK_FORMATS)}")

    @property
    def is_absolute(self) -> bool:
        """An absolute path or a URI (``scheme://...``), used as given."""
        return "://" in self.path or self.path.startswith("/")


SINK_FORMATS = ("parquet",)


def sink_of(vertex: str, path: str, format: str = "parquet") -> Sink:
    """The sink of `vertex`; a bad one raises naming the vertex."""
    try:
        return Sink(path, format)
    except JobGraphError as error:
        raise JobGraphError(f"vertex {vertex!r}: {error}") from None


@dataclass(frozen=True)
class Vertex:
    """One step of the job; it runs as `parallelism` subtasks ``name#0 .. name#(p-1)``.

    `fn` is the step itself (``fn(spark, inputs, ctx) -> DataFrame``), a callable or a
    ``"package.module:function"`` reference resolved where it runs.
    """

    name: str
    parallelism: int
    resources: ResourceProfile = UNKNOWN
    slot_sharing_group: str | None = None
    fn: Callable[..., Any] | str | None = field(default=None, compare=False, repr=False)
    sink: Sink | None = None
    reads: tuple[str, ...] = ()  # input paths the function reads; checked before any Spark work
    # (min, max) of an adaptive vertex: `parallelism` is max until `core.adaptive` decides it
    parallelism_range: tuple[int, int] | None = None
    # the function itself writes outside regionflow's committer (a database, an API): a second attempt
    # would write again, so its region is never speculated
    external_writes: bool = False
    # an adaptive vertex's bytes per subtask: when its unit starts, the parallelism is at most
    # ceil(bytes read from blocking partitions / this) (`core.adaptive.at_grant`)
    target_bytes_per_subtask: int | None = None

    @property
    def declared_parallelism(self) -> int | tuple[int, int]:
        """The parallelism as declared: a number, or an adaptive vertex's (min, max)."""
        return self.parallelism_range if self.parallelism_range is not None else self.parallelism

    def resolve_fn(self) -> Callable[..., Any]:
        """The vertex function, importing it when given by reference."""
        if callable(self.fn):
            return self.fn
        if isinstance(self.fn, str):
            fn: Callable[..., Any] = _import_reference(self.fn, f"vertex {self.name!r}")
            if not callable(fn):
                raise JobGraphError(f"vertex {self.name!r}: fn {self.fn!r} names a {type(fn).__name__}, not a "
                                    f"function; name a function fn(spark, inputs, ctx) -> DataFrame")
            return fn
        raise JobGraphError(f"vertex {self.name!r} has no function; give fn=callable or fn='module:function'")

    @property
    def fn_reference(self) -> str | None:
        """``module:qualname`` of the vertex function, when it can be imported by that name."""
        if isinstance(self.fn, str):
            return self.fn
        module, qualname = getattr(self.fn, "__module__", None), getattr(self.fn, "__qualname__", "")
        if module and qualname and "<" not in qualname and module != "__main__":
            return f"{module}:{qualname}"
        return None


@dataclass(frozen=True)
class Edge:
    """A data exchange from `src` to `dst`; `exchange=None` lets the global mode decide."""

    src: str
    dst: str
    distribution: Distribution
    exchange: Exchange | None = None
    keys: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        suffix = f" [{self.exchange.value}]" if self.exchange else ""
        return f"{self.src} -{self.distribution.name}-> {self.dst}{suffix}"


class JobGraph:
    """Vertices and edges of one job, in the order they were added."""

    def __init__(self, name: str = "job", default_mode: str | None = None) -> None:
        self.name = name
        self.default_mode = default_mode  # the exchange mode a plan uses when none is given
        self.vertices: dict[str, Vertex] = {}
        self.edges: list[Edge] = []
        self._duplicate_names: list[str] = []

    def add_vertex(
        self,
        name: str,
        parallelism: int | tuple[int, int],
        resources: ResourceProfile = UNKNOWN,
        slot_sharing_group: str | None = None,
        fn: Callable[..., Any] | str | None = None,
        sink: Sink | str | None = None,
        reads: Iterable[str] | None = (),
        external_writes: bool = False,
        target_bytes_per_subtask: int | None = None,
    ) -> Vertex:
        if not isinstance(name, str):
            raise JobGraphError(f"vertex name {name!r} is a {type(name).__name__}; give a non-empty string")
        if isinstance(sink, str):
            sink = sink_of(name, sink)
        reads = reads_of(name, reads)
        current: Any = parallelism
        span: Any = None
        if isinstance(parallelism, (tuple, list)):  # adaptive: [min, max], checked by the vertex model
            span = tuple(parallelism)
            current = span[-1] if span else 0
        vertex = Vertex(name, current, resources, slot_sharing_group, fn, sink, reads, span, external_writes,
                        target_bytes_per_subtask)
        if name in self.vertices:
            self._duplicate_names.append(name)
        else:
            self.vertices[name] = vertex
        return vertex

    def connect(
        self,
        src: str,
        dst: str,
        distribution: Distribution | str,
        exchange: Exchange | str | None = None,
        keys: Iterable[str] = (),
    ) -> Edge:
        where = f"edge {src} -> {dst}: "
        for end in (src, dst):
            if not isinstance(end, str):
                raise JobGraphError(f"{where}vertex {end!r} is a {type(end).__name__}; name vertices by strings")
        edge = Edge(src, dst, Distribution.parse(distribution, where), Exchange.parse(exchange, where),
                    _key_columns(keys, where))
        self.edges.append(edge)
        return edge

    def validate(self) -> JobGraph:
        """Raise `JobGraphError` for the first problem found; return self when the graph is sound."""
        self._check_names()
        for vertex in self.vertices.values():
            _check_vertex(vertex)
        return self._check_links()

    def validate_structure(self) -> JobGraph:
        """`validate` without each vertex's own fields, for a caller that checked them against the
        vertex model already (the JSON spec reader): duplicates, edges, cycles."""
        self._check_names()
        return self._check_links()

    def _check_names(self) -> None:
        if self._duplicate_names:
            name = self._duplicate_names[0]
            raise JobGraphError(f"duplicate vertex name {name!r}; every vertex needs a unique name")
        if not self.vertices:
            raise JobGraphError(f"job {self.name!r} has no vertices; add at least one vertex")

    def _check_links(self) -> JobGraph:
        for edge in self.edges:
            self._check_edge(edge)
        self.topological_order()
        return self

    def _check_edge(self, edge: Edge) -> None:
        for end in (edge.src, edge.dst):
            if end not in self.vertices:
                raise JobGraphError(
                    f"edge {edge.src} -> {edge.dst} names unknown vertex {end!r}; "
                    f"known vertices: {', '.join(sorted(self.vertices)) or 'none'}"
                )
        if edge.src == edge.dst:
            raise JobGraphError(f"edge {edge.src} -> {edge.dst} is a self-loop; a job graph must be acyclic")
        src, dst = self.vertices[edge.src], self.vertices[edge.dst]
        if edge.distribution is Distribution.FORWARD and src.declared_parallelism != dst.declared_parallelism:
            raise JobGraphError(
                f"edge {edge.src} -> {edge.dst} is FORWARD but the parallelisms differ "
                f"({_shown(src.declared_parallelism)} vs {_shown(dst.declared_parallelism)}); use RESCALE, or give "
                f"both the same parallelism (an adaptive one: the same [min, max])"
            )
        if edge.distribution is Distribution.HASH and not edge.keys:
            raise JobGraphError(
                f"edge {edge.src} -> {edge.dst} is HASH but names no key columns; give keys, e.g. keys=['customer_id']"
            )
        if edge.keys and edge.distribution is not Distribution.HASH:
            raise JobGraphError(
                f"edge {edge.src} -> {edge.dst} is {edge.distribution.name} but names key columns "
                f"{list(edge.keys)!r}, which only a HASH edge uses; remove the keys or make the edge HASH"
            )

    def topological_order(self) -> list[str]:
        """Vertex names, producers before consumers (stable: insertion order breaks ties)."""
        indegree = {name: 0 for name in self.vertices}
        successors: dict[str, list[str]] = {name: [] for name in self.vertices}
        for edge in self.edges:
            if edge.src in successors and edge.dst in indegree:
                successors[edge.src].append(edge.dst)
                indegree[edge.dst] += 1
        ready = deque(name for name, degree in indegree.items() if degree == 0)
        order: list[str] = []
        while ready:
            name = ready.popleft()
            order.append(name)
            for succ in successors[name]:
                indegree[succ] -= 1
                if indegree[succ] == 0:
                    ready.append(succ)
        if len(order) < len(self.vertices):
            cycle = _find_cycle({n for n, d in indegree.items() if d > 0}, successors)
            raise JobGraphError(
                f"the job graph has a cycle: {' -> '.join(cycle)}; remove one of these edges"
            )
        return order

    # ---- spec format -------------------------------------------------------------------------

    def to_spec(self) -> dict[str, Any]:
        """This graph as a JSON job spec (`regionflow.core.jobspec`)."""
        from .jobspec import graph_to_spec

        return graph_to_spec(self)

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], name: str | None = None) -> JobGraph:
        """The graph of a JSON job spec, checked against its declared model (`regionflow.core.jobspec`)."""
        from .jobspec import graph_from_spec

        return graph_from_spec(spec, name)


def reads_of(vertex: str, reads: Any) -> tuple[str, ...]:
    """A vertex's ``reads`` as a tuple: None is no reads, a string one path; the paths themselves are
    checked by the vertex model."""
    if reads is None:
        return ()
    if isinstance(reads, str):
        return (reads,)
    try:
        return tuple(reads)
    except TypeError:
        raise JobGraphError(f"vertex {vertex!r}: reads={reads!r} is not a path or a list of paths; give e.g. "
                            f"reads=['/data/orders'], or leave reads out") from None


def _key_columns(keys: Any, where: str) -> tuple[str, ...]:
    if isinstance(keys, str):
        return (keys,)
    try:
        columns = tuple(keys)
    except TypeError:
        raise SpecError(f"{where}keys must be a list of column names, got {keys!r}") from None
    if not all(isinstance(column, str) and column for column in columns):
        raise SpecError(f"{where}keys must be non-empty column names, got {list(columns)!r}")
    return columns


MAX_PARALLELISM = 32768  # Flink's upper bound for a vertex's (max) parallelism, for the same reason:
# the plan holds per-subtask state, so a typo (1000000000) must fail at once, not exhaust memory


def _check_vertex(vertex: Vertex) -> None:
    """A vertex built in Python (the operators, `JobGraph.add_vertex`) goes through the same declared
    model as one read from a JSON spec (`jobspec.VERTEX`): its JSON-able fields are checked there; a
    callable `fn`, a `Sink` and a `ResourceProfile` are already checked objects."""
    from .jobspec import VERTEX

    view: dict[str, Any] = {"id": vertex.name, "parallelism": _shown(vertex.declared_parallelism)}
    if vertex.fn is not None and not callable(vertex.fn):
        view["fn"] = vertex.fn
    if vertex.sink is not None and not isinstance(vertex.sink, Sink):
        view["sink"] = vertex.sink
    if vertex.slot_sharing_group is not None:
        view["slot_sharing_group"] = vertex.slot_sharing_group
    if vertex.reads:
        view["reads"] = list(vertex.reads)
    if vertex.external_writes is not False:
        view["external_writes"] = vertex.external_writes
    if vertex.target_bytes_per_subtask is not None:
        view["target_bytes_per_subtask"] = vertex.target_bytes_per_subtask
    try:
        VERTEX.validate(view, f"vertex {vertex.name!r}")
    except SpecError as error:
        raise JobGraphError(str(error)) from None


def _shown(declared: Any) -> Any:
    """A declared parallelism as JSON shows it: a number or [min, max]."""
    return list(declared) if isinstance(declared, tuple) else declared


def is_reference(value: Any) -> bool:
    """A ``'package.module:function'`` string (no spaces, both parts present)."""
    module, _, attribute = value.partition(":") if isinstance(value, str) else ("", "", "")
    return bool(module.strip()) and bool(attribute.strip()) and " " not in value.strip()


def _find_cycle(candidates: set[str], successors: Mapping[str, list[str]]) -> list[str]:
    """A cycle among the vertices Kahn's algorithm left over. Every leftover vertex has a leftover
    predecessor (that is why it was left), so walking predecessors must revisit a vertex: the walk
    from there on is a cycle. (Walking successors could dead-end downstream of the cycle.)"""
    predecessors: dict[str, list[str]] = {name: [] for name in candidates}
    for name in candidates:
        for succ in successors[name]:
            if succ in candidates:
                predecessors[succ].append(name)
    node = min(candidates)
    path, seen = [node], {node: 0}
    while True:
        node = min(predecessors[node])
        if node in seen:
            cycle = path[seen[node]:] + [node]
            cycle.reverse()
            return cycle
        seen[node] = len(path)
        path.append(node)


def load_job(reference: str) -> JobGraph:
    """Load a job from a JSON spec file, from ``package.module:attribute`` naming a JobGraph (or a
    zero-argument callable returning one), or from ``path/to/dag_file.py#dag_id`` (a DAG file that
    calls regionflow.transform)."""
    path, _, name = reference.partition("#")
    if path.endswith(".py"):
        return load_dag_file_job(path, name or None)
    if os.path.exists(reference) or reference.endswith(".json"):
        return _load_spec_file(reference)
    if ":" in reference:
        return _load_attribute(reference)
    raise SpecError(
        f"cannot load job {reference!r}: give a JSON job spec file, 'package.module:attribute' or a DAG file"
    )


def load_dag_file_job(path: str, name: str | None = None) -> JobGraph:
    """Import a DAG file and return the job its regionflow.transform() call registered: the one named
    `name`, or the only one (`regionflow.core.loading.dag_file_job`)."""
    from .loading import dag_file_job

    return dag_file_job(path, name)


def _load_spec_file(path: str) -> JobGraph:
    from .jobspec import load_spec_file

    return load_spec_file(path)


def _import_reference(reference: str, what: str) -> Any:
    """Import ``package.module:attribute`` (attribute may be dotted)."""
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise SpecError(f"cannot import module {module_name!r} for {what} ({reference!r}): {error}") from None
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise SpecError(f"module {module_name!r} has no attribute {attribute!r} (for {what})") from None
    return value


def _load_attribute(reference: str) -> JobGraph:
    from .loading import attribute_job

    return attribute_job(reference)
