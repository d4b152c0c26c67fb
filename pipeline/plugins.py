"""One plugin contract for every registry: engines, sources and presets, extractors, flag detectors, reformulators.

A code plugin is one shape, a :class:`Plugin` subclass: a ``name``, its knobs as a nested ``Options`` model
(:class:`pipeline.config.Model`, unknown keys refused; in params.yaml a detector's under ``annotate.options.<name>``,
a method's under ``reformulate.options.<name>``, an engine's under ``rollout.engine_options.<name>``, a source
kind's and a dump layout's in the entry that names the kind) and one method its kind names; it is registered
under its name in one :class:`Registry`. The flag detectors
(``pipeline/annotate/detectors``), the extractors (``pipeline/verify/extractors``), the source kinds
(``pipeline/ingest/sources``, their shared reading in ``pipeline/ingest/readers.py``), the engines
(``pipeline/engines``), the dump layouts (``pipeline/rollout/layouts``) and the reformulation methods
(``pipeline/reformulate/methods``) are one module each in their registry's package folder, which holds nothing else,
found by scanning that folder the first time the registry is read, so adding one is adding a file; the core never
lists them. The source presets and prompt templates are YAML files (data), found the same way. A name the registry
does not hold is one error line with the close matches (difflib) and every known name::

    unknown flag detector 'answer_repetiton' (did you mean answer_repetition?); known: answer_flip, ...

A user's own plugins live outside the package: params.yaml's ``plugins`` lists modules (``mypkg.my_detector``) or
files (``plugins/my_detector.py``, ``plugins/my_preset.yaml``, relative to params.yaml), loaded by
:func:`load_plugins` when the params load, before any name is checked. A ``.py`` file registers what it defines
with the registry's ``register``; a ``.yaml`` file is a source preset (it holds ``hub``: :mod:`pipeline.ingest.presets`)
or a prompt template (it holds ``template``: :mod:`pipeline.rollout.prompts`).

Another process that runs passband's code for this one (a Ray task or actor, maybe on another node, a detector
worker) gets the same Python plugins from :func:`shipped_plugins` (each loaded file's text, each module's name),
loaded there by :func:`load_shipped`: the files need not exist on that node.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import pkgutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from pipeline.config import ConfigError, Model, check_name, parse_options, unknown_name

T = TypeVar("T")


class NoOptions(Model):
    """A plugin without knobs."""


class Plugin:
    """The one shape of a pluggable part: a class with a ``name``, its knobs as a nested ``Options`` model (unknown
    keys refused) and one method its kind names (a detector's ``detect``, an extractor's ``read``, a method's
    ``one``, an engine's ``_stream``, a layout's ``records``). An instance holds its validated knobs as
    ``self.options``; they come from params.yaml's ``<section>.options.<name>`` (``where`` names that place in an
    error)."""

    name: ClassVar[str]
    Options: ClassVar[type[BaseModel]] = NoOptions

    def __init__(self, options: BaseModel | dict[str, Any] | None = None, *, where: str | None = None) -> None:
        if not isinstance(options, self.Options):
            options = parse_options(self.Options, dict(options or {}), where=where or f"options.{self.name}")
        self.options: Any = options


class Registry(Mapping[str, T], Generic[T]):
    """Plugins of one kind by name, in registration order (the folder's modules by name, then the user's).

    ``package`` (a dotted package name): every module of that folder is imported once, the first time the registry
    is read, and registers itself; ``scan`` (a callable) does the same for plugins that are not modules (the preset
    YAML files). ``order`` lists built-in names that come first, in that order (where an output's order was fixed
    before the folder scan; any other name follows by name).
    """

    def __init__(self, what: str, *, package: str | None = None, scan: Callable[[Registry[T]], None] | None = None,
                 order: tuple[str, ...] = ()) -> None:
        self.what = what
        self.package = package
        self._scan = scan
        self._order = order
        self._items: dict[str, T] = {}
        self._origin: dict[str, str] = {}
        self._scanned = package is None and scan is None
        self._scanning = False
        # the first read scans; a second thread reading meanwhile waits for the whole scan (a half-filled registry
        # would call a known name unknown), while the scanning thread's own reads (a module registering itself
        # reads the registry) pass: re-entrant
        self._lock = threading.RLock()

    # -- registration ----------------------------------------------------------------------------
    def add(self, name: str, obj: T, *, origin: str | None = None) -> T:
        """Register ``obj`` as ``name``; a second plugin of that name from elsewhere is an error naming both."""
        try:
            check_name(name)
        except ValueError as exc:
            raise ConfigError(f"{self.what}: {exc}") from None
        origin = origin or origin_of(obj)
        if name in self._items and self._origin[name] != origin:
            raise ConfigError(f"{self.what} {name!r} is defined twice: in {self._origin[name]} and in {origin}")
        self._items[name] = obj
        self._origin[name] = origin
        return obj

    def register(self, obj: Any = None, /, *, name: str | None = None) -> Any:
        """Decorator: ``@REG.register`` on a class with a ``name`` attribute, or ``@REG.register(name="x")``."""
        def deco(o: Any) -> Any:
            key = name if name is not None else getattr(o, "name", None)
            if not isinstance(key, str):
                raise TypeError(f"{self.what}: {o!r} has no name (give the class a `name` or pass name=...)")
            self.add(key, o)
            return o

        return deco(obj) if obj is not None else deco

    def remove(self, name: str) -> None:
        """Forget ``name`` (a test's throwaway plugin)."""
        self._items.pop(name, None)
        self._origin.pop(name, None)

    def __setitem__(self, name: str, obj: T) -> None:
        """Replace (or add) ``name`` whatever defined it: what a test's ``monkeypatch.setitem`` does."""
        self._ensure()
        self._items[name] = obj
        self._origin.setdefault(name, origin_of(obj))

    def __delitem__(self, name: str) -> None:
        self._ensure()
        self.remove(name)

    # -- lookup ------------------------------------------------------------------------------------
    def lookup(self, name: str) -> T:
        """The plugin ``name``; else a :class:`ConfigError` with the close names and every known one."""
        self._ensure()
        if name not in self._items:
            raise unknown_name(self.what, name, self._items)
        return self._items[name]

    def origin(self, name: str) -> str:
        """Where ``name`` was defined: its module, or its file."""
        self._ensure()
        return self._origin[name]

    def __getitem__(self, name: str) -> T:
        self._ensure()
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        self._ensure()
        first = [n for n in self._order if n in self._items]
        return iter(first + sorted(n for n in self._items if n not in self._order))

    def __len__(self) -> int:
        self._ensure()
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        self._ensure()
        return name in self._items

    def __repr__(self) -> str:
        return f"Registry({self.what!r}, {list(self)})"

    # -- discovery ---------------------------------------------------------------------------------
    def _ensure(self) -> None:
        if self._scanned:
            return
        with self._lock:
            if self._scanned or self._scanning:  # done meanwhile, or this thread's own read during its scan
                return
            self._scanning = True
            try:
                if self.package is not None:
                    for module in modules_in(self.package):
                        importlib.import_module(module)
                if self._scan is not None:
                    self._scan(self)
                self._scanned = True
            finally:
                self._scanning = False


def origin_of(obj: Any) -> str:
    """Where ``obj`` (a class or function) is defined: its module's file, else the module's name."""
    module = getattr(obj, "__module__", None) or type(obj).__module__
    file = getattr(sys.modules.get(module), "__file__", None)
    return file or module


def modules_in(package: str) -> list[str]:
    """The dotted names of the modules in ``package``'s folder, by name (``_private`` ones and subpackages left out)."""
    pkg = importlib.import_module(package)
    return [f"{package}.{m.name}" for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name)
            if not m.ispkg and not m.name.startswith("_")]


