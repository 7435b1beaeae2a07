"""Global data exchange modes (FLIP-119) and how they decide each edge's exchange."""
from __future__ import annotations

import pytest

from regionflow.core.errors import RegionflowError, SpecError
from regionflow.core.graph import Distribution, Edge, Exchange, JobGraph
from regionflow.core.modes import DEFAULT_MODE, ExchangeMode
from regionflow.core.topology import ExecutionTopology

P, B = Exchange.PIPELINED, Exchange.BLOCKING
F, R, H, RB, BC = (Distribution.FORWARD, Distribution.RESCALE, Distribution.HASH,
                   Distribution.REBALANCE, Distribution.BROADCAST)

# mode -> exchange per distribution (FORWARD, RESCALE, HASH, REBALANCE, BROADCAST)
TABLE = {
    ExchangeMode.ALL_BLOCKING: {F: B, R: B, H: B, RB: B, BC: B},
    ExchangeMode.FORWARD_PIPELINED_ONLY: {F: P, R: B, H: B, RB: B, BC: B},
    ExchangeMode.POINTWISE_PIPELINED_ONLY: {F: P, R: P, H: B, RB: B, BC: B},
    ExchangeMode.ALL_PIPELINED: {F: P, R: P, H: P, RB: P, BC: P},
}


@pytest.mark.parametrize("mode", list(ExchangeMode))
@pytest.mark.parametrize("distribution", list(Distribution))
def test_exchange_for_every_distribution_and_mode(mode, distribution):
    edge = Edge("A", "B", distribution, None, ("k",) if distribution is H else ())
    assert mode.exchange_for(edge) is TABLE[mode][distribution]


@pytest.mark.parametrize("mode", list(ExchangeMode))
@pytest.mark.parametrize("distribution", list(Distribution))
@pytest.mark.parametrize("explicit", [P, B])
def test_explicit_exchange_wins(mode, distribution, explicit):
    edge = Edge("A", "B", distribution, explicit, ("k",))
    assert mode.exchange_for(edge) is explicit


@pytest.mark.parametrize(
    "text, expected",
    [
        ("all-blocking", ExchangeMode.ALL_BLOCKING),
        ("ALL_BLOCKING", ExchangeMode.ALL_BLOCKING),
        ("batch", ExchangeMode.ALL_BLOCKING),
        (" Batch ", ExchangeMode.ALL_BLOCKING),
        ("forward-pipelined-only", ExchangeMode.FORWARD_PIPELINED_ONLY),
        ("FORWARD_PIPELINED_ONLY", ExchangeMode.FORWARD_PIPELINED_ONLY),
        ("pointwise-pipelined-only", ExchangeMode.POINTWISE_PIPELINED_ONLY),
        ("all-pipelined", ExchangeMode.ALL_PIPELINED),
        ("pipelined", ExchangeMode.ALL_PIPELINED),
        ("PIPELINED", ExchangeMode.ALL_PIPELINED),
        (ExchangeMode.POINTWISE_PIPELINED_ONLY, ExchangeMode.POINTWISE_PIPELINED_ONLY),
    ],
)
def test_parse(text, expected):
    assert ExchangeMode.parse(text) is expected


def test_default_mode_is_forward_pipelined_only():
    assert DEFAULT_MODE is ExchangeMode.FORWARD_PIPELINED_ONLY
    assert ExchangeMode.parse(None) is ExchangeMode.FORWARD_PIPELINED_ONLY


@pytest.mark.parametrize("value", ["streaming", "", "all", "blocking-ish"])
def test_parse_unknown(value):
    with pytest.raises(SpecError) as info:
        ExchangeMode.parse(value)
    assert isinstance(info.value, RegionflowError)
    assert repr(value) in str(info.value)
    assert "all-blocking" in str(info.value)


def test_topology_applies_mode_and_explicit_exchange():
    graph = JobGraph()
    graph.add_vertex("A", 2)
    graph.add_vertex("B", 2)
    graph.add_vertex("C", 3)
    graph.connect("A", "B", "forward")  # mode decides
    graph.connect("A", "B", "hash", "pipelined", ["k"])  # explicit pipelined
    graph.connect("B", "C", "rescale", "blocking")  # explicit blocking
    graph.connect("B", "C", "broadcast")  # mode decides
    for mode, expected in [
        ("all-blocking", [B, P, B, B]),
        ("batch", [B, P, B, B]),
        (None, [P, P, B, B]),
        ("pointwise-pipelined-only", [P, P, B, B]),
        ("all-pipelined", [P, P, B, P]),
    ]:
        topology = ExecutionTopology(graph, mode)
        assert [e.exchange for e in topology.edges] == expected, mode
        assert [e.blocking for e in topology.edges] == [x is B for x in expected]
