"""Find and open a reward model written in Python: `py:FILE.py:NAME`, `py:package.module:NAME`, or the name of an
entry point of the group `prbj.judges` (a pip-installed reward model). NAME is a class, instantiated once with no
arguments, or a factory called once with none; what it gives must have a `score(items)` method
(prbj.local.rm_api).

Every way this can go wrong before the first item (no such file or module, no NAME, a syntax error in the file, an
import that fails, NAME not callable, no `score`) is one ConfigError line (exit 2), with the nearest names where
one was probably meant.

What identifies the model in cache keys: NAME, its `version` attribute, and the sha256 of the file that defines
NAME (the file itself for `py:FILE.py`, the module's file otherwise), so an edited file or a new version is judged
again and an unchanged one is answered from the cache. The file's path is not part of it: a moved file keeps its
answers.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import re
import sys
import traceback
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from prbj.data.names import did_you_mean
from prbj.errors import ConfigError, one_line

PY_PREFIX = "py:"
ENTRY_POINT_GROUP = "prbj.judges"
_MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")

SourceKind = Literal["file", "module", "entry-point"]


def error_text(error: BaseException) -> str:
    """`Type: message` of an exception raised by the reward model's code, on one line."""
    message = one_line(str(error))
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


@dataclass(frozen=True, slots=True)
class RMSource:
    """Where a reward model's code is: what the user typed, and how to find it again (in a Ray actor too)."""

    spec: str
    kind: SourceKind
    # The file (absolute) for `file`, the module for `module`, the entry point's name for `entry-point`.
    target: str
    attribute: str

    @property
    def label(self) -> str:
        """How messages name the model: `FILE.py:NAME`, `module:NAME`, or the entry point's name."""
        return self.spec.removeprefix(PY_PREFIX) if self.kind != "entry-point" else self.spec


def parse_spec(spec: str) -> RMSource:
    """`py:FILE.py:NAME` or `py:package.module:NAME` (NAME after the last ':'); a one-line ConfigError otherwise."""
    rest = spec.removeprefix(PY_PREFIX).strip()
    target, colon, attribute = rest.rpartition(":")
    if not colon or not target or not attribute:
        raise ConfigError(
            f"-p {spec}: expected py:FILE.py:NAME or py:package.module:NAME (NAME: the class or factory of the "
            "reward model, after the last ':')"
        )
    if not attribute.isidentifier():
        raise ConfigError(f"-p {spec}: {attribute!r} is not a Python name (the class or factory to use)")
    if target.endswith(".py") or "/" in target or "\\" in target:
        return RMSource(spec, "file", str(Path(target).expanduser().resolve()), attribute)
    if not _MODULE_NAME.match(target):
        raise ConfigError(f"-p {spec}: {target!r} is neither a .py file nor a module name (package.module)")
    return RMSource(spec, "module", target, attribute)


# --- entry points ---------------------------------------------------------------------------------------------


def entry_points() -> list[metadata.EntryPoint]:
    """The installed entry points of the group `prbj.judges` (read from the distributions on sys.path)."""
    return list(metadata.entry_points(group=ENTRY_POINT_GROUP))


def entry_point_source(name: str) -> RMSource | None:
    """The reward model an installed distribution registers under `name`, or None when none does."""
    found = [ep for ep in entry_points() if ep.name == name]
    if not found:
        return None
    if len({ep.value for ep in found}) > 1:
        where = ", ".join(f"{ep.value} ({_distribution(ep) or 'unknown distribution'})" for ep in found)
        raise ConfigError(f"-p {name}: several installed reward models use this name: {where}")
    return RMSource(name, "entry-point", name, found[0].attr or found[0].value)


def _distribution(ep: metadata.EntryPoint) -> str | None:
    dist = ep.dist
    return f"{dist.name}=={dist.version}" if dist is not None else None


# --- loading ------------------------------------------------------------------------------------------------


@dataclass
class LoadedRM:
    """A reward model, instantiated, with what identifies it."""

    source: RMSource
    instance: Any
    # The model's own `name` and `version` attributes, as text (None when it has none).
    name: str | None
    version: str | None
    # sha256 of the file that defines NAME (None for code without a file).
    source_sha256: str | None
    # `distribution==version` for an entry point.
    distribution: str | None = None

    @property
    def label(self) -> str:
        return self.source.label

    # Whether the model has the optional methods (read from its class when it is not instantiated here).
    has_prefer: bool = False
    has_fit_user: bool = False

    def identity(self) -> dict[str, Any]:
        """What enters every cache key of this model (see the module docstring)."""
        return {
            "attribute": self.source.attribute,
            "module": self.source.target if self.source.kind != "file" else None,
            "source_sha256": self.source_sha256,
            "version": self.version,
        }

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.source.kind,
            # As typed (a file's absolute path, which may name the user's home, stays out of run.json).
            "target": self.source.label.rpartition(":")[0]
            if self.source.kind != "entry-point"
            else self.source.target,
            "attribute": self.source.attribute,
            "rm_name": self.name,
            "version": self.version,
            "source_sha256": self.source_sha256,
            "distribution": self.distribution,
            "prefer": self.has_prefer,
            "fit_user": self.has_fit_user,
        }


