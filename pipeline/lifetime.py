"""A worker process's lifetime tied to its parent's: the one place passband asks the kernel for it.

Both process pools (verify's graders, annotate's detectors) call :func:`die_with_parent` first thing in each
worker, so a ``kill -9`` of the stage, or the OOM killer taking it, leaves no worker computing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent exits (Linux: ``PR_SET_PDEATHSIG``).

    ``parent_pid`` is the parent the caller expects: should it have died before the request (this process was
    re-parented, and the signal will never come), this process exits at once. Elsewhere than Linux only that
    check is made; the caller's own means (a closed pipe, a CPU limit) end the worker."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:
        os._exit(1)
