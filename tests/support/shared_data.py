"""../shared/data (GSM8K, MATH) beside the repository: tests that read it call :func:`shared_path`.

When a file is missing the test is skipped, or, with ``PASSBAND_REQUIRE_SHARED=1`` (which
``.ci/run`` sets), it fails with a message saying what is missing, so a CI run without the
data is red instead of green with those tests unrun.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def required() -> bool:
    return os.environ.get("PASSBAND_REQUIRE_SHARED", "") not in ("", "0")


def shared_path(relative: str = "") -> Path:
    """``../shared/data/<relative>``; skip the test (fail it when required) if it is not there."""
    path = SHARED / relative
    if not path.exists():
        msg = (f"{path} is missing: put the shared data (GSM8K, MATH) at ../shared/data beside the repository"
               + (" (PASSBAND_REQUIRE_SHARED=1 makes this a failure)" if required() else ""))
        if required():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return path


def fetched_path(name: str, upstream: str) -> Path:
    """``../shared/data/real_outputs/<name>``: a real dump fetched from a public repository (``upstream``: where), which
    the repository never holds. Until it is placed there the test is skipped, in CI too (PASSBAND_REQUIRE_SHARED
    covers only the data the checkout is promised); ``PASSBAND_FETCHED=<folder>`` reads it from elsewhere."""
    folder = Path(os.environ["PASSBAND_FETCHED"]) if os.environ.get("PASSBAND_FETCHED") else SHARED / "real_outputs"
    path = folder / name
    if not path.exists():
        pytest.skip(f"{path} is missing: fetch {upstream} and put it there as {name} (or set PASSBAND_FETCHED)")
    return path
