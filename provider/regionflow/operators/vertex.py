"""Declaring a job in an Airflow DAG: vertex operators joined by exchanges.

    orders = SparkVertexOperator(task_id="orders", parallelism=4, fn=read_orders)
    clean = SparkVertexOperator(task_id="clean", parallelism=4, fn=clean_orders)
    orders >> forward() >> clean >> hash_by("customer_id") >> totals
    [clean, products] >> broadcast() >> enrich           # several producers at once
    regionflow.transform(dag, mode="pointwise-pipelined-only")

A plain ``a >> b`` between two vertices is FORWARD when their parallelisms are equal, else RESCALE.
Vertex operators only declare; `regionflow.transform` replaces them by one region task per logical
region. A vertex operator that runs anyway (transform was not called) fails with that advice.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from airflow.sdk import BaseOperator

from ..core.errors import JobGraphError, ResourceError
from ..core.graph import Distribution, Exchange, Sink, reads_of, sink_of
from ..core.resources import UNKNOWN, ResourceProfile
from ..core.templates import TEMPLATED_FIELDS
from ..scheduling.speculation_policy import parse_switch


@dataclass(frozen=True)
class ExchangeSpec:
    """How the next `>>` connects its producers to its consumer."""

    distribution: Distribution
    keys: tuple[str, ...] = ()
    exchange: Exchange | None = None

    def __rrshift__(self, producers: SparkVertexOperator | Sequence[SparkVertexOperator]) -> _PendingEdge:
        listed = _as_list(producers)
        for producer in listed:
            _check_vertex_operand(producer, f"{_name(producer)} >> {self.text}")
        return _PendingEdge(listed, self)

    def update_relative(self, other: Any, upstream: bool = True, edge_modifier: Any = None) -> None:
        """Airflow's ``task >> spec`` lands here when `task` is not a SparkVertexOperator (its own
        ``>>`` runs first): say what is wrong instead of Airflow's AttributeError."""
        _check_vertex_operand(other, f"{_name(other)} >> {self.text}")

    @property
    def text(self) -> str:
        return f"{self.distribution.name.lower()}(...)"


def forward(exchange: str | None = None) -> ExchangeSpec:
    return ExchangeSpec(Distribution.FORWARD, exchange=Exchange.parse(exchange))


def rescale(exchange: str | None = None) -> ExchangeSpec:
    return ExchangeSpec(Distribution.RESCALE, exchange=Exchange.parse(exchange))


def hash_by(*keys: str, exchange: str | None = None) -> ExchangeSpec:
    return ExchangeSpec(Distribution.HASH, tuple(keys), Exchange.parse(exchange))


def rebalance(exchange: str | None = None) -> ExchangeSpec:
    return ExchangeSpec(Distribution.REBALANCE, exchange=Exchange.parse(exchange))


def broadcast(exchange: str | None = None) -> ExchangeSpec:
    return ExchangeSpec(Distribution.BROADCAST, exchange=Exchange.parse(exchange))


@dataclass(frozen=True)
class DeclaredEdge:
    src: str
    spec: ExchangeSpec


class _PendingEdge:
    """``producers >> spec``, waiting for its consumer."""

    def __init__(self, producers: list[SparkVertexOperator], spec: ExchangeSpec) -> None:
        self.producers = producers
        self.spec = spec

    def __rshift__(self, consumers: SparkVertexOperator | Sequence[SparkVertexOperator]):
        consumers_list = _as_list(consumers)
        for consumer in consumers_list:
            _check_vertex_operand(consumer, f"{_names(self.producers)} >> {self.spec.text} >> {_name(consumer)}")
        for consumer in consumers_list:
            for producer in self.producers:
                consumer.regionflow_inputs.append(DeclaredEdge(producer.task_id, self.spec))
                producer.set_downstream(consumer)
        return consumers


