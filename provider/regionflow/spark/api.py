"""What a vertex function sees: ``fn(spark, inputs, ctx) -> DataFrame``.

`inputs` maps each upstream vertex name to the DataFrame of the partitions this subtask consumes
(a second edge from the same vertex appears as ``"<name>[<edge index>]"``). `ctx` is a
`TaskContext`: which subtask this is, of how many, in which attempt and region; a source uses
`ctx.split(total)` to pick its share of the input.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskContext:
    job: str
    vertex: str
    subtask_index: int
    parallelism: int
    attempt_id: str
    region: str
    run_id: str

    @property
    def subtask(self) -> str:
        return f"{self.vertex}#{self.subtask_index}"

    def split(self, total: int) -> tuple[int, int]:
        """This subtask's half-open share [start, end) of `total` items, split evenly."""
        return self.subtask_index * total // self.parallelism, (self.subtask_index + 1) * total // self.parallelism


def reference_context(job: str, vertex: str, run_id: str) -> TaskContext:
    """The context of the single subtask a vertex runs as in `regionflow run --reference`."""
    return TaskContext(job, vertex, 0, 1, "reference", "reference", run_id)
