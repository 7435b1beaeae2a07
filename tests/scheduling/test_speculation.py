"""The slow-shard detector on recorded timings: gating, thresholds, weighting, config, metrics, policy."""
from __future__ import annotations

import math

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from regionflow.core.errors import SpecError
from regionflow.scheduling.speculation import (
    AttemptView,
    ShardView,
    detect,
    metrics_from,
    min_finished_shards,
    shards_from_attempts,
)
from regionflow.scheduling.speculation_policy import SpeculationConfig, SpeculationPolicy, speculation_allowed

NO_WEIGHT = SpeculationConfig(weight_by_input=False)


def done(shard: int, duration: float, start: float = 0.0, *, attempt: str | None = None, host: str = "h0",
         input_bytes: int | None = None, speculative: bool = False) -> AttemptView:
    return AttemptView(shard, attempt or f"a{shard}", host, start, start + duration, "succeeded",
                       input_bytes, speculative)


def running(shard: int, start: float, *, attempt: str | None = None, host: str = "h1",
            input_bytes: int | None = None, speculative: bool = False) -> AttemptView:
    return AttemptView(shard, attempt or f"a{shard}", host, start, None, "running", input_bytes, speculative)


def region(*attempts: AttemptView, total: int) -> tuple[ShardView, ...]:
    return shards_from_attempts(attempts, total)


def five_second_region(*unfinished: AttemptView, total: int = 8) -> tuple[ShardView, ...]:
    """The shards below the lowest one given finished in 5 s each; the rest are as given."""
    first_given = min((a.shard for a in unfinished), default=total)
    finished = [done(shard, 5.0) for shard in range(first_given)]
    return region(*finished, *unfinished, total=total)


# ---- quantile gating ------------------------------------------------------------------------


def test_seven_of_eight_finished_reaches_the_075_quantile():
    decision = detect(five_second_region(running(7, start=0.0)), now=100.0)
    assert (decision.ready, decision.finished, decision.total, decision.min_finished) == (True, 7, 8, 6)
    assert decision.median_s == 5.0 and decision.threshold_s == 10.0
    assert [s.shard for s in decision.slow] == [7]


def test_five_of_eight_finished_is_not_ready_and_flags_nothing():
    shards = five_second_region(running(5, 0.0), running(6, 0.0), running(7, 0.0))
    decision = detect(shards, now=1000.0)
    assert not decision.ready and decision.finished == 5 and decision.min_finished == 6
    assert decision.slow == () and decision.threshold_s is None


def test_min_finished_is_an_exact_ceiling():
    assert min_finished_shards(0.7, 10) == 7  # 0.7 * 10 is 7.000000000000001 in floats
    assert min_finished_shards(0.75, 8) == 6
    assert min_finished_shards(1.0, 3) == 3
    assert min_finished_shards(0.01, 3) == 1
    assert min_finished_shards(0.5, 0) == 0


def test_an_empty_region_is_never_ready():
    decision = detect((), now=10.0)
    assert not decision.ready and decision.slow == ()


# ---- multiplier and min_runtime floor -------------------------------------------------------


def test_min_runtime_floor_decides_over_a_low_multiplied_median():
    # median 5 s: 1.5 x 5 = 7.5 s, but the 10 s floor is the threshold in force.
    shards = five_second_region(running(6, start=0.0), running(7, start=3.0))
    decision = detect(shards, now=12.0, config=NO_WEIGHT)
    assert decision.threshold_s == 10.0
    slow = decision.slow
    assert [(s.shard, s.elapsed_s, s.threshold_s) for s in slow] == [(6, 12.0, 10.0)]  # shard 7: 9 s
    assert "threshold 10.0 s" in slow[0].reason and "min_runtime 10 s" in slow[0].reason


def test_multiplier_decides_when_it_is_above_the_floor():
    finished = [done(shard, 20.0) for shard in range(6)]
    shards = region(*finished, running(6, start=0.0), running(7, start=1.0), total=8)
    decision = detect(shards, now=30.0, config=NO_WEIGHT)
    assert decision.threshold_s == 30.0
    assert [s.shard for s in decision.slow] == [6]  # 30 s >= 30 s; shard 7 has run 29 s


