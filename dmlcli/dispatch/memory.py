"""Memory a model needs, counted before anything is allocated: all its resources together, not each alone.

`run` checks its output against available memory before any work (dmlcli.io.room); a model is
checked the same way, twice. While it is parsed, each resource's initial values and buffer are
claimed from a budget before they are made (a 174-byte model can ask for a 17 GB sequence). Before
it runs, what the run itself allocates is claimed: every buffer, a copy of each resource a
writeFile stages until the end, and the largest dispatch's and print's temporaries.
"""

from __future__ import annotations

from ..errors import InputError
from ..io.room import _bytes_text, available_memory

# Peak bytes per byte of initial values while they are made, over what stays: a constant is
# np.full then its bytes (2), a sequence its steps, their running sum and its bytes (3), a file
# its array, a byte-order copy and its bytes (3).
INITIALISER_PEAK_FACTOR = 3
# A dispatch's temporaries per element: contiguous copies of strided inputs, the backend's result
# and float64 intermediates of the composite and approximate kernels (three at most), 8 bytes each.
DISPATCH_BYTES_PER_ELEMENT = 64
# A printed element as Python text: a str object (about 50 bytes) and its share of the joined line.
PRINT_BYTES_PER_ELEMENT = 64


class MemoryBudget:
    """Claims against the memory available when the budget was made; refuses one that would not fit."""

    def __init__(self, available: int | None = None):
        self.available = available_memory() if available is None else available
        self.claimed = 0

    def claim(self, persistent: int, what: str, where: str, *, peak: int | None = None) -> None:
        """Claim `persistent` bytes that stay, after a passing peak of `peak` (default: the same)."""
        peak = persistent if peak is None else max(peak, persistent)
        if self.available is not None and self.claimed + peak > self.available:
            before = f" ({_bytes_text(self.claimed + peak)} with what the model needs before it)" if self.claimed else ""
            raise InputError(f"{where}: {what} needs about {_bytes_text(peak)} of memory{before}, more than the "
                             f"{_bytes_text(self.available)} available; nothing was run or written")
        self.claimed += persistent

    def check_total(self, parts: dict[str, int], where: str) -> None:
        """Refuse a total (named parts, in bytes) larger than what is available; nothing is claimed piecemeal."""
        total = sum(parts.values())
        if self.available is not None and total > self.available:
            named = ", ".join(f"{name} {_bytes_text(size)}" for name, size in parts.items() if size)
            raise InputError(f"{where}: running it needs about {_bytes_text(total)} of memory ({named}) but only "
                             f"{_bytes_text(self.available)} is available; nothing was run or written")
        self.claimed += total


def out_of_memory(where: str) -> InputError:
    """What running out of memory anyway (the estimates are not exact) is reported as, for a model."""
    return InputError(f"{where}: ran out of memory (its buffers, the files it writes and their copies together "
                      "need more than there is); nothing was written")
