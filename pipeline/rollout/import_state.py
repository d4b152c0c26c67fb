"""An import's state file (``imports/<policy_id>.json``: where in the dump it is, the problems matched so far, a
digest of the bytes read), and a grown dump's earlier version: its shards carried under the new policy id, then
removed.
"""


from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa

from pipeline.io import atomic_write_text, read_shard, shard_paths, write_table
from pipeline.rollout.policy import Policy

STATE_VERSION = 1


def _prefix_sha256(path: Path, size: int) -> str:
    h = hashlib.sha256()
    left = size
    with path.open("rb") as fh:
        while left > 0 and (block := fh.read(min(1 << 20, left))):
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and state.get("version") == STATE_VERSION else None


def earlier_version(imports: Path, policy: Policy, dump: Path) -> dict[str, Any] | None:
    """The state of a finished import of this policy name from a shorter version of the same file (its bytes a
    prefix of the dump's now, same layout, options and match)."""
    size = dump.stat().st_size
    same = {k: v for k, v in policy.identity["dump"].items() if k != "sha256"}
    for p in sorted(imports.glob("*.json")):
        st = read_state(p)
        if (not st or st.get("policy") != policy.name or st["policy_id"] == policy.policy_id or not st.get("done")
                or st.get("dump") != same or st.get("format") == "parquet" or not 0 < st["offset"] <= size):
            continue
        if _prefix_sha256(dump, st["offset"]) == st["prefix_sha256"]:
            return st
    return None


def write_state(path: Path, state: dict[str, Any], dump: Path, whole: str | None = None) -> None:
    """Write the state; a finished import of JSON lines records the digest of the bytes it read (``whole``: the
    file's own digest, when it read all of it), which a longer version of the file is checked against."""
    if state["done"] and state.get("format") != "parquet":
        read_all = whole is not None and state["offset"] == dump.stat().st_size
        state["prefix_sha256"] = whole if read_all else _prefix_sha256(dump, state["offset"])
    atomic_write_text(path, orjson.dumps(state, option=orjson.OPT_SORT_KEYS).decode())


def carry_shards(old: dict[str, Any], policy: Policy, *, folders: dict[str, Path], prefix: str) -> int:
    """Copy an earlier version's shards (rollouts, upstream, rejects), one at a time, under ``policy``'s id and the
    same sequence numbers; returns the samples copied."""
    old_prefix = f"imp-{old['policy_id']}-"
    n = 0
    for name, folder in folders.items():
        for p in shard_paths(folder):
            if not p.name.startswith(old_prefix):
                continue
            t = read_shard(p, name=name)
            if "policy_id" in t.column_names:
                t = t.set_column(t.schema.get_field_index("policy_id"), "policy_id",
                                 pa.array([policy.policy_id] * t.num_rows, pa.string()))
            if name == "rollouts":
                n += t.num_rows
            write_table(t, folder / f"{prefix}{p.stem.rsplit('-', 1)[1]}.parquet", name=name)
    return n


def drop_version(old: dict[str, Any], folders: dict[str, Path], imports: Path) -> None:
    """Remove a superseded version's shards and state (its rows now live under the longer dump's policy_id)."""
    old_prefix = f"imp-{old['policy_id']}-"
    for folder in folders.values():
        for p in shard_paths(folder):
            if p.name.startswith(old_prefix):
                p.unlink()
    (imports / f"{old['policy_id']}.json").unlink(missing_ok=True)
