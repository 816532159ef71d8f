"""Plain YAML data converted into typed, frozen dataclasses, with errors that name the place.

:func:`build` checks types and refuses unknown keys (a misspelt key is an error naming the key
and where it was found), so a typo never silently falls back to a default. A key that moved to
another section (a dataclass's ``moved_keys``: old key -> new dotted place) is an error that
names the new place. The bottom of the contracts layer: the config dataclasses use it, and
:mod:`cashg.core.params` uses it to read ``params.yaml``.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

T = TypeVar("T")


class ParamsError(ValueError):
    """A params file that does not match the typed configuration."""


def build(cls: type[T], data: Any, where: str = "params") -> T:
    """Convert ``data`` (parsed YAML) into an instance of the dataclass ``cls``.

    ``where`` is the dotted path used in error messages (``params.yaml: train.lr``).
    """
    return _convert(cls, data, where)


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = get_origin(tp)
    if tp is Any:
        return value
    if dataclasses.is_dataclass(tp):
        return _convert_dataclass(tp, value, where)
    if origin is Literal:
        allowed = get_args(tp)
        if value not in allowed:
            raise ParamsError(f"{where}: {value!r} is not one of {list(allowed)}")
        return value
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise ParamsError(f"{where}: a value is required (got null)")
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, where)
            except ParamsError as exc:
                errors.append(str(exc))
        raise ParamsError("; ".join(errors))
    if origin is tuple:
        args = get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ParamsError(f"{where}: expected a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if len(args) != len(value):
            raise ParamsError(f"{where}: expected {len(args)} items, got {len(value)}")
        return tuple(_convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin in (dict, Mapping, typing.Mapping):
        key_t, val_t = get_args(tp)
        if not isinstance(value, Mapping):
            raise ParamsError(f"{where}: expected a mapping, got {type(value).__name__}")
        return types.MappingProxyType(
            {_convert(key_t, k, f"{where}") : _convert(val_t, v, f"{where}.{k}") for k, v in value.items()}
        )
    if tp is bool:
        if not isinstance(value, bool):
            raise ParamsError(f"{where}: expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParamsError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParamsError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ParamsError(f"{where}: expected a string, got {value!r}")
        return value
    raise TypeError(f"unsupported config type {tp!r} at {where}")  # a programming error


def _convert_dataclass(cls: Any, value: Any, where: str) -> Any:
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ParamsError(f"{where}: expected a mapping, got {type(value).__name__}")
    hints = typing.get_type_hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(value) - set(known))
    moved = getattr(cls, "moved_keys", {})  # a key of an earlier version -> its new place
    for u in unknown:
        if u in moved:
            section = where.rsplit(": ", 1)[-1]
            raise ParamsError(f"{where}: key {u!r} moved to {moved[u]}: remove {section}.{u}"
                              f" and set {moved[u]} instead")
    if unknown:
        raise ParamsError(
            f"{where}: unknown key {', '.join(repr(u) for u in unknown)}"
            f" (known keys: {', '.join(sorted(known))})"
        )
    kwargs = {}
    for name, f in known.items():
        if name in value:
            kwargs[name] = _convert(hints[name], value[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ParamsError(f"{where}: missing required key {name!r}")
    return cls(**kwargs)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping with the safe loader (no object construction)."""
    path = Path(path)
    if not path.is_file():
        raise ParamsError(f"{path}: params file not found")
    with path.open(encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a mapping at the top level")
    return data
