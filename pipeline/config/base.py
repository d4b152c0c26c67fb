"""The pieces every config model is built from: :class:`Model` (frozen, unknown keys refused), names and the
checked string types of the card, :class:`ConfigError` and how a validation error is told (the close keys of a typo).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from pipeline.errors import PassbandError


class ConfigError(PassbandError):
    """params.yaml (or a section of it) is invalid."""


def unknown_name(what: str, name: str, known) -> ConfigError:
    """The error for a registry lookup that failed: the bad name, close matches, and every known name."""
    import difflib

    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=3)
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    return ConfigError(f"unknown {what} {name!r}{hint}; known: {', '.join(known) or 'none'}")


# The one pattern of every name params.yaml declares or refers to (a policy, a source, a prompt template, an engine,
# an extractor, a flag, a method, a band, a config, a split): names become file names (plots/drift-<from>-<to>.png,
# licenses/<source>.LICENSE.txt, prompts/<name>.yaml), so a name is one plain path component and never `..`,
# a slash or a control character. 100 characters at most: two names still fit one file name (255 bytes).
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


NAME_RULE = "1 to 100 letters, digits, '_', '.' or '-', starting with a letter or digit"


# The most samples of one problem any count may ask for (rollout.k, an adaptive budget's steps, the rollouts shown
# per item). pass@k studies go to 1,024; past a bound, one typo (k: 1e9) planned 10^11 samples and took 4 GB in 20 s.
MAX_K = 4096


def check_name(value: str) -> str:
    """``value`` when it matches :data:`NAME_PATTERN`; else a ValueError that quotes it and says what is allowed."""
    if not NAME_PATTERN.fullmatch(value):
        shown = repr(value) if len(value) <= 80 else repr(value[:77]) + "..."
        raise ValueError(f"{shown} is not a valid name: {NAME_RULE}")
    return value


Name = Annotated[str, AfterValidator(check_name)]


def _pattern_check(pattern: str, rule: str):
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            shown = repr(value) if len(value) <= 80 else repr(value[:77]) + "..."
            raise ValueError(f"{shown} is not valid: {rule}")
        return value
    return AfterValidator(check)


# What the dataset card (README.md) takes from params.yaml: checked here, so a value cannot add a line, a
# header key or HTML to the card (pipeline/publish/card.py escapes every value it writes as well).
RepoId = Annotated[str, _pattern_check(rf"{NAME_PATTERN.pattern}/{NAME_PATTERN.pattern}", f"ORG/NAME, each {NAME_RULE}")]


LicenseId = Annotated[str, _pattern_check(r"[a-z0-9][a-z0-9.+-]{0,63}",
                                          "a Hub license id such as mit, apache-2.0 or cc-by-4.0 (lowercase letters, "
                                          "digits, '.', '+' and '-')")]


Tag = Annotated[str, _pattern_check(r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,99}",
                                    "a Hub tag: letters, digits, '_', '.', ':', '+' or '-', starting with a letter "
                                    "or digit")]


CardLine = Annotated[str, _pattern_check(r"[^\x00-\x1f\x7f-\x9f\u2028\u2029<>]{1,200}",
                                         "one line of 1 to 200 characters, without control characters, '<' or '>'")]


class Model(BaseModel):
    # allow_inf_nan=False: every float knob (a timeout, a size, a rate) must be a finite number (`.inf` is refused)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _keys_at(model: type[BaseModel] | None, loc: tuple) -> list[str] | None:
    """The keys a model allows where ``loc`` (a validation error's path, its last step the bad key) points, following
    nested models through their fields (an optional, a list's or a mapping's model included); None where unknown."""
    import types
    import typing

    current: Any = model
    for step in loc[:-1]:
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            if isinstance(step, int | str) and current is not None:  # a list index or a mapping key: its values' model
                args = [a for a in typing.get_args(current) if a is not type(None)]
                current = args[-1] if args else None
                if isinstance(current, type) and issubclass(current, BaseModel):
                    continue
            return None
        field = current.model_fields.get(step) if isinstance(step, str) else None
        if field is None:
            return None
        current = field.annotation
        while typing.get_origin(current) in (typing.Union, types.UnionType, Annotated):
            args = [a for a in typing.get_args(current) if a is not type(None)]
            current = args[0] if args else None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(current.model_fields)
    return None


def format_error(exc: ValidationError, origin: str, model: type[BaseModel] | None = None) -> str:
    import difflib

    parts = []
    for err in exc.errors():
        path = err["loc"][:-2] if err["loc"][-1:] == ("[key]",) else err["loc"]  # a bad key: its mapping's path
        loc = ".".join(str(p) for p in path) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (not allowed here)"
            known = _keys_at(model, tuple(path))
            if known:
                close = ", ".join(difflib.get_close_matches(str(path[-1]), known, n=3))
                msg = f"unknown key{f' (did you mean {close}?)' if close else ''}; known: {', '.join(known)}"
        elif err["type"] == "value_error" and err["loc"]:
            msg = msg.removeprefix("Value error, ")
        if err["type"] == "value_error" and not err["loc"]:  # a whole-file check: its message names the key
            parts.append(str(err["ctx"]["error"]))
            continue
        parts.append(f"{loc}: {msg}")
    return f"{origin}: " + "; ".join(parts)


def parse_options(model: type[BaseModel], options: dict[str, Any], *, where: str) -> Any:
    """Validate a pluggable part's ``options`` mapping against its own model."""
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        raise ConfigError(format_error(exc, where, model)) from None


def field_default(model: type[BaseModel], name: str) -> Any:
    """The default of ``model``'s field ``name`` (a fresh copy from its factory): the one home of that value."""
    return model.model_fields[name].get_default(call_default_factory=True)
