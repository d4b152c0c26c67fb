"""``passband push``: upload the published folder to a Hub dataset repo, in one commit.

The repo id is always given explicitly; the repo is created if missing (private unless
publish.private is false or ``--public`` is passed). Every file of the folder goes up in a
single commit (huggingface_hub's ``upload_folder``) whose message names the passband version and
the dvc.lock digest the folder was built from (read from its build.json). Files a previous push
left under the folders passband manages (``data/``, ``exports/``, ``licenses/``) and that the new
build no longer has are deleted in the same commit (``upload_folder(delete_patterns=...)``), so
the card's globs never pick up a stale shard.

The token is huggingface_hub's own: ``HF_TOKEN`` or the user's ``hf auth login``. It is passed
to the client in memory only; passband never prints, logs or writes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.publish import BUILD_FILE, read_build_info
from pipeline.publish.core import PublishError

MANAGED = ("data/", "exports/", "licenses/")
DELETE_PATTERNS = [f"{d}**" for d in MANAGED]  # remote files there that this upload lacks are deleted
IGNORE_PATTERNS = [".*", "*/.*"]  # hidden entries stay local (as folder_files skips them)
_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


@dataclass
class PushPlan:
    repo_id: str
    private: bool
    files: list[tuple[str, int]]  # (path in repo, size in bytes)
    commit_message: str
    commit_description: str


@dataclass
class PushResult:
    plan: PushPlan
    commit_url: str | None = None


def check_repo_id(repo_id: str) -> str:
    if not _REPO_ID.match(repo_id or ""):
        raise PublishError(f"repo id {repo_id!r} must be ORG/NAME (letters, digits, '-', '_', '.')")
    return repo_id


def folder_files(folder: Path) -> list[tuple[str, int]]:
    """Every file under the folder (hidden entries skipped), as (posix path, size), sorted."""
    folder = Path(folder)
    out = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if p.is_file() and not any(part.startswith(".") for part in rel.parts):
            out.append((rel.as_posix(), p.stat().st_size))
    return out


def commit_message(build: dict) -> tuple[str, str]:
    digest = build.get("dvc_lock_digest")
    lock = f"dvc.lock sha256:{digest}" if digest else "no dvc.lock"
    summary = f"passband {build['passband_version']}: publish ({lock})"
    policy = build.get("policy", {})
    description = "\n".join([
        f"passband version: {build['passband_version']}",
        f"git commit: {build.get('git_commit') or 'unknown'}" + (" (uncommitted code changes)" if build.get("git_dirty") else ""),
        f"dvc.lock digest: {digest or 'none'}",
        f"primary policy: {policy.get('name')} ({policy.get('policy_id')})",
        "rows: " + ", ".join(f"{k} {v}" for k, v in sorted(build.get("rows", {}).items())),
    ])
    return summary, description


def plan(folder: Path, *, repo_id: str, private: bool, card_repo_id: str | None) -> PushPlan:
    folder = Path(folder)
    check_repo_id(repo_id)
    if card_repo_id and card_repo_id != repo_id:
        raise PublishError(
            f"the card was built for {card_repo_id!r} (publish.repo_id) but --repo-id is {repo_id!r}: "
            "set publish.repo_id to the target and run `passband publish` again"
        )
    build = read_build_info(folder)
    if not (folder / "README.md").is_file():
        raise PublishError(f"{folder} has no README.md: build it with `passband publish` first")
    summary, description = commit_message(build)
    return PushPlan(repo_id, private, folder_files(folder), summary, description)


def resolve_token() -> str:
    """HF_TOKEN or the saved login, as huggingface_hub resolves it; an error when there is neither."""
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login` (the token is never stored by passband)")
    return token


def push(folder: Path, the_plan: PushPlan) -> PushResult:
    """Create the repo if needed and upload the folder in one commit."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    folder = Path(folder)
    api = HfApi(token=resolve_token())
    repo = the_plan.repo_id
    try:
        api.create_repo(repo, repo_type="dataset", private=the_plan.private, exist_ok=True)
        info = api.upload_folder(repo_id=repo, folder_path=folder, repo_type="dataset",
                                 commit_message=the_plan.commit_message, commit_description=the_plan.commit_description,
                                 ignore_patterns=IGNORE_PATTERNS, delete_patterns=DELETE_PATTERNS)
    except HfHubHTTPError as exc:  # one line, never the request headers
        raise PublishError(f"push to {repo} failed: {str(exc).splitlines()[0]}") from None
    except Exception as exc:
        if type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore") or isinstance(exc, OSError):
            raise PublishError(f"push to {repo} failed: cannot reach {api.endpoint}: {exc}") from None
        raise
    return PushResult(the_plan, commit_url=str(info.commit_url))


__all__ = ["BUILD_FILE", "MANAGED", "PushPlan", "PushResult", "check_repo_id", "commit_message", "plan", "push"]
