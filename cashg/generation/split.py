"""Generation of a held-out split: every ground-truth sentence written again by the model, in
its writer's style (paper Sec. 4: one fully autoregressive sample per test input).

For every ground-truth sentence (sorted ids; the first ``generate.limit`` when > 0) the model
writes the same text with the style references of the same writer: the checkpoint's
``model.style_refs`` images of the split's ``style.h5`` (the number the model was trained with;
evenly spaced, repeated cyclically when a writer has fewer).

Sentences are generated in batches of ``generate.batch_size`` (every sentence of a batch
advances on its own, see :mod:`cashg.generation.sampling`): sorted by text length (ties by id)
so that a batch holds sentences of similar length, which cuts padding and the steps a batch
spends on its last, longest rows. Batch ``k`` of that order samples with seed
``generate.seed + k`` (:meth:`~cashg.core.config.model.GenerateConfig.sampling`), so a run is
reproducible for a given batch size; the outputs keep the sorted-id order.

:func:`generate_prompts` is the same generation for any list of (id, writer, text) prompts:
the lines of one's own that the ``new_text@`` stage writes in test writers' styles.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np


class Prompt(NamedTuple):
    """What to write: a line's id, the writer whose style references to use, the text."""

    sentence_id: str
    writer_id: str
    text: str


def _refs(style: Path, writer: str, size: int, n: int, memo: dict) -> np.ndarray:
    """(n, size, size) float32 references of ``writer`` (memoised)."""
    from cashg.generation.inputs import load_style_h5

    if writer not in memo:
        imgs = load_style_h5(style, writer, size, n)
        memo[writer] = np.resize(imgs, (n, *imgs.shape[1:])) if len(imgs) < n else imgs
    return memo[writer]


def generate_prompts(model, cfg, gcfg, prompts: Sequence[Prompt], style_path: Path, device,
                     progress: bool = True) -> list:
    """Generated InkSentences of ``prompts`` (same order), each in the style of its writer's
    ``cfg.style_refs`` references in ``style_path`` (a subsets ``style.h5``), batched by text
    length and seeded per batch as the module docstring says (``cfg``: the checkpoint's model
    config; ``gcfg``: the :class:`~cashg.core.config.model.GenerateConfig`, whose ``limit``
    is not applied here). Any texts can be written: a split's ground truth
    (:func:`generate_split`) or lines of one's own (``new_text@``)."""
    import torch
    from tqdm import tqdm

    from cashg.core.ink import make_sentence
    from cashg.generation import sampling

    memo: dict = {}
    out: list = [None] * len(prompts)
    by_length = sorted(range(len(prompts)), key=lambda i: (len(prompts[i].text), i))
    batches = [by_length[a:a + gcfg.batch_size] for a in range(0, len(prompts), gcfg.batch_size)]
    for k, batch in enumerate(tqdm(batches, desc="generate", unit="batch", file=sys.stderr,
                                   disable=not progress)):
        chunk = [prompts[i] for i in batch]
        refs = np.stack([_refs(style_path, s.writer_id, cfg.style_image_size, cfg.style_refs,
                               memo) for s in chunk])  # (B, R, H, W)
        cps, mask = sampling.encode_texts([s.text for s in chunk], device)
        res = sampling.sample(model, cps, mask, torch.from_numpy(refs).to(device),
                              gcfg.sampling(k))
        for j, (i, s) in enumerate(zip(batch, chunk)):
            out[i] = make_sentence(s.sentence_id, s.writer_id, s.text, res.absolute(j),
                                   res.pen[j], res.char_index[j])
    return out


def generate_split(model, cfg, gcfg, gt_path: Path, style_path: Path, device, progress=True):
    """``(generated InkSentences, ground-truth InkSentences)`` in sorted id order, with
    ``cfg.style_refs`` references per sentence (``cfg``: the checkpoint's model config;
    ``gcfg``: the :class:`~cashg.core.config.model.GenerateConfig`)."""
    from cashg.core.ink import InkFile

    with InkFile(gt_path) as f:
        gts = [f[sid] for sid in sorted(f.ids())]
    if gcfg.limit > 0:
        gts = gts[: gcfg.limit]
    prompts = [Prompt(s.sentence_id, s.writer_id, s.text) for s in gts]
    return generate_prompts(model, cfg, gcfg, prompts, style_path, device, progress), gts
