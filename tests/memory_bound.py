"""A hard memory bound on one call inside the test process (Linux).

`memory_bound(limit)` lowers the process's address-space limit (``RLIMIT_AS``) to what is mapped now
plus `limit` for the length of the block, and restores it after. An allocation past the bound fails
at once with MemoryError, which the block turns into `MemoryBoundExceeded` (an AssertionError, so
Hypothesis and pytest report it as a failed check, naming the bound).

Why the address space and not tracemalloc: the limit costs nothing per allocation (tracemalloc makes
``plan``/``simulate`` of the largest graphs 4-5x slower, which the property tests' time bound would
then measure), it counts memory allocated outside Python's allocators too, and a call that would take
gigabytes is stopped at the bound instead of first taking the machine's memory. It is lenient, never
strict: memory the process already holds but has freed can be reused without counting.
"""
from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator

MiB = 1 << 20


class MemoryBoundExceeded(AssertionError):
    """The block needed more memory than its bound."""


def address_space() -> int:
    """Bytes of address space the process has mapped now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def memory_bound(limit: int, what: str = "the call") -> Iterator[None]:
    """Run the block with at most `limit` more bytes of address space than the process has now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    bound = address_space() + limit
    if hard != resource.RLIM_INFINITY:
        bound = min(bound, hard)
    resource.setrlimit(resource.RLIMIT_AS, (bound, hard))
    exceeded = False
    try:
        yield
    except MemoryError:
        exceeded = True  # nothing allocated here: the limit is still in force
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    if exceeded:
        raise MemoryBoundExceeded(f"{what} needed more than {limit // MiB} MiB of memory")
