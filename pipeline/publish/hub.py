"""``passband push``: upload the published folder to a Hub dataset repo, in one commit.

The repo id is always given explicitly; the repo is created if missing (private unless
publish.private is false or ``--public`` is passed). An existing repo's real visibility is read from
the Hub (``HfApi.repo_info(...).private``) before anything is uploaded: when it differs from the one
asked for, the push is refused unless ``--allow-visibility-mismatch`` (upload; the repo keeps its
visibility) or ``--set-visibility`` (``update_repo_settings`` makes it the one asked for, then upload)
is given. The visibility printed is always the one the Hub reports, read back after any change.

Exactly the files publish wrote go up, in a single commit (huggingface_hub's ``create_commit``) whose
message names the passband version and the dvc.lock digest the folder was built from: build.json lists each with
its size and sha256, and a folder holding a link, an entry publish did not write, or a listed file that changed is
refused before anything is uploaded (pipeline.publish.manifest); each file is opened without following links and
uploaded from that open file. Files a previous push left under the folders passband manages (``data/``,
``exports/``, ``licenses/``) and that the new build no longer has are deleted in the same commit, so the card's
globs never pick up a stale shard.

The token is huggingface_hub's own: ``HF_TOKEN`` or the user's ``hf auth login``. It is passed
to the client in memory only; passband never prints, logs or writes it.
"""

from __future__ import annotations

import re
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.config import NAME_PATTERN, NAME_RULE
from pipeline.publish import manifest
from pipeline.publish.core import PublishError
from pipeline.publish.manifest import BUILD_FILE

MANAGED = ("data/", "exports/", "licenses/")  # remote files there that this upload lacks are deleted
_REPO_ID = re.compile(rf"{NAME_PATTERN.pattern}/{NAME_PATTERN.pattern}")  # as publish.repo_id (config), fullmatch


@dataclass
class PushPlan:
    repo_id: str
    private: bool
    files: list[tuple[str, int]]  # (path in repo, size in bytes)
    commit_message: str
    commit_description: str
    entries: list[manifest.Entry] = field(default_factory=list)  # build.json's files, checked in the folder
    build_bytes: bytes = b""  # build.json as read when planned (uploaded as such)


@dataclass
class PushResult:
    plan: PushPlan
    commit_url: str | None = None
    private: bool | None = None  # the repo's visibility as the Hub reports it, after the push
    created: bool = False  # the push created the repo
    changed_visibility: bool = False  # --set-visibility changed it


def _visibility(private: bool | None) -> str:
    return "private" if private else "public"


def settle_visibility(api, repo: str, *, private: bool, allow_mismatch: bool = False,
                      set_visibility: bool = False) -> tuple[bool, bool, bool]:
    """Create ``repo`` if missing, else check its real visibility against ``private``: (private, created, changed).

    A mismatch is a :class:`PublishError` unless ``allow_mismatch`` (the repo keeps its own) or
    ``set_visibility`` (changed with ``update_repo_settings``, then read back).
    """
    from huggingface_hub.errors import RepositoryNotFoundError

    created = changed = False
    try:
        info = api.repo_info(repo, repo_type="dataset")
    except RepositoryNotFoundError:
        api.create_repo(repo, repo_type="dataset", private=private, exist_ok=True)
        created = True
        info = api.repo_info(repo, repo_type="dataset")
    real = bool(info.private)
    if real != private and not created:
        if set_visibility:
            api.update_repo_settings(repo, repo_type="dataset", private=private)
            real, changed = bool(api.repo_info(repo, repo_type="dataset").private), True
        elif not allow_mismatch:
            flag = "--public" if not real else "no --public (publish.private: true)"
            raise PublishError(
                f"datasets/{repo} already exists and is {_visibility(real)}, but this push asked for a "
                f"{_visibility(private)} repo; nothing was uploaded: push with {flag} to match it, "
                f"--set-visibility to make it {_visibility(private)}, or --allow-visibility-mismatch to upload "
                f"and keep it {_visibility(real)}")
    if real != private and (created or changed):
        raise PublishError(f"datasets/{repo} is {_visibility(real)} on the Hub although {_visibility(private)} was asked "
                           "for; nothing was uploaded: check the repo's settings on the Hub")
    return real, created, changed


