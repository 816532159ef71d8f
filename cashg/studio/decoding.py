"""The sampling settings of the studio: the run's tuned decoding behind one "neatness" slider.

Neatness ``n`` in [0, 1] maps linearly to the sampling temperature, from ``LOOSE`` (n = 0) down
to ``NEAT`` (n = 1): lower temperature sharpens the mixture weights and pen states and shrinks
sigma (:mod:`cashg.generation.sampling`). The slider starts at the neatness of the run's tuned
temperature (the params file's ``generate`` section), every other setting of that section
(bias, space_mode, lift_mode, greedy ...) is kept as tuned.
"""

from __future__ import annotations

import dataclasses

from cashg.core.config.generate import SamplingOptions

LOOSE, NEAT = 1.0, 0.5  # temperatures at neatness 0 and 1


def temperature_for(neatness: float) -> float:
    """Temperature of a slider position (clamped to [0, 1])."""
    n = min(1.0, max(0.0, float(neatness)))
    return LOOSE + (NEAT - LOOSE) * n


def neatness_for(temperature: float) -> float:
    """Slider position of a temperature (clamped to [0, 1]); inverse of :func:`temperature_for`."""
    n = (float(temperature) - LOOSE) / (NEAT - LOOSE)
    return min(1.0, max(0.0, n))


def tuned_options(generate: SamplingOptions | None) -> SamplingOptions:
    """The run's tuned decoding (only the :class:`SamplingOptions` fields of a ``generate``
    section); the sampler's defaults when the run has no params file."""
    if generate is None:
        return SamplingOptions()
    return SamplingOptions(**{f.name: getattr(generate, f.name)
                              for f in dataclasses.fields(SamplingOptions)})


def request_options(tuned: SamplingOptions, neatness: float | None, seed: int,
                    max_char_points: int) -> SamplingOptions:
    """The options of one request: the tuned ones with the slider's temperature (the tuned
    temperature itself when ``neatness`` is None), the request's seed and the server's cap."""
    temperature = tuned.temperature if neatness is None else temperature_for(neatness)
    return dataclasses.replace(tuned, temperature=temperature, seed=int(seed),
                               max_char_points=min(tuned.max_char_points, max_char_points),
                               use_cache=True)


def neatness_costs(rows: list[dict] | None) -> list[dict] | None:
    """The run's decoding curve (:mod:`cashg.evaluation.decoding_curve`: CER and Style Score
    on held-out writers per temperature) as slider positions, neat end last: what the page
    tells the user a neater line costs in style. None without a curve."""
    if not rows:
        return None
    out = []
    for r in rows:
        try:
            t = float(r["temperature"])
            out.append({"temperature": t, "neatness": round(neatness_for(t), 3),
                        "CER": r.get("CER"), "STYLE_top1": r.get("STYLE_top1")})
        except (KeyError, TypeError, ValueError):
            continue
    return sorted(out, key=lambda r: r["neatness"]) or None
