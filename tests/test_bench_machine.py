"""The machine-speed probe the core benches print next to their figures (`rfbench.machine`)."""
from __future__ import annotations

import pytest

from rfbench.machine import QUIET_CPU_UNIT_MS, MachineSpeed, cpu_unit_times, with_machine_speed


def test_a_box_twice_as_slow_doubles_a_rate_and_halves_a_duration_in_the_estimate():
    speed = MachineSpeed(2 * QUIET_CPU_UNIT_MS)
    assert speed.slowdown == 2.0
    assert speed.quiet_rate(30_000) == 60_000 and speed.quiet_seconds(0.8) == 0.4
    assert speed.to_dict() == {"cpu_unit_ms": 48.0, "quiet_cpu_unit_ms": QUIET_CPU_UNIT_MS, "slowdown": 2.0}


def test_a_probe_after_the_run_is_averaged_with_the_one_before():
    before = MachineSpeed(1000.0)  # far from any real unit: the mean must move towards it
    after = MachineSpeed.probe(2, earlier=before)
    assert after.cpu_unit_ms > 500 and after.cpu_unit_ms < 1000
    assert len(cpu_unit_times(3)) == 3 and all(t > 0 for t in cpu_unit_times(3))


def test_with_machine_speed_keeps_the_figures_and_scales_only_the_named_ones():
    result = with_machine_speed(lambda: {"rate": 1000.0, "wall_s": 2.0, "other": 7}, ("rate",), ("wall_s",))
    slowdown = result["machine"]["slowdown"]
    assert result["rate"] == 1000.0 and result["other"] == 7
    assert set(result["quiet_estimate"]) == {"rate", "wall_s"}
    assert result["quiet_estimate"]["rate"] == pytest.approx(1000 * slowdown, rel=0.01)
    assert result["quiet_estimate"]["wall_s"] == pytest.approx(2.0 / slowdown, rel=0.01)