# -- the user's plugins --------------------------------------------------------------------------------

_LOADED: dict[str, str] = {}  # what was loaded (resolved file or module name) -> the spec that named it
_TEXT: dict[str, str] = {}  # a loaded file -> its text as loaded (what shipped_plugins sends)
# a .yaml plugin's kind is told by a top-level key it must hold (a preset's `hub`, a prompt template's `template`);
# the registries' modules install their loaders here (they sit above this module; pipeline.params_loader imports them)
YAML_LOADERS: dict[str, tuple[str, Callable[[Path], None]]] = {}  # kind -> (its key, loader)


def load_plugins(specs: list[str], *, root: Path) -> None:
    """Import each of the user's plugins once: a module name, or a ``.py``/``.yaml`` file relative to ``root``.

    A spec that cannot be found or imported is one :class:`ConfigError` line naming it and the cause."""
    for spec in specs:
        if spec.endswith((".py", ".yaml", ".yml")):
            path = (Path(root) / spec).resolve()
            key = str(path)
            if key in _LOADED:
                continue
            if not path.is_file():
                raise ConfigError(f"plugins: {spec!r} is not a file (looked for {path})")
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"plugins: {spec!r} cannot be read: {exc}") from None
            if path.suffix == ".py":
                _import_file(spec, path, text)
            else:
                _load_yaml(spec, path, text)
            _TEXT[key] = text
        else:
            key = spec
            if key in _LOADED:
                continue
            try:
                importlib.import_module(spec)
            except ImportError as exc:
                raise ConfigError(f"plugins: cannot import module {spec!r}: {exc}") from None
        _LOADED[key] = spec


