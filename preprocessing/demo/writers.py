"""Per-writer handwriting style: sampled once per synthetic writer, then applied to every line.

All lengths are in font units (cap height = 21 units); the layout writers convert to their
own units with ``size``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from preprocessing.demo.glyphs import CURSIVE_FAMILIES, PRINT_FAMILIES

Layout = Literal["iam", "brush"]


@dataclass(frozen=True)
class WriterStyle:
    """A synthetic writer's consistent style.

    Attributes:
        family: Hershey font used for the glyph skeletons.
        cursive: True for script writers (joins common), False for print writers.
        slant: shear factor: ``x += slant * height above the baseline``.
        size: layout units per font unit (IAM whiteboard units, or BRUSH pixels).
        width: horizontal stretch of every glyph.
        letter_spacing: extra space between glyphs, font units.
        word_spacing: width of a space, font units.
        baseline_drift: amplitude of the slow baseline wander, font units.
        drift_wavelength: wavelength of that wander, font units.
        jitter: amplitude of the smooth noise added along the pen path, font units.
        join_rate: probability that two adjacent letters are joined pen-down.
        delay_rate: probability that an unjoined i/j dot or t/f bar is written after the word.
        speed: pen speed factor (scales point spacing at a fixed sampling rate).
        skew_mean: mean line rotation in degrees (IAM whiteboard lines).
        skew_std: per-line spread of the rotation, degrees.
        shape_noise: per-glyph-instance relative size variation.
    """

    family: str
    cursive: bool
    slant: float
    size: float
    width: float
    letter_spacing: float
    word_spacing: float
    baseline_drift: float
    drift_wavelength: float
    jitter: float
    join_rate: float
    delay_rate: float
    speed: float
    skew_mean: float
    skew_std: float
    shape_noise: float


def sample_style(rng: np.random.Generator, layout: Layout) -> WriterStyle:
    """Draw a writer's style; about 60 % of writers write cursive."""
    cursive = bool(rng.random() < 0.6)
    families = CURSIVE_FAMILIES if cursive else PRINT_FAMILIES
    family = families[int(rng.integers(len(families)))]
    if layout == "iam":
        size = float(rng.uniform(5.5, 10.0))  # cap height 115-210 whiteboard units
        drift = float(rng.uniform(0.0, 1.6))
        skew_mean = float(rng.choice([0.0, rng.uniform(-5.0, 5.0)], p=[0.25, 0.75]))
        skew_std = float(rng.uniform(0.2, 1.5))
    elif layout == "brush":
        size = float(rng.uniform(1.15, 1.65))  # cap height 24-35 px, descenders stay in the box
        drift = float(rng.uniform(0.0, 0.8))
        skew_mean, skew_std = 0.0, float(rng.uniform(0.0, 0.6))
    else:
        raise ValueError(f"unknown layout {layout!r}")
    return WriterStyle(
        family=family,
        cursive=cursive,
        slant=float(rng.uniform(-0.12, 0.22) if cursive else rng.uniform(-0.08, 0.35)),
        size=size,
        width=float(rng.uniform(0.8, 1.25)),
        letter_spacing=float(rng.uniform(-1.0, 1.0) if cursive else rng.uniform(0.0, 3.5)),
        word_spacing=float(rng.uniform(6.0, 14.0)),
        baseline_drift=drift,
        drift_wavelength=float(rng.uniform(120.0, 400.0)),
        jitter=float(rng.uniform(0.12, 0.45)),
        join_rate=float(rng.uniform(0.45, 0.95) if cursive else rng.uniform(0.0, 0.12)),
        delay_rate=float(rng.choice([0.0, rng.uniform(0.2, 0.8)])),
        speed=float(rng.uniform(0.8, 1.25)),
        skew_mean=skew_mean,
        skew_std=skew_std,
        shape_noise=float(rng.uniform(0.02, 0.07)),
    )
