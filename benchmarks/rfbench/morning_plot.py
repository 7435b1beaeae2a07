"""The picture of ``benchmarks/morning.py``: slot occupancy over time per setup, and run latencies per setup.

One PNG per invocation: a row per setup with its busy slots over time (the first repeat; a step line of the
slots held by running task instances, the cluster's slots dashed), and below them the latency of every run of
every repeat as a strip plot per setup. Needs matplotlib (``pip install '.[bench]'``); without it the benchmark
says so on stderr and draws nothing.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence

LABELS = {"airflow": "1: Airflow pool + shared Spark (task per vertex)",
          "airflow_submit": "2: Airflow pool + a Spark submission per task",
          "regionflow_blocking": "3: regionflow, all-blocking (region per vertex)",
          "regionflow": "3: regionflow, each DAG's best mode"}
SHORT = {"airflow": "1 Airflow", "airflow_submit": "2 submit", "regionflow_blocking": "3 blocking",
         "regionflow": "3 best mode"}
COLOURS = {"airflow": "#8c8c8c", "airflow_submit": "#b07aa1", "regionflow_blocking": "#4c72b0",
           "regionflow": "#dd8452"}


def busy_steps(spans: Sequence[Mapping], until: float) -> tuple[list[float], list[int]]:
    """Times and busy slots at each, as a step function: every span adds its slots from start to end."""
    events: dict[float, int] = {0.0: 0}
    for span in spans:
        events[span["start_s"]] = events.get(span["start_s"], 0) + span["slots"]
        events[span["end_s"]] = events.get(span["end_s"], 0) - span["slots"]
    times, busy, level = [], [], 0
    for at in sorted(events):
        level += events[at]
        times.append(at)
        busy.append(level)
    times.append(max(until, times[-1]))
    busy.append(level)
    return times, busy


def draw(path: str, intervals: Mapping[str, Sequence[Sequence[Mapping]]], figures: Mapping[str, Mapping],
         slots: int, progress: Callable[[str], None]) -> str | None:
    """Write the PNG to `path`; its path, or None (and why on `progress`) when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("morning: no picture: matplotlib is not installed (pip install '.[bench]')")
        return None
    setups = [name for name in intervals if intervals[name]]
    if not setups:
        return None
    horizon = max((span["end_s"] for name in setups for span in intervals[name][0]), default=1.0)
    figure, axes = plt.subplots(len(setups) + 1, 1, figsize=(10, 2.1 * len(setups) + 3.2),
                                gridspec_kw={"height_ratios": [1.0] * len(setups) + [1.4]})
    for axis, name in zip(axes, setups, strict=False):
        times, busy = busy_steps(intervals[name][0], horizon)
        axis.fill_between(times, busy, step="post", color=COLOURS.get(name, "#55a868"), alpha=0.8)
        axis.axhline(slots, color="black", linestyle="--", linewidth=0.8)
        makespan = figures[name].get("makespan_s")
        axis.set_title(f"{LABELS.get(name, name)}: makespan {makespan} s", fontsize=9, loc="left")
        axis.set_xlim(0, horizon * 1.02)
        axis.set_ylim(0, slots + 0.5)
        axis.set_ylabel("busy slots", fontsize=8)
    axes[len(setups) - 1].set_xlabel("seconds since the first trigger (first repeat)", fontsize=8)
    latency_axis = axes[-1]
    for row, name in enumerate(setups):
        values = [run["latency_s"] for run in figures[name].get("per_run", ())]
        jitter = [row + ((index % 5) - 2) * 0.06 for index in range(len(values))]
        latency_axis.scatter(values, jitter, color=COLOURS.get(name, "#55a868"), s=18)
        p95 = figures[name].get("latency_p95_s")
        if p95 is not None:
            latency_axis.plot([p95, p95], [row - 0.3, row + 0.3], color="black", linewidth=1)
    latency_axis.set_yticks(range(len(setups)), [SHORT.get(name, name) for name in setups])
    latency_axis.invert_yaxis()  # the same order as the panels above
    latency_axis.set_xlabel("run latency, trigger to end (s); bar: p95", fontsize=8)
    latency_axis.set_xlim(left=0)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    progress(f"morning: picture written to {path}")
    return path
