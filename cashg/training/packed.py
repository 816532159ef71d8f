"""One forward and one backward for all micro-batches of a training step.

The step's loss (appendix A, :mod:`cashg.training.trainer`) is a weighted sum over its
micro-batches (char 1, bigram 1, sentence ``sentence_accum``), each a mean over its own
samples. Running them one at a time repeats every operation of the model once per
micro-batch (six times in stage 3). Here they are joined into one batch
(:func:`~cashg.model.batch.concat_batches`) and every micro-batch keeps exactly what it
would get alone: its decoder windows (a window reads its own sample only), its own style
encoder BatchNorm statistics and glyph-view draw (``groups``), its own loss means
(``cashg.losses.grouped_*``: sums per micro-batch, each over its own steps, boundaries and
SupCon anchors). So the losses and the gradient of their weighted sum equal the
micro-batch loop's up to float rounding (tests/test_loss_composition.py holds them to a
hand-written loop at 1e-5).
"""

from __future__ import annotations

import contextlib

import torch

from cashg.core.config.model import TrainConfig
from cashg.losses import (
    boundary_mask,
    grouped_sequence_loss,
    grouped_style_loss,
    grouped_vertical_drift_loss,
    most_probable_mean,
    space_gap_points,
)
from cashg.model.batch import CharSequenceBatch, concat_batches
from cashg.model.gmm_head import MixtureParams


def float_params(p: MixtureParams) -> MixtureParams:
    return MixtureParams(p.log_pi.float(), p.mu.float(), p.sigma.float(), p.rho.float(),
                         p.pen_logits.float())


def packed_losses(model: torch.nn.Module, micro: list[tuple[str, CharSequenceBatch]],
                  cfg: TrainConfig, amp: contextlib.AbstractContextManager,
                  vdl: dict[str, bool]) -> list[dict[str, torch.Tensor]]:
    """The losses of every micro-batch ``(stream, batch)`` of a step, from one forward: per
    micro-batch the keys of :func:`~cashg.training.trainer.stream_losses` (``mdn, pen, seq,
    vdl, style, style_writer, style_glyph``; ``vdl`` only where ``vdl[stream]``, and 0 for the
    char stream), each a 0-d tensor."""
    batch = concat_batches([b for _, b in micro])
    dev = batch.pen.device
    sizes = [int(b.writer_ids.shape[0]) for _, b in micro]
    n = len(micro)
    counts = torch.tensor(sizes, device=dev)
    sample_group = torch.repeat_interleave(torch.arange(n, device=dev), counts)  # (B,)
    use_vdl = [vdl[s] and s != "char" for s, _ in micro]
    vdl_sample = torch.repeat_interleave(torch.tensor(use_vdl, device=dev), counts)  # (B,)
    # a window for every target character, and for context-only ones where the VDL reads
    # their predictions (stream_losses' targets_only, per micro-batch)
    windows = batch.char_mask & (batch.target_mask | vdl_sample[:, None])
    with amp:
        out = model(batch, windows=windows, groups=sizes)
    p = float_params(out.params)
    mask = batch.point_mask & batch.target_mask[..., None]
    x_only = (space_gap_points(batch.codepoints, batch.pen.shape[-1]) if cfg.space_gap_x_only
              else None)
    seq = grouped_sequence_loss(p, batch.deltas, batch.pen, mask, sample_group, n,
                                cfg.lambda_pen, cfg.pen_class_weights, x_only)
    drift = None
    if any(use_vdl):
        bounds = (boundary_mask(batch.codepoints, batch.char_mask, batch.point_mask)
                  & batch.target_mask[:, 1:] & vdl_sample[:, None])
        drift = grouped_vertical_drift_loss(most_probable_mean(p), batch.deltas,
                                            batch.point_mask, bounds, sample_group, n)
    sty = grouped_style_loss(out.style.writer_embed.float(), out.style.glyph_embed.float(),
                             batch.writer_ids, sample_group, n, batch.glyph_labels,
                             cfg.supcon_temperature)
    result = []
    for g, (stream, _) in enumerate(micro):
        res = {k: seq[k][g] for k in ("mdn", "pen", "seq")}
        if use_vdl[g]:
            res["vdl"] = drift[g]
        elif stream == "char":
            res["vdl"] = res["seq"].new_zeros(())
        res.update(style=sty["style"][g], style_writer=sty["writer"][g],
                   style_glyph=sty["glyph"][g])
        result.append(res)
    return result
