"""The slow-shard detector: which running shard attempts of one region task deserve a copy.

This module owns the *decision* of speculative execution, as a pure function of a snapshot of
attempts and the current time. Launching copies, blocklisting hosts, committing the first
finished attempt and cancelling the others belong to the speculation sensor, the executor and the
store; they call `detect` every `SpeculationConfig.interval` seconds and act on its `Decision`.

The shards of a region task are its sibling units (e.g. the 8 map-indexed task instances of one
Airflow task). Each shard has zero or more attempts: the original, speculative copies, retries.

Rules (FLIP-168 / seed 001, with Flink's later input-size refinement):

* Nothing happens until ``ceil(quantile * shards)`` shards have finished (default 75 %).
* A shard is finished when one of its attempts succeeded; the earliest-ended one is its winner
  (first finished wins), and its duration is the shard's running time. Failed, killed and
  lost-commit attempts never finish a shard.
* A running attempt is slow when its running time, counted from when it started on its host (so
  time spent waiting for slots is not slowness), is at least ``multiplier`` x the median running
  time of the finished shards and at least ``min_runtime``.
* Per shard only the newest live attempt is judged: a shard deserves another copy only when even
  its latest attempt is slow, and never once it has ``max_attempts`` live attempts.
* With ``weight_by_input`` and every finished winner and every live attempt reporting a positive
  ``input_bytes``, time per input byte is compared instead (a shard with 4x the input may take 4x
  as long); the ``min_runtime`` floor still applies. One attempt without a size turns it off for
  the whole call, so all shards are judged on the same basis.

Why ``min_runtime`` defaults to 10 s: Flink uses 1 min, but every attempt here can be a new
submission of the runtime that needs about 10 s just to start (see DESIGN.md). Below that floor every
shard of a fast region would look slow next to a quick median and get copied, doubling the load
for nothing.

The settings (`SpeculationConfig`) and whether a region may be speculated at all
(`speculation_allowed`, `SpeculationPolicy`) are `regionflow.scheduling.speculation_policy`'s.

Everything is deterministic (ties broken by shard and attempt id) and costs
O(attempts + shards log shards) per call.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from ..core.attempts import ATTEMPT_END_STATES, AttemptState
from ..core.errors import SpecError
from .speculation_policy import DEFAULT_CONFIG, SpeculationConfig

METRIC_PREFIX = "regionflow.speculation."

RUNNING = AttemptState.RUNNING
SUCCEEDED = AttemptState.SUCCEEDED
ATTEMPT_STATES = frozenset({RUNNING}) | ATTEMPT_END_STATES

Basis = Literal["time", "input_bytes"]

# --------------------------------------------------------------------------------------------
# Snapshot


@dataclass(frozen=True)
class AttemptView:
    """One attempt of one shard as the store saw it.

    `started_at` is when the attempt started running on `host` (epoch seconds), not when it was
    queued; `ended_at` is set once it left the running state.
    """

    shard: int
    attempt_id: str
    host: str
    started_at: float
    ended_at: float | None
    state: str
    input_bytes: int | None = None
    speculative: bool = False

    def __post_init__(self) -> None:
        if self.state not in ATTEMPT_STATES:
            raise SpecError(f"attempt {self.attempt_id!r} has state {self.state!r}; "
                            f"it must be one of {', '.join(sorted(ATTEMPT_STATES))}")
        if self.state == SUCCEEDED and self.ended_at is None:
            raise SpecError(f"attempt {self.attempt_id!r} succeeded but has no ended_at")

    @property
    def live(self) -> bool:
        return self.state == RUNNING

    def elapsed_s(self, now: float) -> float:
        """Running time so far; hosts' clocks may disagree slightly, so never negative."""
        return max(0.0, now - self.started_at)

    @property
    def duration_s(self) -> float | None:
        return None if self.ended_at is None else max(0.0, self.ended_at - self.started_at)


@dataclass(frozen=True)
class ShardView:
    """One shard and all its attempts; `finished` is derived (some attempt succeeded)."""

    shard: int
    attempts: tuple[AttemptView, ...] = ()

    def __post_init__(self) -> None:
        stray = [a.attempt_id for a in self.attempts if a.shard != self.shard]
        if stray:
            raise SpecError(f"attempt {stray[0]!r} does not belong to shard {self.shard}")

    @property
    def winner(self) -> AttemptView | None:
        """The first attempt to finish successfully (first finished wins)."""
        succeeded = [a for a in self.attempts if a.state == SUCCEEDED]
        return min(succeeded, key=lambda a: (a.ended_at, a.attempt_id), default=None)

    @property
    def finished(self) -> bool:
        return self.winner is not None

    @property
    def live(self) -> tuple[AttemptView, ...]:
        return tuple(a for a in self.attempts if a.live)


def shards_from_attempts(attempts: Iterable[AttemptView], total: int) -> tuple[ShardView, ...]:
    """Group a flat attempt list (as the store returns it) into shards 0..total-1.

    `total` is the region task's shard count: shards without any attempt yet still count towards
    the quantile.
    """
    grouped: dict[int, list[AttemptView]] = {index: [] for index in range(total)}
    for attempt in attempts:
        if attempt.shard not in grouped:
            raise SpecError(f"attempt {attempt.attempt_id!r} is for shard {attempt.shard}; "
                            f"shards are 0..{total - 1}")
        grouped[attempt.shard].append(attempt)
    return tuple(ShardView(index, tuple(grouped[index])) for index in range(total))


