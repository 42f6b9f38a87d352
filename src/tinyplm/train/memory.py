"""Peak resident memory of one training stage.

On Linux the kernel's high-water mark (``VmHWM`` in /proc/self/status) can be reset by writing 5 to
/proc/self/clear_refs, so the peak read at the end of a stage is that stage's own. Where the reset
is refused (another OS, a locked-down /proc) the process's peak so far (``ru_maxrss``) is reported
and ``scope`` says so.
"""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass
from pathlib import Path

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


@dataclass(frozen=True)
class PeakRss:
    """A peak resident set size in MiB and what it covers: ``stage`` (reset at the stage's start)
    or ``process`` (since the process started)."""

    mib: float
    scope: str


def reset_peak() -> bool:
    """Reset this process's RSS high-water mark; False where the OS does not allow it."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def read_peak(stage_scoped: bool) -> PeakRss:
    """The peak RSS since :func:`reset_peak` (``stage_scoped``) or since the process started."""
    if stage_scoped:
        try:
            for line in _STATUS.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return PeakRss(round(int(line.split()[1]) / 1024, 1), "stage")
        except OSError:
            pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return PeakRss(round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1), "process")
