"""Files written atomically with the modes a plain ``open()`` gives (the umask), one-line errors for a full disk,
paths kept inside their folder, bounded reads of plain files and lines, and the metrics files (counts for DVC,
timings apart).
"""

from __future__ import annotations

import errno
import glob
import json
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pipeline.errors import PassbandError
from pipeline.run_metrics import RunStats

SHARD_GLOB = "*.parquet"


TEMP_GLOB = ".*.tmp"


REPAIR_HINT = "run `passband doctor --repair` to move it aside, then `dvc repro` to regenerate its rows"


_NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


class DiskFullError(PassbandError):
    """A write failed for lack of space; nothing partial is visible and the previous file is intact."""


class DamagedShardError(PassbandError):
    """A shard cannot be read as its table: truncated, empty, foreign or with the wrong columns."""


def current_umask() -> int:
    """The process umask, read without changing it (``os.umask`` would, briefly, for every thread)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def follow_umask(path: str | Path, *, directory: bool = False) -> None:
    """Give ``path`` the mode ``open()``/``mkdir()`` would have: 0666 (0777 for a folder) minus the umask."""
    os.chmod(path, (0o777 if directory else 0o666) & ~current_umask())


def disk_full(exc: OSError, path: str | Path) -> DiskFullError:
    return DiskFullError(f"no space left on the device writing {path} ({os.strerror(exc.errno or errno.ENOSPC)}): "
                         "free some space and re-run; the previous version of the file, if any, is untouched")


@contextmanager
def atomic_path(path: str | Path) -> Iterator[str]:
    """Yield a temp name beside ``path``; on a clean exit fsync it, give it the umask's mode and rename it to ``path``.

    On any error the temp file is removed and ``path`` is left as it was; a full disk becomes
    a :class:`DiskFullError` naming ``path``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temp_prefix(path), suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        follow_umask(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        if exc.errno in _NO_SPACE:
            raise disk_full(exc, path) from None
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def temp_prefix(path: str | Path) -> str:
    """The name a temp file of ``path`` starts with: ``.<name>.<pid>.``, so that a writer knows another's live temp."""
    return f".{Path(path).name}.{os.getpid()}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def remove_stale_temps(path: str | Path) -> None:
    """Remove the temp files a killed write of ``path`` left beside it. A temp of another live process is left alone:
    a stage runs under its lock, but two engine replicas of one stage write the same vLLM logging config at once (one
    replica's cleanup removed the other's temp between its write and its rename)."""
    path = Path(path)
    head = f".{path.name}."
    for old in path.parent.glob(f"{glob.escape(head)}*.tmp*"):
        pid = old.name[len(head):].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        old.unlink(missing_ok=True)


def atomic_write(path: str | Path, write: Callable[[str], None]) -> Path:
    with atomic_path(path) as tmp:
        write(tmp)
    return Path(path)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    return atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode())


def write_json(path: str | Path, obj) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def path_in(folder: str | Path, rel: str) -> Path:
    """``folder / rel``, where ``rel`` is a relative file path built from values (a policy name, a source, a
    config); each of its ``/``-separated parts must be a plain name (not empty, ``.`` or ``..``), so the path
    can never lead out of ``folder``, whatever a value holds. Else a one-line PassbandError."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") or "\0" in p for p in parts):
        raise PassbandError(f"{rel!r} is not a plain relative file name (a name in it holds '/', '..' or is empty): "
                            f"passband writes only inside {folder}")
    return Path(folder).joinpath(*parts)


def read_plain_file(path: str | Path, *, max_bytes: int, what: str, fix: str) -> bytes:
    """The bytes of ``path``, a file passband copies out (a source's LICENSE into the published folder): it must
    be a regular file, not a symbolic link, with a single hard link, of at most ``max_bytes``. Else a one-line
    PassbandError naming it, what it is (``what``) and what to do (``fix``).

    Opened with ``O_NOFOLLOW`` and checked on the open descriptor, so a link swapped in after a check is never
    followed, and read no further than the cap, so a file growing meanwhile cannot blow it."""
    path = Path(path)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # NONBLOCK: a planted FIFO never hangs the open
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PassbandError(f"{path} ({what}) is a symbolic link (to {os.readlink(path)}): passband copies only a "
                                f"regular file, never what a link points to; {fix}") from None
        raise PassbandError(f"{path} ({what}): cannot read it ({exc.strerror}); {fix}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PassbandError(f"{path} ({what}) is not a regular file: passband copies only a regular file; {fix}")
        if st.st_nlink != 1:
            raise PassbandError(f"{path} ({what}) is a hard link ({st.st_nlink} names for one file): passband copies "
                                f"only a file with a single name; {fix}")
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(max_bytes + 1)
        if len(data) > max_bytes:
            raise PassbandError(f"{path} ({what}) is over {max_bytes} bytes, too big to be what it should be; {fix}")
        return data
    finally:
        os.close(fd)


TIMINGS = Path("data/logs/timings")  # beside the engines' logs (data/logs/): no DVC output, ignored by git


TIMING_KEYS = frozenset({"seconds", "wall_s", "generate_s", "engine_startup_s", "startup_s", "tokens_per_s",
                         "rollouts_per_s"})


def split_timings(metrics: dict) -> tuple[dict, dict]:
    """``metrics`` split into (counts, timings): every key named in :data:`TIMING_KEYS`, at any depth, goes to the
    timings (under the same nesting); everything else stays. A dict left with no timing has no entry there."""
    counts, timings = {}, {}
    for key, value in metrics.items():
        if key in TIMING_KEYS:
            timings[key] = value
        elif isinstance(value, dict):
            counts[key], inner = split_timings(value)
            if inner:
                timings[key] = inner
        else:
            counts[key] = value
    return counts, timings


def write_metrics(path: str | Path, metrics: RunStats | dict, *, root: str | Path) -> Path:
    """A stage's metrics: the counts to ``path`` (a DVC metrics file, hashed into dvc.lock, so it must be the same
    run to run) and the timings to ``<root>/data/logs/timings/<path's name>``, which neither DVC nor git tracks.
    A :class:`~pipeline.run_metrics.RunStats` says which keys are timings (its timers and rates); a plain dict's are
    the keys named in :data:`TIMING_KEYS`. Returns ``path``."""
    if isinstance(metrics, RunStats):
        counts, timings = metrics.counts(), metrics.timings()
    else:
        counts, timings = split_timings(metrics)
    write_json(Path(root) / TIMINGS / Path(path).name, timings)
    return write_json(path, counts)


SKIP_BYTES = 1 << 20  # a line over the cap is skipped in reads of this size


def bounded_lines(fh, max_bytes: int) -> Iterator[tuple[bytes, int, bool]]:
    """``(line, size, too_long)`` per line of the binary file ``fh`` from where it stands, each read in bounded pieces:
    a line of more than ``max_bytes`` (its newline not counted) comes back as its first 200 bytes and its size, the
    rest skipped unkept. After each yield ``fh.tell()`` is the offset past that line (what a resumable reader keeps)."""
    while raw := fh.readline(max_bytes + 1):
        if len(raw) <= max_bytes or raw.endswith(b"\n"):
            yield raw, len(raw), False
            continue
        head, size = raw[:200], len(raw)
        while raw and not raw.endswith(b"\n"):
            raw = fh.readline(SKIP_BYTES)
            size += len(raw)
        yield head, size - raw.endswith(b"\n"), True
