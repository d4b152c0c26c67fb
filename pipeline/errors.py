"""The one exception type the CLI turns into a clean error line, and the OS errors it also explains."""

from __future__ import annotations

import errno
import importlib.util


class PassbandError(Exception):
    """An error the user can fix: bad input, bad config, missing file. The CLI prints it in one line."""


class EngineError(PassbandError):
    """An engine failed to start or to generate (the message names the request). Here, below the engines and what
    they run on (pipeline/engine_support), so both raise it; :mod:`pipeline.engines` exports it."""


class MissingExtra(PassbandError, ImportError):
    """A part of passband that needs an optional extra (pyproject's ``[project.optional-dependencies]``) which is not
    installed; an ImportError too, so code that probes for optional parts by importing them sees it as absent."""

    def __init__(self, extra: str, part: str, missing: str):
        self.extra = extra
        super().__init__(f"{part} needs the optional extra {extra!r} ({missing} is not installed): "
                         f"pip install 'passband[{extra}]'")


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder that refuses the name, or a module left half-imported
        return False


def require_extra(extra: str, part: str, *modules: str) -> None:
    """Raise :class:`MissingExtra` naming ``extra`` when one of ``modules`` is not installed (checked without
    importing them, so a package can call this first thing, before its imports of torch & co.)."""
    for module in modules:
        if not _installed(module):
            raise MissingExtra(extra, part, module)


_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def explain(exc: BaseException) -> str | None:
    """One line for an error the user can act on that is not a PassbandError (a full disk, a read-only folder), else None.

    Writers that go through :mod:`pipeline.io` already raise ``DiskFullError``; this catches the
    ones that write through a library (DuckDB's COPY, pyarrow's writer in the publish folder).
    """
    if isinstance(exc, OSError) and exc.errno in _NO_SPACE:
        where = f" writing {exc.filename}" if exc.filename else ""
        return (f"no space left on the device (or a file-size limit hit){where}: free some space and re-run; "
                "nothing partial was left visible and the previous outputs are untouched")
    if isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS) and exc.filename:
        return f"{exc.filename}: {exc.strerror}; check the folder's owner and mode (or run as its owner)"
    text = str(exc)
    if any(m in text for m in ("No space left on device", "Disk quota exceeded", "File too large")):
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return f"no space left on the device ({first}): free some space and re-run; the previous outputs are untouched"
    return None


__all__ = ["MissingExtra", "PassbandError", "explain", "require_extra"]
