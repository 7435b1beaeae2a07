"""A fake clock and sleep for code that takes both (retries, back-offs): sleeping moves the clock, and is recorded."""


class FakeTime:
    """`clock()` reads `now`; `sleep(s)` records `s` in `slept` and moves `now` on by it."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now, self.slept = now, []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