def test_running_time_counts_from_the_attempts_own_start():
    # Both attempts were queued at 0; shard 7 only started on its host at 5, so it has run 9 s.
    shards = five_second_region(running(6, start=0.0), running(7, start=5.0))
    decision = detect(shards, now=14.0, config=NO_WEIGHT)
    assert [(s.shard, s.elapsed_s) for s in decision.slow] == [(6, 14.0)]


def test_slow_attempts_are_listed_slowest_first():
    shards = region(*(done(s, 5.0) for s in range(6)), running(6, 5.0), running(7, 0.0),
                    running(8, 2.0), total=9)
    decision = detect(shards, now=20.0, config=SpeculationConfig(quantile=0.5, weight_by_input=False))
    assert [s.shard for s in decision.slow] == [7, 8, 6]


# ---- attempts: max_attempts, failures, copies -----------------------------------------------


def test_a_shard_with_max_attempts_live_gets_no_further_copy():
    shards = five_second_region(running(6, 0.0, attempt="orig", host="h1"),
                                running(6, 0.0, attempt="copy", host="h2", speculative=True),
                                running(7, 0.0))
    decision = detect(shards, now=60.0, config=NO_WEIGHT)
    assert [s.shard for s in decision.slow] == [7]
    three = SpeculationConfig(max_attempts=3, weight_by_input=False)
    assert [s.shard for s in detect(shards, now=60.0, config=three).slow] == [6, 7]


def test_only_the_newest_live_attempt_of_a_shard_is_judged():
    config = SpeculationConfig(max_attempts=3, weight_by_input=False)
    shards = five_second_region(running(7, 0.0, attempt="orig", host="h1"),
                                running(7, 55.0, attempt="copy", host="h2", speculative=True))
    assert detect(shards, now=60.0, config=config).slow == ()  # the copy has run 5 s
    slow = detect(shards, now=70.0, config=config).slow
    assert [(s.attempt_id, s.elapsed_s) for s in slow] == [("copy", 15.0)]


def test_failed_attempts_do_not_finish_a_shard():
    failed = [AttemptView(shard, f"f{shard}", "h0", 0.0, 1.0, "failed") for shard in range(6, 8)]
    shards = region(*(done(s, 5.0) for s in range(5)), *failed, running(5, 0.0), total=8)
    decision = detect(shards, now=100.0)
    assert decision.finished == 5 and not decision.ready
    # A shard that only failed has no live attempt: retrying it is Airflow's job, not a copy's.
    ready = region(*(done(s, 5.0) for s in range(6)), *failed, total=8)
    decision = detect(ready, now=100.0)
    assert decision.ready and decision.slow == () and decision.excluded_hosts(6) == set()


def test_a_shard_finished_by_its_copy_counts_and_the_copy_won():
    orig = running(7, 0.0, attempt="orig", host="h1")  # not cancelled yet
    copy = done(7, 4.0, start=20.0, attempt="copy", host="h2", speculative=True)
    shards = five_second_region(orig, copy)
    decision = detect(shards, now=60.0)
    assert decision.finished == 8 and decision.slow == ()
    assert decision.excluded_hosts(7) == set()
    metrics = metrics_from(shards, now=60.0)
    assert metrics.copies_won == 1 and metrics.shard_running_s[7] == 4.0


def test_an_attempt_that_lost_the_commit_race_neither_wins_nor_runs():
    lost = AttemptView(7, "orig", "h1", 0.0, 30.0, "lost_commit")
    assert not ShardView(7, (lost,)).finished
    decision = detect(five_second_region(lost), now=60.0)
    assert decision.finished == 7 and decision.slow == () and decision.excluded_hosts(7) == set()


def test_the_earliest_ended_success_is_the_winner():
    first = done(3, 10.0, start=0.0, attempt="orig")
    second = done(3, 2.0, start=9.0, attempt="copy", speculative=True)  # ends at 11, after 10
    assert ShardView(3, (second, first)).winner == first


def test_excluded_hosts_are_those_running_the_shard():
    shards = five_second_region(running(6, 0.0, attempt="x", host="h1"),
                                running(6, 0.0, attempt="y", host="h2"),
                                running(7, 0.0, host="h3"))
    decision = detect(shards, now=1.0)
    assert decision.excluded_hosts(6) == {"h1", "h2"}
    assert decision.excluded_hosts(7) == {"h3"}
    assert decision.excluded_hosts(0) == set()


