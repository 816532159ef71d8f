"""Typed configs of the ``generate`` section of ``params.yaml``: the decoding options (one definition for the params, ``cashg generate`` and the studio)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import ClassVar


def _opt(default, help: str):
    """A field with its command-line help (``cashg generate`` derives its flags from the
    fields of :class:`SamplingOptions`: :func:`cashg.generation.options.add_option_arguments`)."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class SamplingOptions:
    """How the autoregressive sampler chooses points (:mod:`cashg.generation.sampling`); the
    one definition of the decoding options: the ``generate`` params section
    (:class:`GenerateConfig`) is these fields plus its own, and the flags of ``cashg generate``
    are derived from them (one edit adds an option everywhere).

    ``greedy``: the mean of the most probable mixture component and the most probable pen
    state at every step, the authors' decoding (their ``src/model/handwriting_generator.py``:
    ``get_seq_from_gmm(..., decode="argmax_onehot")``); otherwise a stochastic sample at
    ``temperature`` with Graves' sampling ``bias`` (Graves 2013, Sec. 5.4: sharper mixture
    weights, smaller sigma).
    """

    seed: int = _opt(0, "seed of the sampler's random generator")
    greedy: bool = _opt(False, "most probable points, no sampling (the authors' decoding)")
    temperature: float = _opt(1.0, "sampling temperature (> 0; stochastic sampling only)")
    bias: float = _opt(0.0, "Graves' sampling bias (> 0 = neater; stochastic sampling only)")
    max_char_points: int = _opt(100, "points per character at most (then the character "
                                     "ends, counted as truncated)")
    min_char_points: int = _opt(1, "end-of-character states are impossible before this many "
                                   "points (min = max: a fixed number per character)")
    space_mode: bool = _opt(False, "a space's points at its most probable mixture mean "
                                   "(word gaps without the sampling's short tail); other "
                                   "characters as set above")
    lift_mode: bool = _opt(False, "a point that follows a pen lift (a stroke's or "
                                  "character's start) at its most probable mixture mean")
    use_cache: bool = _opt(True, "key/value cache (off: the uncached reference computation, "
                                 "same points up to float rounding)")
    check: int = _opt(0, "draw each character this many times and keep the drawing the "
                         "benchmark's glyph reader reads best (0 = off: the model alone)")


@dataclass(frozen=True)
class GenerateConfig(SamplingOptions):
    """Generation of a held-out split for evaluation (paper Sec. 4: one fully autoregressive
    sample per input of a held-out split): each experiment's split
    (``experiments.<name>.split``: test for Table 2, validation for the ablation cells). Owned
    by cashg/generation (generate stage, :mod:`cashg.generation.stage`).

    The decoding options are the inherited :class:`SamplingOptions` fields (batch ``k`` of a
    split samples with seed ``seed + k``). The number of style references is the
    checkpoint's ``model.style_refs`` (the number the model was trained with).
    """

    batch_size: int = 64  # sentences decoded together (rows advance independently)
    plot_lines: int = 4
    limit: int = 0  # generate only the first N sentences of the split (0 = all)
    # the decoding curve (stage decoding_curve@<experiment>, cashg/evaluation/decoding_curve.py):
    # legibility and Style Score on held-out writers at these temperatures, the rest as above
    curve_temperatures: tuple[float, ...] = (0.5, 0.7, 1.0)
    # the report's labelled "checked" row (stage checked@<experiment>,
    # cashg/evaluation/checked_stage.py): the test lines written again with this many
    # candidates per character, the benchmark's glyph reader keeping the one it reads best;
    # Table 2 itself stays the model alone (``check``, 0 by default)
    checked_row: int = 4

    def __post_init__(self) -> None:
        if self.checked_row < 1:
            raise ValueError(f"generate.checked_row must be >= 1, got {self.checked_row}")

    # keys of earlier versions -> where they live now (cashg.core.params names both in its error)
    moved_keys: ClassVar[dict[str, str]] = {"n_refs": "model.style_refs"}

    def sampling(self, batch: int = 0) -> SamplingOptions:
        """The sampling options of batch ``batch`` of a split (seed ``seed + batch``)."""
        opts = {f.name: getattr(self, f.name) for f in fields(SamplingOptions)}
        return SamplingOptions(**{**opts, "seed": self.seed + batch})
