import pytest

from regionflow.core.errors import SpecError
from regionflow.scheduling.blocklist import BlockEntry, Blocklist


class VirtualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_entry_lives_until_its_expiry_on_the_injected_clock():
    clock = VirtualClock()
    blocklist = Blocklist(clock, default_expiry_s=60)
    entry = blocklist.add("job", "h1")
    assert entry == BlockEntry("job", "h1", 60.0)
    assert blocklist.is_blocked("job", "h1") and ("job", "h1") in blocklist
    assert not blocklist.is_blocked("other-job", "h1")
    clock.now = 59.9
    assert blocklist.hosts_for("job") == {"h1": 60.0}
    clock.now = 60.0
    assert not blocklist.is_blocked("job", "h1")
    assert blocklist.hosts_for("job") == {}
    assert len(blocklist) == 0


def test_purge_drops_expired_entries_once():
    clock = VirtualClock()
    blocklist = Blocklist(clock)
    blocklist.add("a", "h1", expiry_s=10)
    blocklist.add("b", "h2", expiry_s=20)
    clock.now = 15
    assert blocklist.purge() == [BlockEntry("a", "h1", 10.0)]
    assert blocklist.purge() == []
    assert [e.host for e in blocklist.entries()] == ["h2"]


def test_re_adding_extends_but_never_shortens():
    clock = VirtualClock()
    blocklist = Blocklist(clock)
    blocklist.add("j", "h", expiry_s=10)
    clock.now = 5
    assert blocklist.add("j", "h", expiry_s=1).expires_at == 10.0
    assert blocklist.add("j", "h", expiry_s=20).expires_at == 25.0
    clock.now = 12
    assert blocklist.purge() == []  # the stale heap item of the first add is skipped
    assert blocklist.is_blocked("j", "h")
    assert blocklist.next_expiry() == 25.0


def test_remove_lifts_an_entry_early():
    clock = VirtualClock()
    blocklist = Blocklist(clock)
    blocklist.add("j", "h")
    assert blocklist.remove("j", "h") is True
    assert blocklist.remove("j", "h") is False
    assert blocklist.next_expiry() is None
    assert list(blocklist) == []


@pytest.mark.parametrize("bad", [0, -1, "10", True])
def test_bad_expiry_is_rejected(bad):
    with pytest.raises(SpecError, match="expiry"):
        Blocklist(VirtualClock(), default_expiry_s=bad)
    with pytest.raises(SpecError, match="expiry"):
        Blocklist(VirtualClock()).add("j", "h", expiry_s=bad)