# ---- input-bytes weighting ------------------------------------------------------------------


def weighted_region(big_bytes: int) -> tuple[ShardView, ...]:
    finished = [done(shard, 5.0, input_bytes=1000) for shard in range(7)]
    return region(*finished, running(7, 0.0, input_bytes=big_bytes), total=8)


def test_a_shard_with_four_times_the_input_running_four_times_longer_is_not_slow():
    decision = detect(weighted_region(4000), now=20.0)
    assert decision.basis == "input_bytes" and decision.slow == ()
    assert decision.median_s_per_byte == pytest.approx(0.005)
    assert decision.threshold_s is None and decision.threshold_s_per_byte == pytest.approx(0.0075)


def test_the_same_running_time_on_equal_input_is_slow():
    decision = detect(weighted_region(1000), now=20.0)
    assert decision.basis == "input_bytes"
    [slow] = decision.slow
    assert slow.shard == 7 and slow.threshold_s == 10.0 and "s/B" in slow.reason


def test_weighting_keeps_the_min_runtime_floor():
    finished = [done(shard, 1.0, input_bytes=1000) for shard in range(7)]
    shards = region(*finished, running(7, 0.0, input_bytes=1000), total=8)
    assert detect(shards, now=9.0).slow == ()  # 9x the median rate, but under 10 s
    assert [s.shard for s in detect(shards, now=10.0).slow] == [7]


def test_one_attempt_without_a_size_falls_back_to_time():
    finished = [done(shard, 5.0, input_bytes=1000) for shard in range(7)]
    shards = region(*finished, running(7, 0.0), total=8)
    decision = detect(shards, now=20.0)
    assert decision.basis == "time" and [s.shard for s in decision.slow] == [7]
    assert detect(weighted_region(4000), now=20.0, config=NO_WEIGHT).basis == "time"


# ---- snapshot validation --------------------------------------------------------------------


def test_snapshot_errors_name_the_culprit():
    with pytest.raises(SpecError, match="shard 9"):
        shards_from_attempts([running(9, 0.0)], total=8)
    with pytest.raises(SpecError, match="'a1' has state 'lost'"):
        AttemptView(1, "a1", "h", 0.0, None, "lost")
    with pytest.raises(SpecError, match="no ended_at"):
        AttemptView(1, "a1", "h", 0.0, None, "succeeded")
    with pytest.raises(SpecError, match="does not belong to shard 2"):
        ShardView(2, (running(1, 0.0),))
    with pytest.raises(SpecError, match="shard 1 appears twice"):
        detect((ShardView(1), ShardView(1)), now=0.0)


# ---- configuration --------------------------------------------------------------------------


@pytest.mark.parametrize(("option", "value", "allowed"), [
    ("quantile", 1.2, "in (0, 1]"),
    ("quantile", 0, "in (0, 1]"),
    ("quantile", -0.5, "in (0, 1]"),
    ("quantile", math.nan, "in (0, 1]"),
    ("quantile", "0.5", "in (0, 1]"),
    ("multiplier", 0.9, ">= 1"),
    ("multiplier", math.inf, ">= 1"),
    ("multiplier", True, ">= 1"),
    ("min_runtime", -1, ">= 0"),
    ("interval", -0.1, "> 0"),
    ("interval", 0, "> 0"),
    ("max_attempts", 1, "integer >= 2"),
    ("max_attempts", 2.5, "integer >= 2"),
    ("weight_by_input", "yes", "on or off"),
])
def test_invalid_setting_raises_spec_error_naming_option_and_range(option, value, allowed):
    with pytest.raises(SpecError) as raised:
        SpeculationConfig(**{option: value})
    message = str(raised.value)
    assert message.startswith(f"speculation {option} is {value!r}; it must be ")
    assert allowed in message


def test_the_documented_example_message():
    with pytest.raises(SpecError, match=r"^speculation quantile is 1\.2; it must be a number in \(0, 1\]$"):
        SpeculationConfig(quantile=1.2)