def load(source: RMSource, *, instantiate: bool = True) -> LoadedRM:
    """Import the code, find NAME and call it once; every failure is one ConfigError line. With `instantiate`
    False and NAME a class (a run whose models live in Ray actors), nothing is called here: `name`, `version`
    and the methods are read from the class, and `instance` is None."""
    distribution = None
    path: Path | None
    if source.kind == "file":
        module, path = _import_file(source)
    elif source.kind == "module":
        module = _import_module(source, source.target)
        path = _module_file(module)
    else:
        ep = next(ep for ep in entry_points() if ep.name == source.target)
        module = _import_module(source, ep.module)
        path = _module_file(module)
        distribution = _distribution(ep)
    factory = _attribute(source, module, path)
    if instantiate or not isinstance(factory, type):
        try:
            instance = factory()
        except Exception as err:
            raise ConfigError(
                f"-p {source.spec}: {source.attribute}() raised {error_text(err)}{_where(err, path)}"
            ) from None
        described = instance
    else:
        instance, described = None, factory
    _check_interface(source, described)
    return LoadedRM(
        source,
        instance,
        name=_text_attribute(source, described, "name"),
        version=_text_attribute(source, described, "version"),
        source_sha256=hashlib.sha256(path.read_bytes()).hexdigest() if path is not None else None,
        distribution=distribution,
        has_prefer=callable(getattr(described, "prefer", None)),
        has_fit_user=callable(getattr(described, "fit_user", None)),
    )


def _import_file(source: RMSource) -> tuple[ModuleType, Path]:
    path = Path(source.target)
    if not path.is_file():
        typed = source.spec.removeprefix(PY_PREFIX).rpartition(":")[0]
        near = ""
        if path.parent.is_dir():
            near = did_you_mean(path.name, [p.name for p in path.parent.glob("*.py")])
        raise ConfigError(f"-p {source.spec}: no such file {typed};{near}".rstrip(";"))
    content = path.read_bytes()
    # One module per file and content: two judges naming one file share it, an edited file is new code.
    digest = hashlib.sha256(str(path).encode() + b"\0" + content).hexdigest()
    name = f"prbj_rm_{digest[:16]}"
    if name in sys.modules:
        return sys.modules[name], path
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"-p {source.spec}: {path} cannot be imported as Python code")
    module = importlib.util.module_from_spec(spec)
    # As `python FILE.py` would: modules beside the file can be imported by it (appended: never shadowing).
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    sys.modules[name] = module  # dataclasses and pickle look a class's module up here
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        del sys.modules[name]
        raise ConfigError(
            f"-p {source.spec}: {path.name} line {err.lineno}: SyntaxError: {one_line(err.msg)}"
        ) from None
    except Exception as err:
        del sys.modules[name]
        raise ConfigError(
            f"-p {source.spec}: importing {path.name} raised {error_text(err)}{_where(err, path)}"
        ) from None
    return module, path


def _import_module(source: RMSource, name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is not None and (name == err.name or name.startswith(f"{err.name}.")):
            raise ConfigError(
                f"-p {source.spec}: no module named {name!r} (installed, or on PYTHONPATH?)"
            ) from None
        raise ConfigError(f"-p {source.spec}: importing {name} raised {error_text(err)}") from None
    except SyntaxError as err:
        raise ConfigError(
            f"-p {source.spec}: {Path(err.filename or name).name} line {err.lineno}: SyntaxError: "
            f"{one_line(err.msg)}"
        ) from None
    except Exception as err:
        raise ConfigError(f"-p {source.spec}: importing {name} raised {error_text(err)}") from None


def _module_file(module: ModuleType) -> Path | None:
    file = getattr(module, "__file__", None)
    return Path(file) if file and Path(file).is_file() else None


def _attribute(source: RMSource, module: ModuleType, path: Path | None) -> Any:
    where = path.name if source.kind == "file" and path is not None else module.__name__
    found: Any = module
    for part in source.attribute.split("."):
        found = getattr(found, part, None)
        if found is None:
            names = [n for n, v in vars(module).items() if not n.startswith("_") and callable(v)]
            near = did_you_mean(source.attribute, names)
            raise ConfigError(f"-p {source.spec}: {where} has no {source.attribute!r};{near}".rstrip(";"))
    if not callable(found):
        raise ConfigError(
            f"-p {source.spec}: {source.attribute!r} in {where} is {article(type(found).__name__)}, not a class or a "
            "factory"
        )
    return found


def _check_interface(source: RMSource, instance: Any) -> None:
    if not callable(getattr(instance, "score", None)):
        made = "" if isinstance(instance, type) else f"() gave {article(type(instance).__name__)} that"
        raise ConfigError(f"-p {source.spec}: {source.attribute}{made} has no score(items) method")
    for optional in ("prefer", "fit_user"):
        value = getattr(instance, optional, None)
        if value is not None and not callable(value):
            raise ConfigError(
                f"-p {source.spec}: {source.attribute}().{optional} is {article(type(value).__name__)}, not a method"
            )


def _text_attribute(source: RMSource, instance: Any, attribute: str) -> str | None:
    value = getattr(instance, attribute, None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(
            f"-p {source.spec}: {source.attribute}().{attribute} is {article(type(value).__name__)}; expected text"
        )
    return str(value)


def article(noun: str) -> str:
    """`a noun` or `an noun`."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _where(error: BaseException, path: Path | None) -> str:
    """` (FILE line N)`: the last line of the reward model's own file the error passed through."""
    if path is None:
        return ""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path]
    if not frames:
        return ""
    return f" ({path.name} line {frames[-1].lineno})"