class SparkVertexOperator(BaseOperator):
    """A PySpark step of a regionflow job: ``fn(spark, inputs, ctx) -> DataFrame``, run as
    `parallelism` subtasks, or ``parallelism=(min, max)``: adaptive, decided at parse time from the
    cluster's slots and again when its unit starts, from the slots granted and, with
    `target_bytes_per_subtask`, the bytes it reads (`regionflow.core.adaptive`). Resources are per
    subtask (cpu, heap_mib, off_heap_mib, managed_mib, extended such as gpu).

    ``sink`` and ``reads`` are templated fields (``sink="orders/ds={{ ds }}"``): a vertex operator never runs,
    so `regionflow.transform` hands their templates to the region task that runs the vertex, as its own
    templated field ``vertex_templates``, which Airflow renders when that task runs."""

    ui_color = "#fde9c4"
    template_fields = TEMPLATED_FIELDS

    def __init__(self, *, parallelism: int | tuple[int, int], fn: Callable[..., Any] | str,
                 resources: ResourceProfile | dict | None = None, slot_sharing_group: str | None = None,
                 sink: Sink | str | None = None, reads: Iterable[str] | None = (),
                 speculation: bool | str | None = None,
                 external_writes: bool = False, target_bytes_per_subtask: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # None: inherit the DAG's (transform(speculation=...)); a region is speculated only when all its
        # vertices end up on.
        self.speculation = None if speculation is None else parse_switch(speculation, f"of vertex {self.task_id!r}")
        self.parallelism = tuple(parallelism) if isinstance(parallelism, list) else parallelism
        self.fn = fn
        self.vertex_resources = _profile(resources, self.task_id)  # BaseOperator owns `resources` (its own format)
        self.slot_sharing_group = slot_sharing_group
        self.sink = sink_of(self.task_id, sink) if isinstance(sink, str) else sink
        self.reads = reads_of(self.task_id, reads)  # None: no reads, like leaving it out
        self.external_writes = external_writes  # checked by the vertex model when the graph is built
        self.target_bytes_per_subtask = target_bytes_per_subtask  # likewise
        self.regionflow_inputs: list[DeclaredEdge] = []

    def __rshift__(self, other):
        if isinstance(other, ExchangeSpec):
            return _PendingEdge([self], other)
        return super().__rshift__(other)

    def execute(self, context: Any) -> None:
        raise RuntimeError(f"vertex {self.task_id!r} is a declaration: call regionflow.transform(dag) at the end of "
                           "the DAG file so that it runs inside a region task")


def spark_vertex(parallelism: int | tuple[int, int],
                 **options: Any) -> Callable[[Callable[..., Any]], Callable[..., SparkVertexOperator]]:
    """TaskFlow-style: ``@spark_vertex(parallelism=4)`` on ``def clean(spark, inputs, ctx)``; calling
    ``clean()`` inside the DAG creates the vertex (task_id = the function's name unless given)."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., SparkVertexOperator]:
        def create(**overrides: Any) -> SparkVertexOperator:
            arguments = {"task_id": fn.__name__, "parallelism": parallelism, "fn": fn, **options, **overrides}
            return SparkVertexOperator(**arguments)

        create.__name__ = fn.__name__
        create.__doc__ = fn.__doc__
        return create

    return decorate


def _profile(resources: ResourceProfile | dict | None, task_id: str) -> ResourceProfile:
    if resources is None:
        return UNKNOWN
    if isinstance(resources, ResourceProfile):
        return resources
    if not isinstance(resources, dict):
        raise ResourceError(f"vertex {task_id!r}: resources={resources!r} is not a mapping; give e.g. "
                            f"resources={{'cpu': 1, 'heap_mib': 1024}}")
    try:
        return ResourceProfile.from_dict(resources)
    except ResourceError as error:
        raise ResourceError(f"vertex {task_id!r}: {error}") from None


def _check_vertex_operand(task: Any, expression: str) -> None:
    if not isinstance(task, SparkVertexOperator):
        raise JobGraphError(f"{expression}: an exchange connects SparkVertexOperators only; link other tasks "
                            f"with a plain >>")


def _name(task: Any) -> str:
    return repr(getattr(task, "task_id", task))


def _names(tasks: Sequence[Any]) -> str:
    return ", ".join(_name(task) for task in tasks)


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]