def test_from_mapping_parses_strings_and_keeps_defaults_for_blanks():
    config = SpeculationConfig.from_mapping({"quantile": "0.9", "multiplier": " 2 ", "min_runtime": "30",
                                             "interval": "0.5", "max_attempts": "3", "weight_by_input": "off",
                                             })
    assert config == SpeculationConfig(0.9, 2.0, 30.0, 0.5, 3, False)
    assert SpeculationConfig.from_mapping({"quantile": "", "multiplier": None}) == SpeculationConfig()
    assert SpeculationConfig.from_mapping({"max_attempts": 4}).max_attempts == 4


@pytest.mark.parametrize(("values", "message"), [
    ({"quantile": "1.2"}, "speculation quantile is 1.2; it must be a number in (0, 1]"),
    ({"multiplier": "fast"}, "speculation multiplier is 'fast'; it must be a number >= 1"),
    ({"max_attempts": "2.0"}, "speculation max_attempts is '2.0'; it must be an integer >= 2"),
    ({"weight_by_input": "maybe"}, "speculation weight_by_input is 'maybe'; it must be on or off"),
    ({"interval": "nan"}, "speculation interval is nan; it must be a number of seconds > 0"),
    ({"multipler": "2"}, "speculation option 'multipler' is unknown; known options: quantile"),
])
def test_from_mapping_errors_name_the_option(values, message):
    with pytest.raises(SpecError) as raised:
        SpeculationConfig.from_mapping(values)
    assert str(raised.value).startswith(message)


# ---- metrics --------------------------------------------------------------------------------


def recorded_scenario() -> tuple[ShardView, ...]:
    """8 shards on 3 hosts: 6 done in 4-8 s, shard 6 won by its copy, shard 7 still running on h2."""
    finished = [done(0, 4.0), done(1, 5.0), done(2, 6.0), done(3, 6.0), done(4, 7.0), done(5, 8.0)]
    orig6 = AttemptView(6, "a6", "h2", 0.0, 21.0, "killed")
    copy6 = done(6, 9.0, start=10.0, attempt="c6", host="h1", speculative=True)
    return region(*finished, orig6, copy6, running(7, 2.0, host="h2"), total=8)


def test_metrics_on_a_recorded_scenario():
    metrics = metrics_from(recorded_scenario(), now=30.0, config=NO_WEIGHT, launched=2)
    assert metrics.min_finished_before_speculation == 6
    assert metrics.finished_shards == 7
    assert metrics.speculative_attempts_launched == 2
    assert metrics.threshold_s == 10.0  # median of 4,5,6,6,7,8,9 = 6 -> max(9, 10)
    assert metrics.copies_won == 1
    assert metrics.shard_running_s == {0: 4.0, 1: 5.0, 2: 6.0, 3: 6.0, 4: 7.0, 5: 8.0, 6: 9.0, 7: 28.0}
    flat = metrics.as_flat_dict()
    assert flat["regionflow.speculation.min_finished_before_speculation"] == 6.0
    assert flat["regionflow.speculation.finished_shards"] == 7.0
    assert flat["regionflow.speculation.speculative_attempts_launched"] == 2.0
    assert flat["regionflow.speculation.threshold_s"] == 10.0
    assert flat["regionflow.speculation.copies_won"] == 1.0
    assert flat["regionflow.speculation.shard_running_s.7"] == 28.0
    assert "regionflow.speculation.threshold_s_per_byte" not in flat
    assert all(isinstance(value, float) for value in flat.values()) and len(flat) == 13


def test_launched_defaults_to_the_speculative_attempts_in_the_snapshot():
    assert metrics_from(recorded_scenario(), now=30.0).speculative_attempts_launched == 1


def test_metrics_before_the_quantile_leave_the_threshold_out():
    shards = region(done(0, 4.0), running(1, 0.0), total=4)
    flat = metrics_from(shards, now=3.0).as_flat_dict()
    assert "regionflow.speculation.threshold_s" not in flat
    assert flat["regionflow.speculation.shard_running_s.1"] == 3.0
    assert "regionflow.speculation.shard_running_s.2" not in flat  # never started