# --------------------------------------------------------------------------------------------
# Decision


@dataclass(frozen=True)
class SlowAttempt:
    shard: int
    attempt_id: str
    host: str
    elapsed_s: float
    threshold_s: float
    reason: str


@dataclass(frozen=True)
class Decision:
    """The detector's answer for one region task at one instant.

    `threshold_s` is the one time threshold in force (time basis); on the input-bytes basis each
    shard has its own, given in its `SlowAttempt`, and `threshold_s_per_byte` is the rate limit.
    """

    ready: bool
    finished: int
    total: int
    min_finished: int
    basis: Basis
    median_s: float | None
    threshold_s: float | None
    median_s_per_byte: float | None
    threshold_s_per_byte: float | None
    slow: tuple[SlowAttempt, ...]
    live_hosts: Mapping[int, frozenset[str]] = field(default_factory=dict)

    def excluded_hosts(self, shard: int) -> set[str]:
        """Hosts a copy of `shard` must avoid: those already running an attempt of it."""
        return set(self.live_hosts.get(shard, ()))


def min_finished_shards(quantile: float, total: int) -> int:
    """ceil(quantile * total), at least 1 when there are shards."""
    if total == 0:
        return 0
    # Exact arithmetic: in floats 0.7 * 10 is 7.000000000000001, whose ceiling would be 8.
    exact = Fraction(quantile).limit_denominator(10**6) * total
    return max(1, math.ceil(exact))


@dataclass(frozen=True)
class _Judge:
    """Compares one live attempt against the finished shards, on the basis chosen for the call."""

    config: SpeculationConfig
    median_s: float
    median_s_per_byte: float | None

    @property
    def time_threshold_s(self) -> float:
        return max(self.config.multiplier * self.median_s, self.config.min_runtime)

    def threshold_s_for(self, attempt: AttemptView) -> float:
        if self.median_s_per_byte is None:
            return self.time_threshold_s
        scaled = self.config.multiplier * self.median_s_per_byte * _input_bytes(attempt)
        return max(scaled, self.config.min_runtime)

    def is_slow(self, attempt: AttemptView, now: float) -> bool:
        elapsed = attempt.elapsed_s(now)
        if self.median_s_per_byte is None:
            return elapsed >= self.time_threshold_s
        rate = elapsed / _input_bytes(attempt)
        return elapsed >= self.config.min_runtime and rate >= self.config.multiplier * self.median_s_per_byte

    def reason(self, attempt: AttemptView, now: float) -> str:
        elapsed = attempt.elapsed_s(now)
        cfg = self.config
        if self.median_s_per_byte is None:
            return (f"running {elapsed:.1f} s on {attempt.host}; threshold {self.time_threshold_s:.1f} s = "
                    f"max({cfg.multiplier:g} x median {self.median_s:.1f} s, min_runtime {cfg.min_runtime:g} s)")
        return (f"running {elapsed:.1f} s on {attempt.host} for {attempt.input_bytes} input bytes: "
                f"{elapsed / _input_bytes(attempt):.3g} s/B >= {cfg.multiplier:g} x median "
                f"{self.median_s_per_byte:.3g} s/B, and >= min_runtime {cfg.min_runtime:g} s")


def _input_bytes(attempt: AttemptView) -> int:
    """An attempt's input bytes on the input-bytes basis, which is chosen only when every attempt
    involved has them (_weighted_basis); None there is the TypeError that arithmetic on it raises."""
    if attempt.input_bytes is None:
        raise TypeError(f"attempt {attempt.attempt_id!r} has no input_bytes on the input-bytes basis")
    return attempt.input_bytes


def _winner_duration_s(winner: AttemptView) -> float:
    """A winner succeeded, and a succeeded attempt has ended_at (AttemptView.__post_init__)."""
    duration = winner.duration_s
    assert duration is not None
    return duration


def _weighted_basis(config: SpeculationConfig, winners: Sequence[AttemptView],
                    live: Iterable[AttemptView]) -> bool:
    if not config.weight_by_input:
        return False
    return all(a.input_bytes is not None and a.input_bytes > 0 for group in (winners, live) for a in group)


def _newest(attempts: Sequence[AttemptView]) -> AttemptView:
    return max(attempts, key=lambda a: (a.started_at, a.attempt_id))


def _check_unique(shards: Sequence[ShardView]) -> None:
    seen: set[int] = set()
    for view in shards:
        if view.shard in seen:
            raise SpecError(f"shard {view.shard} appears twice in the snapshot")
        seen.add(view.shard)


def _overrun(slow: SlowAttempt) -> float:
    return slow.elapsed_s / slow.threshold_s if slow.threshold_s > 0 else math.inf


