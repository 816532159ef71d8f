"""Command-line flags derived from the fields of :class:`~cashg.core.config.generate.SamplingOptions`,
and the defaults they fall back to.

The sampling options are defined once, as the frozen dataclass of the contracts layer (the
``generate`` params section is that type plus its own fields); a flag's name, type and help
come from its field (``--max-char-points`` from ``max_char_points``, the help from the field's
metadata), so an option added there is a flag of ``cashg generate`` without a further edit.
Booleans get ``--name`` / ``--no-name``.

A flag that is not given parses to ``None`` ("not given"), so that the defaults can be chosen
after parsing: :func:`options_from_args` lays the given flags over a base, the ``generate``
section of a params file (:func:`decoding_defaults`; the pipeline's tuned decoding) or the
dataclass defaults. :func:`describe_options` is the one-line summary ``cashg generate`` prints.
Imports no torch (``cashg --help`` stays fast).
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TypeVar

from cashg.core.config.generate import SamplingOptions

T = TypeVar("T")
TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def flag(name: str) -> str:
    """``--max-char-points`` for the field ``max_char_points``."""
    return "--" + name.replace("_", "-")


def add_option_arguments(parser: argparse.ArgumentParser, cls: type = SamplingOptions,
                         skip: tuple[str, ...] = ()) -> None:
    """One flag per field of the dataclass ``cls`` (except ``skip``), parsing to ``None`` when
    not given; the help names the field's default. The field annotations are strings
    (``from __future__ import annotations``)."""
    group = parser.add_argument_group(
        "sampling options", "defaults: the params file's generate section (see --params), "
                            "else the values shown; a flag given wins")
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        tp = TYPES[f.type if isinstance(f.type, str) else f.type.__name__]
        help_text = f"{f.metadata.get('help', '')} (default: params file, else {f.default})".lstrip()
        if tp is bool:  # help=... without %(default)s: no Python adds "(default: None)"
            group.add_argument(flag(f.name), dest=f.name, default=None, help=help_text,
                               action=argparse.BooleanOptionalAction)
        else:
            group.add_argument(flag(f.name), dest=f.name, type=tp, default=None,
                               help=help_text, metavar=f.name.upper())


def given_options(args: argparse.Namespace, cls: type = SamplingOptions) -> dict[str, object]:
    """``{field: value}`` of the flags of ``cls``'s fields that were given on the command line."""
    given = vars(args)
    return {f.name: given[f.name] for f in dataclasses.fields(cls)
            if given.get(f.name) is not None}


def options_from_args(args: argparse.Namespace, cls: type[T] = SamplingOptions,
                      base: object | None = None) -> T:
    """The ``cls`` of the given flags laid over ``base`` (an object with ``cls``'s fields, e.g.
    a :class:`~cashg.core.config.generate.GenerateConfig`; default: ``cls()``)."""
    base = cls() if base is None else base
    values = {f.name: getattr(base, f.name) for f in dataclasses.fields(cls)}
    return cls(**{**values, **given_options(args, cls)})


def decoding_defaults(params: Path | None) -> SamplingOptions:
    """The decoding options of ``params``'s ``generate`` section (the whole file validated by
    :func:`cashg.core.params.load_section`; raises its ``ParamsError``), or the
    :class:`SamplingOptions` defaults when ``params`` is None."""
    if params is None:
        return SamplingOptions()
    from cashg.core.params import load_section

    return load_section("generate", params).sampling(0)


def describe_options(opts: SamplingOptions) -> str:
    """``temperature 0.8, bias 0.0, space_mode, lift_mode, seed 0`` (or ``greedy, ...``): the
    decoding, its modes that are on, the seed, and the other options that are not defaults."""
    default = SamplingOptions()
    parts = ["greedy"] if opts.greedy else [f"temperature {opts.temperature}",
                                            f"bias {opts.bias}"]
    modes = ("space_mode", "lift_mode")  # named when on, in this order
    parts += [name for name in modes if getattr(opts, name)]
    parts.append(f"seed {opts.seed}")
    shown = {"greedy", "temperature", "bias", "seed", *modes}
    for f in dataclasses.fields(SamplingOptions):
        value = getattr(opts, f.name)
        if f.name in shown or value == getattr(default, f.name):
            continue
        parts.append(f.name if value is True else f"no {f.name}" if value is False
                     else f"{f.name} {value}")
    return ", ".join(parts)