# ---- policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("flags", "dag", "committer", "expected"), [
    ({"map": None, "agg": None}, True, True, (True, "")),
    ({"map": None, "agg": None}, False, True, (False, "vertex 'agg' inherits speculation off from its DAG")),
    ({"map": True, "agg": True}, False, True, (True, "")),
    ({"map": True, "totals": False}, True, True, (False, "vertex 'totals' has speculation off")),
    ({"map": None}, True, False, (False, "the region writes outside regionflow's committer")),
    ({"map": None, "totals": None}, True, {"totals": False},
     (False, "vertex 'totals' writes outside regionflow's committer")),
    ({"totals": None}, True, {"totals": True}, (True, "")),
    ({}, False, True, (False, "speculation is off for the DAG")),
])
def test_speculation_allowed(flags, dag, committer, expected):
    assert speculation_allowed(flags, dag, committer) == expected


def test_policy_records_the_decision_and_its_config():
    config = SpeculationConfig(quantile=0.9)
    policy = SpeculationPolicy.for_region({"totals": None}, True, {"totals": False}, config)
    assert not policy.enabled and "totals" in policy.reason and policy.config == config
    assert SpeculationPolicy.for_region({"map": None}, True, True).enabled
    assert SpeculationPolicy.off("sink not idempotent") == SpeculationPolicy(False, "sink not idempotent")


# ---- properties -----------------------------------------------------------------------------


configs = st.builds(SpeculationConfig,
                    quantile=st.sampled_from([0.25, 0.5, 0.75, 0.9, 1.0]),
                    multiplier=st.sampled_from([1.0, 1.25, 1.5, 2.0, 3.0]),
                    min_runtime=st.sampled_from([0.0, 1.0, 10.0]),
                    max_attempts=st.integers(2, 4),
                    weight_by_input=st.booleans())


@settings(max_examples=200, deadline=None)
@given(config=configs, data=st.data(), total=st.integers(1, 12), duration=st.integers(1, 100))
def test_nothing_is_slow_while_every_attempt_stays_under_multiplier_times_equal_durations(
        config, data, total, duration):
    finished_count = data.draw(st.integers(0, total), label="finished")
    size = data.draw(st.sampled_from([None, 1, 4096]), label="input bytes of every attempt")
    finished = [done(shard, float(duration), start=float(shard), input_bytes=size) for shard in range(finished_count)]
    limit = max(0, math.ceil(config.multiplier * duration) - 1)  # integer elapsed strictly below m*d
    now = 1000.0
    live = [running(shard, now - data.draw(st.integers(0, limit), label=f"elapsed {shard}"), input_bytes=size)
            for shard in range(finished_count, total)]
    decision = detect(region(*finished, *live, total=total), now=now, config=config)
    assert decision.slow == ()


# Weighted towards succeeded and running so that many snapshots reach the quantile and flag shards.
attempt_states = st.sampled_from(["running"] * 3 + ["succeeded"] * 8 + ["failed", "killed", "lost_commit"])


@st.composite
def snapshots(draw):
    total = draw(st.integers(1, 10))
    attempts = []
    for shard in range(total):
        for index in range(draw(st.sampled_from([0, 1, 1, 1, 2, 3]))):
            state = draw(attempt_states)
            start = float(draw(st.integers(0, 100)))
            end = None if state == "running" else start + draw(st.integers(0, 40))
            size = draw(st.one_of(st.none(), st.integers(1, 5000)))
            attempts.append(AttemptView(shard, f"s{shard}-{index}", f"h{draw(st.integers(0, 3))}", start, end,
                                        state, size, index > 0))
    return shards_from_attempts(attempts, total)


@settings(max_examples=300, deadline=None)
@given(shards=snapshots(), config=configs, now=st.integers(100, 250))
def test_the_decision_never_flags_a_finished_or_saturated_shard(shards, config, now):
    decision = detect(shards, now=float(now), config=config)
    by_shard = {view.shard: view for view in shards}
    assert decision.ready or decision.slow == ()
    for slow in decision.slow:
        view = by_shard[slow.shard]
        assert not view.finished
        assert 0 < len(view.live) < config.max_attempts
        assert slow.host in decision.excluded_hosts(slow.shard)
        assert slow.elapsed_s >= config.min_runtime
    assert len({s.shard for s in decision.slow}) == len(decision.slow)
    assert detect(shards, now=float(now), config=config) == decision  # deterministic
    event("flags a shard" if decision.slow else "ready, nothing slow" if decision.ready else "not ready")