def check_repo_id(repo_id: str) -> str:
    """``repo_id`` when it is ORG/NAME as passband and the Hub both accept it; else one line (nothing is contacted)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    bad = f"repo id {repo_id!r} must be ORG/NAME, each {NAME_RULE}"
    if not isinstance(repo_id, str) or not _REPO_ID.fullmatch(repo_id):
        raise PublishError(bad)
    try:
        validate_repo_id(repo_id)  # the Hub's own rules too: no '--' or '..', no '.git' ending, ...
    except HFValidationError as exc:
        raise PublishError(f"{bad}; the Hub refuses it: {str(exc).splitlines()[0]}") from None
    return repo_id


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
    raw, build = manifest.read_build(folder)
    entries = manifest.verified_files(folder, build)
    if "README.md" not in {e.path for e in entries}:
        raise PublishError(f"{folder} has no README.md: build it with `passband publish` first")
    try:
        summary, description = commit_message(build)
    except (KeyError, TypeError, AttributeError):
        raise manifest.ManifestError(f"{folder / BUILD_FILE} is corrupt (its fields are not publish's): run "
                                     "`passband publish` again") from None
    files = [(e.path, e.size) for e in entries] + [(BUILD_FILE, len(raw))]
    return PushPlan(repo_id, private, sorted(files), summary, description, entries=entries, build_bytes=raw)


def resolve_token() -> str:
    """HF_TOKEN or the saved login, as huggingface_hub resolves it; an error when there is neither."""
    from huggingface_hub import get_token

    token = get_token()
    if not token:
        raise PublishError("no Hugging Face token: set HF_TOKEN or run `hf auth login` (the token is never stored by passband)")
    return token


def push(folder: Path, the_plan: PushPlan, *, allow_mismatch: bool = False, set_visibility: bool = False) -> PushResult:
    """Create the repo if needed (else check its visibility: :func:`settle_visibility`) and upload the folder in one commit."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    folder = Path(folder)
    api = HfApi(token=resolve_token())
    repo = the_plan.repo_id
    try:
        with ExitStack() as opened:
            # every file opened (no link followed) and checked against build.json before the Hub is asked anything
            adds = [CommitOperationAdd(e.path, opened.enter_context(manifest.open_verified(folder, e)))
                    for e in the_plan.entries]
            adds.append(CommitOperationAdd(BUILD_FILE, the_plan.build_bytes))
            private, created, changed = settle_visibility(api, repo, private=the_plan.private,
                                                          allow_mismatch=allow_mismatch, set_visibility=set_visibility)
            keep = {e.path for e in the_plan.entries}
            stale = [] if created else [p for p in api.list_repo_files(repo, repo_type="dataset")
                                        if p.startswith(MANAGED) and p not in keep]
            info = api.create_commit(repo, [*adds, *(CommitOperationDelete(p) for p in stale)], repo_type="dataset",
                                     commit_message=the_plan.commit_message,
                                     commit_description=the_plan.commit_description)
    except HfHubHTTPError as exc:  # one line, never the request headers
        raise PublishError(f"push to {repo} failed: {str(exc).splitlines()[0]}") from None
    except Exception as exc:
        if type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore") or isinstance(exc, OSError):
            raise PublishError(f"push to {repo} failed: cannot reach {api.endpoint}: {exc}") from None
        raise
    return PushResult(the_plan, commit_url=str(info.commit_url), private=private, created=created,
                      changed_visibility=changed)


__all__ = ["BUILD_FILE", "MANAGED", "PushPlan", "PushResult", "check_repo_id", "commit_message", "plan", "push",
           "settle_visibility"]