def detect(shards: Sequence[ShardView], now: float, config: SpeculationConfig = DEFAULT_CONFIG) -> Decision:
    """Judge every unfinished shard of one region task at time `now`.

    `slow` lists one attempt per shard that deserves a copy, the most overdue first (furthest past
    its threshold, then lowest shard).
    """
    _check_unique(shards)
    winners = {view.shard: view.winner for view in shards}
    finished_winners = [w for w in winners.values() if w is not None]
    unfinished = [view for view in shards if winners[view.shard] is None]
    live = {view.shard: view.live for view in unfinished if view.live}
    total, finished = len(shards), len(finished_winners)
    min_finished = min_finished_shards(config.quantile, total)
    median_s = statistics.median(_winner_duration_s(w) for w in finished_winners) if finished_winners else None
    live_hosts = {shard: frozenset(a.host for a in attempts) for shard, attempts in live.items()}
    ready = total > 0 and finished >= min_finished
    weighted = _weighted_basis(config, finished_winners, (a for group in live.values() for a in group))
    common: dict[str, Any] = dict(finished=finished, total=total, min_finished=min_finished, median_s=median_s,
                                  basis="input_bytes" if weighted else "time", live_hosts=live_hosts)
    if not ready:
        return Decision(ready=False, threshold_s=None, median_s_per_byte=None, threshold_s_per_byte=None,
                        slow=(), **common)
    median_rate = (statistics.median(_winner_duration_s(w) / _input_bytes(w) for w in finished_winners)
                   if weighted else None)
    assert median_s is not None  # ready: finished >= min_finished >= 1, so there are finished winners
    judge = _Judge(config, median_s, median_rate)
    slow = _slow_attempts(live, judge, now, config.max_attempts)
    return Decision(ready=True, threshold_s=None if weighted else judge.time_threshold_s,
                    median_s_per_byte=median_rate,
                    threshold_s_per_byte=None if median_rate is None else config.multiplier * median_rate,
                    slow=slow, **common)


def _slow_attempts(live: Mapping[int, Sequence[AttemptView]], judge: _Judge, now: float,
                   max_attempts: int) -> tuple[SlowAttempt, ...]:
    found = []
    for shard, attempts in live.items():
        if len(attempts) >= max_attempts:
            continue
        newest = _newest(attempts)
        if judge.is_slow(newest, now):
            found.append(SlowAttempt(shard, newest.attempt_id, newest.host, newest.elapsed_s(now),
                                     judge.threshold_s_for(newest), judge.reason(newest, now)))
    return tuple(sorted(found, key=lambda s: (-_overrun(s), s.shard)))


# --------------------------------------------------------------------------------------------
# Metrics


@dataclass(frozen=True)
class SpeculationMetrics:
    """The six per-region-task metrics of seed 001 (plus the per-byte threshold when weighting).

    `shard_running_s` maps a shard to the running time of its winner, or of its oldest live
    attempt while unfinished; shards with neither (not started, or waiting for a retry) are absent.
    """

    min_finished_before_speculation: int
    finished_shards: int
    speculative_attempts_launched: int
    threshold_s: float | None
    shard_running_s: Mapping[int, float]
    copies_won: int
    threshold_s_per_byte: float | None = None

    def as_flat_dict(self) -> dict[str, float]:
        """Metric name -> value; thresholds not known yet (quantile not reached) are left out."""
        flat = {
            "min_finished_before_speculation": float(self.min_finished_before_speculation),
            "finished_shards": float(self.finished_shards),
            "speculative_attempts_launched": float(self.speculative_attempts_launched),
            "threshold_s": self.threshold_s,
            "threshold_s_per_byte": self.threshold_s_per_byte,
            "copies_won": float(self.copies_won),
        }
        flat.update({f"shard_running_s.{shard}": value for shard, value in sorted(self.shard_running_s.items())})
        return {METRIC_PREFIX + name: float(value) for name, value in flat.items() if value is not None}


def _running_s(view: ShardView, now: float) -> float | None:
    winner = view.winner
    if winner is not None:
        return winner.duration_s
    live = view.live
    return max(a.elapsed_s(now) for a in live) if live else None


def metrics_from(shards: Sequence[ShardView], now: float, config: SpeculationConfig = DEFAULT_CONFIG,
                 launched: int | None = None) -> SpeculationMetrics:
    """Metrics of one region task; `launched` defaults to the speculative attempts in the snapshot."""
    decision = detect(shards, now, config)
    running = {view.shard: _running_s(view, now) for view in shards}
    winners = [view.winner for view in shards]
    if launched is None:
        launched = sum(a.speculative for view in shards for a in view.attempts)
    return SpeculationMetrics(
        min_finished_before_speculation=decision.min_finished,
        finished_shards=decision.finished,
        speculative_attempts_launched=launched,
        threshold_s=decision.threshold_s,
        shard_running_s={shard: value for shard, value in running.items() if value is not None},
        copies_won=sum(1 for w in winners if w is not None and w.speculative),
        threshold_s_per_byte=decision.threshold_s_per_byte,
    )


__all__ = [
    "AttemptView", "Decision", "ShardView", "SlowAttempt", "SpeculationMetrics", "detect", "metrics_from",
    "min_finished_shards", "shards_from_attempts",
]
