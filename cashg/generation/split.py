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
``generate.seed + k`` (:meth:`~cashg.core.config.generate.GenerateConfig.sampling`), so a run is
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
    """What to write: a line's id, the writer whose style references to use, the text, and
    the writer's word gap for a model with ``model.relative_gap`` (None: unknown, the
    population's; :func:`writer_word_gaps`)."""

    sentence_id: str
    writer_id: str
    text: str
    word_gap: float | None = None


def writer_word_gaps(lines: Sequence, leave_out: bool) -> list[float | None]:
    """Each line's writer word gap (:func:`cashg.core.pen_states.writer_word_gap`) from
    ``lines`` (InkSentences of several writers): with ``leave_out``, the median over the
    same writer's *other* lines (a split written again: a line is never described by its own
    gaps); without, over all of them (lines that are only the writer's description, such as
    the real test lines beside the ``new_text@`` prompts)."""
    from cashg.core.pen_states import space_gaps, writer_word_gap

    by_writer: dict[str, list[int]] = {}
    for k, s in enumerate(lines):
        by_writer.setdefault(s.writer_id, []).append(k)
    out: list[float | None] = [None] * len(lines)
    for members in by_writer.values():
        gaps = [space_gaps(lines[k].text, lines[k].xy, lines[k].char_index) for k in members]
        for j, k in enumerate(members):
            out[k] = writer_word_gap(gaps, j if leave_out else None)
    return out


def folder_writer_word_gap(split_dir: Path, writer: str) -> float | None:
    """``writer``'s word gap (median over all its lines) from the lines of a subsets split
    folder: ``gt.h5`` (a test or validation split) or ``sentence.h5`` (a train split's
    windows, each space once); None when the folder has neither or the writer no gap. For
    a ``model.relative_gap`` model written with a split's references outside the pipeline's
    stages (``cashg generate --writer``, the studio)."""
    from cashg.core.ink import InkFile
    from cashg.core.pen_states import line_word_gaps, space_gaps, space_spans, writer_word_gap
    from cashg.core.subsets.readers import SentenceReader

    split_dir = Path(split_dir)
    if (split_dir / "gt.h5").is_file():
        with InkFile(split_dir / "gt.h5") as f:
            return writer_word_gap([space_gaps(s.text, s.xy, s.char_index) for s in f
                                    if s.writer_id == writer])
    if not (split_dir / "sentence.h5").is_file():
        return None
    with SentenceReader(split_dir / "sentence.h5") as reader:
        rows = reader.indices_by_writer().get(writer, range(0))
        windows = [reader[i] for i in rows]
        gaps = line_word_gaps((w.sentence_id, w.char_offset,
                               space_spans(w.text, w.xy, w.char_index)) for w in windows)
    return writer_word_gap(list(gaps.values()))


def _refs(style: Path, writer: str, size: int, n: int, memo: dict) -> np.ndarray:
    """(n, size, size) float32 references of ``writer`` (memoised)."""
    from cashg.generation.inputs import load_style_h5

    if writer not in memo:
        imgs = load_style_h5(style, writer, size, n)
        memo[writer] = np.resize(imgs, (n, *imgs.shape[1:])) if len(imgs) < n else imgs
    return memo[writer]


def generate_prompts(model, cfg, gcfg, prompts: Sequence[Prompt], style_path: Path, device,
                     progress: bool = True, check=None) -> list:
    """Generated InkSentences of ``prompts`` (same order), each in the style of its writer's
    ``cfg.style_refs`` references in ``style_path`` (a subsets ``style.h5``), batched by text
    length and seeded per batch as the module docstring says (``cfg``: the checkpoint's model
    config; ``gcfg``: the :class:`~cashg.core.config.generate.GenerateConfig`, whose ``limit``
    is not applied here). Any texts can be written: a split's ground truth
    (:func:`generate_split`) or lines of one's own (``new_text@``). ``check``: the
    :class:`~cashg.generation.check.CharacterCheck` that ranks each character's
    ``gcfg.check`` candidates (needed when ``gcfg.check`` is on)."""
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
        gaps = None
        if any(s.word_gap is not None for s in chunk):
            gaps = torch.tensor([np.nan if s.word_gap is None else s.word_gap for s in chunk],
                                dtype=torch.float32, device=device)
        res = sampling.sample(model, cps, mask, torch.from_numpy(refs).to(device),
                              gcfg.sampling(k), writer_word_gap=gaps, check=check)
        for j, (i, s) in enumerate(zip(batch, chunk)):
            out[i] = make_sentence(s.sentence_id, s.writer_id, s.text, res.absolute(j),
                                   res.pen[j], res.char_index[j])
    return out


def generate_split(model, cfg, gcfg, gt_path: Path, style_path: Path, device, progress=True,
                   check=None):
    """``(generated InkSentences, ground-truth InkSentences)`` in sorted id order, with
    ``cfg.style_refs`` references per sentence (``cfg``: the checkpoint's model config;
    ``gcfg``: the :class:`~cashg.core.config.generate.GenerateConfig`; ``check``: as in
    :func:`generate_prompts`)."""
    from cashg.core.ink import InkFile

    with InkFile(gt_path) as f:
        gts = [f[sid] for sid in sorted(f.ids())]
    if gcfg.limit > 0:
        gts = gts[: gcfg.limit]
    gaps = writer_word_gaps(gts, leave_out=True) if cfg.reads_writer_word_gap else [None] * len(gts)
    prompts = [Prompt(s.sentence_id, s.writer_id, s.text, g) for s, g in zip(gts, gaps)]
    return (generate_prompts(model, cfg, gcfg, prompts, style_path, device, progress, check),
            gts)
