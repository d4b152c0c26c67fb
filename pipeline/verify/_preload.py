"""Imported by the verify forkserver: load math-verify and sympy and run one check, so every
worker forked from it starts warm (replacing a killed worker then takes milliseconds).

The forkserver exits when the stage process is gone (its "alive" pipe ends); its workers die with it
(``PR_SET_PDEATHSIG``, pipeline/verify/pool.py). The interpreter's tear-down of sympy's objects takes
seconds, during which an orphaned worker would keep computing: the forkserver skips it."""

import atexit
import os
import sys
from multiprocessing import forkserver

from pipeline.verify.grader import grade

grade("1", "\\frac{2}{2}")


def _imported_by_forkserver() -> bool:
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code is forkserver.main.__code__:
            return True
        frame = frame.f_back
    return False


if _imported_by_forkserver():  # never in a process that has output to flush
    atexit.register(os._exit, 0)
