"""Rows and checksum of what a sink writes, observed by the job that writes it (`SinkFigures`)."""
from __future__ import annotations

import uuid

from ..data.store import SUBTASK_COLUMN

CHECKSUM_MODULUS = 1 << 64


class SinkFigures:
    """Rows and checksum of a sink's output, observed by the very job that writes it (Spark's
    `DataFrame.observe`: the aggregates ride along with the write, no second job reads the files
    back). The checksum is the sum of every row's xxhash64 over the data columns, mod 2^64, so it
    does not depend on row order or on how rows are split into files.

    `subtasks`: the subtasks written; with more than one, the frame given to `observe` carries the
    subtask column and the figures are taken per subtask. Observe the frame that is written, write
    it, then read the figures."""

    def __init__(self, frame, subtasks: range = range(1)) -> None:
        from pyspark.sql import Observation

        self.columns = [c for c in frame.columns if c != SUBTASK_COLUMN]  # analysed once, reused by the write
        self.subtasks = subtasks
        self._observation = Observation(f"rf_figures_{uuid.uuid4().hex}")

    def observe(self, frame):
        """`frame` with the figures' aggregates attached (unchanged when there is no column to hash:
        such an output has no figures, and nothing of it is published)."""
        from pyspark.sql import functions as F

        if not self.columns:
            return frame
        if len(self.subtasks) == 1:
            aggregates = _figure_columns(self.columns)
        else:
            subtask = F.col(SUBTASK_COLUMN)
            aggregates = [column for s in self.subtasks for column in _figure_columns(self.columns, subtask == s, s)]
        return frame.observe(self._observation, *aggregates)

    def total(self) -> tuple[int, int]:
        """Rows and checksum of the whole frame (after it was written)."""
        figures = self.per_subtask().get(str(self.subtasks[0]), {"rows": 0, "checksum": 0})
        return figures["rows"], figures["checksum"]

    def per_subtask(self) -> dict[str, dict[str, int]]:
        """``{subtask: {"rows", "checksum"}}`` of the subtasks that got rows (after the write)."""
        if not self.columns:
            return {}
        observed = self._observation.get
        if len(self.subtasks) == 1:
            found = {self.subtasks[0]: _figures_of(observed)}
        else:
            found = {s: _figures_of(observed, s) for s in self.subtasks}
        return {str(s): figures for s, figures in found.items() if figures["rows"]}


def _figure_columns(columns: list[str], where=None, suffix: object = "") -> list:
    """The aggregates behind `SinkFigures` over the data `columns`: every row, or the rows `where`
    holds, named ``rows<suffix>`` and ``checksum<suffix>``."""
    from pyspark.sql import functions as F

    hashed = F.xxhash64(*[F.col(c) for c in columns]).cast("decimal(38,0)")
    one = F.lit(1)
    if where is not None:
        one, hashed = F.when(where, one), F.when(where, hashed)
    return [F.count(one).alias(f"rows{suffix}"), F.sum(hashed).alias(f"checksum{suffix}")]


def _figures_of(observed, suffix: object = "") -> dict[str, int]:
    checksum = observed[f"checksum{suffix}"]
    return {"rows": int(observed[f"rows{suffix}"]), "checksum": int(checksum or 0) % CHECKSUM_MODULUS}


__all__ = ["CHECKSUM_MODULUS", "SinkFigures"]
