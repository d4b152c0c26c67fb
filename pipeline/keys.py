"""Stable keys: every hash in passband goes through here.

    >>> problem_id("What is  2 + 2?")
    'p_692a9daa52e42c50'
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import Any


def digest(data: str | bytes, *, length: int = 16) -> str:
    if isinstance(data, str):
        data = data.encode()
    return hashlib.sha256(data).hexdigest()[:length]


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


_WS = re.compile(r"[ \t\u00a0]+")
_NL = re.compile(r"\s*\n\s*")


def normalize_question(text: str) -> str:
    """NFC, unified newlines, runs of spaces collapsed, each line stripped."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _WS.sub(" ", text)
    text = _NL.sub("\n", text)
    return text.strip()


def problem_id(question: str) -> str:
    """Key of a problem: hash of the normalised question, case and spacing insensitive."""
    return "p_" + digest(normalize_question(question).casefold())


def file_sha256(path: Any) -> str:
    """The sha256 of a file's bytes (read in blocks, never whole)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def policy_id(identity: dict[str, Any]) -> str:
    return "pol_" + digest(canonical_json(identity))


def sample_seed(problem_id: str, policy_id: str, sample_idx: int) -> int:
    """Per-sample seed derived from the rollout key (31 bits: every engine and server accepts it)."""
    h = hashlib.sha256(f"{problem_id}|{policy_id}|{sample_idx}".encode()).digest()
    return int.from_bytes(h[:4], "big") >> 1


__all__ = ["canonical_json", "digest", "file_sha256", "normalize_question", "policy_id", "problem_id", "sample_seed"]
