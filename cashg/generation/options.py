"""Command-line flags derived from the fields of :class:`~cashg.core.config.model.SamplingOptions`.

The sampling options are defined once, as the frozen dataclass of the contracts layer (the
``generate`` params section is that type plus its own fields); a flag's name, type, default and
help come from its field (``--max-char-points`` from ``max_char_points``, the help from the
field's metadata), so an option added there is a flag of ``cashg generate`` without a further
edit. Booleans get ``--name`` / ``--no-name``. Imports no torch (``cashg --help`` stays fast).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TypeVar

from cashg.core.config.model import SamplingOptions

T = TypeVar("T")
TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def flag(name: str) -> str:
    """``--max-char-points`` for the field ``max_char_points``."""
    return "--" + name.replace("_", "-")


def add_option_arguments(parser: argparse.ArgumentParser, cls: type = SamplingOptions,
                         skip: tuple[str, ...] = ()) -> None:
    """One flag per field of the dataclass ``cls`` (except ``skip``), defaulting to the field's
    default; the field annotations are strings (``from __future__ import annotations``)."""
    group = parser.add_argument_group("sampling options")
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        tp = TYPES[f.type if isinstance(f.type, str) else f.type.__name__]
        help_text = f.metadata.get("help", "")
        if tp is bool:
            action = group.add_argument(flag(f.name), dest=f.name, default=f.default,
                                        help=help_text, action=argparse.BooleanOptionalAction)
        else:
            action = group.add_argument(flag(f.name), dest=f.name, type=tp, default=f.default,
                                        help=help_text, metavar=f.name.upper())
        if "default" not in (action.help or ""):  # some Pythons' boolean action adds it
            action.help = f"{action.help} (default: {f.default})".lstrip()


def options_from_args(args: argparse.Namespace, cls: type[T] = SamplingOptions) -> T:
    """The ``cls`` of the parsed flags (fields without a flag keep their defaults)."""
    given = vars(args)
    return cls(**{f.name: given[f.name] for f in dataclasses.fields(cls) if f.name in given})