def _load_yaml(spec: str, path: Path, text: str) -> None:
    import yaml

    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"plugins: {spec!r} is not a readable YAML file: {exc}") from None
    kinds = [(kind, load) for kind, (key, load) in sorted(YAML_LOADERS.items()) if isinstance(raw, dict) and key in raw]
    if len(kinds) != 1:
        keys = ", ".join(f"{key} ({kind})" for kind, (key, _) in sorted(YAML_LOADERS.items()))
        raise ConfigError(f"plugins: {spec!r} must hold exactly one of the keys {keys}")
    kinds[0][1](path)


def _import_file(spec: str, path: Path, text: str) -> None:
    """Run ``text`` (the file's, read once) as the module ``passband_plugin_<path>``, its ``__file__`` the path."""
    name = "passband_plugin_" + "".join(c if c.isalnum() else "_" for c in path.with_suffix("").as_posix().lstrip("/"))
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ConfigError(f"plugins: {spec!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        exec(compile(text, str(path), "exec"), module.__dict__)  # the user's own file, as importing it would
    except ConfigError as exc:
        sys.modules.pop(name, None)
        raise ConfigError(f"plugins: {spec}: {exc}") from None
    except Exception as exc:  # a user's file: its error is one line naming the file, not a traceback
        sys.modules.pop(name, None)
        raise ConfigError(f"plugins: {spec!r} failed to load: {type(exc).__name__}: {exc}") from None


# -- the same plugins in another process ------------------------------------------------------------

ShippedPlugin = tuple[str, str, str | None]  # (spec, file name, text); a module: (spec, "", None)
_SHIPPED: dict[str, Path] = {}  # in a receiving process: a shipped file's sha256 -> where it was loaded from


@functools.cache
def _ship_dir() -> Path:
    """This process's private folder for the files shipped to it (``mkdtemp``: mode 0700), made on first use."""
    return Path(tempfile.mkdtemp(prefix="passband-plugins-"))


def shipped_plugins() -> list[ShippedPlugin]:
    """What :func:`load_plugins` loaded in this process, in load order, as :func:`load_shipped` takes it in another:
    a ``.py`` file's name and the text it was loaded from, a module's name. The ``.yaml`` plugins stay here: they are
    data the stage's own process reads (a source preset at ingest, a prompt template rendered before a request reaches
    an engine), and their loaders live in modules another process's work never imports (a Ray replica, a verify task,
    a detector worker refused them: "must hold exactly one of the keys")."""
    out: list[ShippedPlugin] = []
    for key, spec in _LOADED.items():
        if key in _TEXT and Path(key).suffix not in (".py",):
            continue
        if key in _TEXT:
            out.append((spec, Path(key).name, _TEXT[key]))
        else:
            out.append((spec, "", None))
    return out


def load_shipped(plugins: list[ShippedPlugin]) -> None:
    """Load :func:`shipped_plugins`' output in this process (a Ray worker's): each file written once into a private
    folder of this process (``mkdtemp``, mode 0700) and loaded from there, each module imported. Loading the same
    file text again does nothing; a plugin that fails to load is the same one-line :class:`ConfigError`."""
    for spec, name, text in plugins:
        if text is None:
            load_plugins([spec], root=Path.cwd())
            continue
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if digest in _SHIPPED:
            continue
        folder = _ship_dir() / digest[:16]
        folder.mkdir(mode=0o700, exist_ok=True)
        path = folder / Path(name).name
        if not path.exists():  # a load that failed before (a retried task) left it: the same text, by its digest
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
        try:
            load_plugins([str(path)], root=_ship_dir())
        except ConfigError as exc:
            raise ConfigError(str(exc).replace(str(path), spec)) from None
        _SHIPPED[digest] = path


__all__ = ["YAML_LOADERS", "NoOptions", "Plugin", "Registry", "ShippedPlugin", "load_plugins", "load_shipped", "modules_in",
           "origin_of", "shipped_plugins"]
