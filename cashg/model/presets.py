"""Named model sizes and synthetic samples for tests, benchmarks and smoke runs.

``tiny`` is for unit tests (seconds on a CPU); ``mid`` is a mid-size model for the sampling
benchmark; the paper size is ``ModelConfig()`` itself (with ``text_backbone`` as given).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from cashg.core.config.model import ModelConfig
from cashg.model.batch import SequenceSample

TINY = ModelConfig(
    text_backbone="random-canine", canine_hidden=32, canine_layers=1, canine_heads=2,
    canine_intermediate=64, canine_hash_buckets=512, code_table_size=256, code_dim=8,
    ctx_layers=1, d_model=32, n_heads=4, ffn_dim=64, dropout=0.0, style_refs=2, style_cnn_width=8,
    style_layers=1, supcon_dim=16, writer_decoder_layers=1, glyph_decoder_layers=1, n_mixtures=3,
)

MID = ModelConfig(
    text_backbone="random-canine", canine_hidden=128, canine_layers=2, canine_heads=4,
    canine_intermediate=256, canine_hash_buckets=4096, ctx_layers=2, d_model=256, n_heads=8,
    ffn_dim=1024, dropout=0.0, style_cnn_width=32, style_layers=2, supcon_dim=128,
    writer_decoder_layers=2, glyph_decoder_layers=2, n_mixtures=20,
)


def with_changes(cfg: ModelConfig, **changes: object) -> ModelConfig:
    return dataclasses.replace(cfg, **changes)


def synthetic_sample(text: str, writer: int, rng: np.random.Generator, refs: int = 3,
                     size: int = 64) -> SequenceSample:
    """Random per-character trajectories (2-5 points, last point EOC) and random references."""
    chars = []
    for _ in text:
        n = int(rng.integers(2, 6))
        a = rng.normal(0, 0.05, (n, 3)).astype(np.float32)
        a[:, 2] = 0
        a[-1, 2] = 3
        chars.append(a)
    return SequenceSample(text, chars, rng.random((refs, size, size)).astype(np.float32), writer)
