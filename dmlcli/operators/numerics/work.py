"""How far a long kernel has got: the element reads it has made, reported to whoever runs it (issue 34).

A kernel whose work can be far past its data (a pooling window of 10^6 elements over 10^6 outputs: minutes from a
one-element broadcast input) calls `advance(reads)` as it goes, between the NumPy calls of its loop; the engine sets a
meter around the kernel (`metered`) where the run shows progress. Without a meter `advance` is a look-up and nothing
more. The kernel's loop is also where a signal is handled (Python runs handlers between its steps), so a Ctrl-C or
SIGTERM stops it after the step in hand: a step is one NumPy call over the output's size at most.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Callable, Iterator

_METER: contextvars.ContextVar[Callable[[int], None] | None] = contextvars.ContextVar("dmlcli_work_meter",
                                                                                     default=None)


def advance(reads: int) -> None:
    """Report `reads` more element reads to the run's meter, where there is one."""
    meter = _METER.get()
    if meter is not None:
        meter(reads)


@contextlib.contextmanager
def metered(meter: Callable[[int], None]) -> Iterator[None]:
    """Within the block, `advance` reports to `meter` (the calling thread's kernels only)."""
    token = _METER.set(meter)
    try:
        yield
    finally:
        _METER.reset(token)
