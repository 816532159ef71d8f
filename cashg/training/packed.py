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
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from cashg.core.config.train import TrainConfig
from cashg.losses import (
    boundary_mask,
    flat_rows,
    grouped_sequence_loss_at,
    grouped_style_loss,
    grouped_vertical_drift_loss_at,
    most_probable_mean,
    space_gap_points,
)
from cashg.model.batch import CharSequenceBatch, concat_batches, pad_batch
from cashg.model.device import host_to_all
from cashg.model.gmm_head import MixtureParams
from cashg.model.plan import ForwardPlan
from cashg.model.static_shapes import ShapeLadder
from cashg.training.tensor_tree import leaves, rebuild


def float_params(p: MixtureParams) -> MixtureParams:
    return MixtureParams(p.log_pi.float(), p.mu.float(), p.sigma.float(), p.rho.float(),
                         p.pen_logits.float())


@dataclass(frozen=True)
class StepPlan:
    """Every index set a packed step derives from its batch's masks, computed before the step
    (host side: ``nonzero``, buckets, the frozen text look-up), so that :func:`step_losses`
    has no data-dependent shape and compiles as one graph (:mod:`cashg.model.plan`).

    forward: the model's plan; sample_group (B,): each sample's micro-batch; point_rows (N,):
    the scored points (flat (B*S*T) positions), point_group (N,) their micro-batch, x_only
    (N,) bool the points scored by the x marginal (None: option off); bound_rows (M,) /
    bound_group (M,): the VDL boundaries (flat (B*(S-1)) positions) and their micro-batch
    (None: no micro-batch has a VDL). padded: a static-shape plan (:func:`static_step_inputs`):
    the point rows are the scored points, padded to a rung with rows in group G (one past the
    last micro-batch), the boundary rows every boundary, those no loss reads in group G; the
    means of group G are dropped."""

    forward: ForwardPlan
    sample_group: torch.Tensor
    point_rows: torch.Tensor
    point_group: torch.Tensor
    x_only: torch.Tensor | None
    bound_rows: torch.Tensor | None
    bound_group: torch.Tensor | None
    padded: bool = False


def plan_step(model: torch.nn.Module, batch: CharSequenceBatch, sizes: list[int],
              use_vdl: list[bool], cfg: TrainConfig) -> StepPlan:
    """The :class:`StepPlan` of a packed batch of micro-batches of ``sizes`` samples, where
    the batch is: from a host batch, every index on the host and the frozen text states
    not yet looked up (:func:`step_inputs` moves the plan and looks them up)."""
    net = getattr(model, "module", model)  # DDP wraps the model
    dev = batch.pen.device
    s, t = batch.pen.shape[1:]
    group_of = [g for g, n in enumerate(sizes) for _ in range(n)]
    sample_group = torch.tensor(group_of, device=dev)  # (B,)
    vdl_sample = torch.tensor([use_vdl[g] for g in group_of], device=dev)  # (B,)
    # a window for every target character, and for context-only ones where the VDL reads
    # their predictions (CASHG.forward's targets_only, per micro-batch)
    windows = batch.char_mask & (batch.target_mask | vdl_sample[:, None])
    mask = batch.point_mask & batch.target_mask[..., None]
    rows = flat_rows(mask)  # (N,)
    x_only = (space_gap_points(batch.codepoints, t)[mask] if cfg.space_gap_x_only else None)
    bound_rows = bound_group = None
    if any(use_vdl):
        bounds = (boundary_mask(batch.codepoints, batch.char_mask, batch.point_mask)
                  & batch.target_mask[:, 1:] & vdl_sample[:, None])
        bound_rows = flat_rows(bounds)
        bound_group = sample_group[bound_rows // (s - 1)]
    return StepPlan(net.index_plan(batch, windows=windows), sample_group, rows,
                    sample_group[rows // (s * t)], x_only, bound_rows, bound_group)


def static_step_inputs(model: torch.nn.Module, batch: CharSequenceBatch, sizes: list[int],
                       use_vdl: list[bool], cfg: TrainConfig, ladder: ShapeLadder,
                       stage: int) -> tuple[CharSequenceBatch, StepPlan]:
    """The batch padded to its stage's sizes on ``ladder`` (characters, points per character,
    distinct code points, decoder windows per length class, the longest window) and its
    :class:`StepPlan` of static sizes (``padded``): every tensor's shape a function of those
    (:mod:`cashg.model.static_shapes`). Where the batch is, as :func:`plan_step`."""
    net = getattr(model, "module", model)  # DDP wraps the model
    b, s0, t0 = batch.pen.shape
    s = ladder.fit(f"{stage}/S", max(s0, 2))  # S >= 2: a (B, S-1) boundary grid of one row
    t = ladder.fit(f"{stage}/T", t0)
    batch = pad_batch(batch, s, t)
    dev = batch.pen.device
    n = len(sizes)
    group_of = [g for g, k in enumerate(sizes) for _ in range(k)]
    sample_group = torch.tensor(group_of, device=dev)  # (B,)
    dropped = torch.full_like(sample_group, n)
    # the scored points only (as plan_step), their count padded to a rung with rows of the
    # dropped group n: the losses run on about as many rows as the plain step's, not B*S*T
    mask = batch.point_mask & batch.target_mask[..., None]  # (B, S, T)
    valid = flat_rows(mask)  # (N,)
    n_rows = ladder.fit(f"{stage}/N", len(valid))
    extra = n_rows - len(valid)
    point_rows = torch.cat([valid, valid.new_zeros(extra)])  # (N',) padding reads row 0
    point_group = torch.cat([sample_group[valid // (s * t)], dropped.new_full((extra,), n)])
    x_only = (torch.cat([space_gap_points(batch.codepoints, t)[mask],
                         torch.zeros(extra, dtype=torch.bool, device=dev)])
              if cfg.space_gap_x_only else None)
    bound_rows = bound_group = None
    vdl_sample = torch.tensor([use_vdl[g] for g in group_of], device=dev)  # (B,)
    if any(use_vdl):
        bounds = (boundary_mask(batch.codepoints, batch.char_mask, batch.point_mask)
                  & batch.target_mask[:, 1:] & vdl_sample[:, None])  # (B, S-1)
        bound_rows = torch.arange(b * (s - 1), device=dev)
        bound_group = torch.where(bounds, sample_group[:, None], dropped[:, None]).reshape(-1)
    windows = batch.char_mask & (batch.target_mask | vdl_sample[:, None])  # as plan_step's
    forward = net.static_index_plan(batch, windows,
                              lambda name, n: ladder.fit(f"{stage}/{name}", n))
    return batch, StepPlan(forward, sample_group, point_rows, point_group, x_only, bound_rows,
                           bound_group, padded=True)


def step_losses(model: torch.nn.Module, batch: CharSequenceBatch, plan: StepPlan,
                sizes: tuple[int, ...], use_vdl: tuple[bool, ...],
                streams: tuple[str, ...], cfg: TrainConfig) -> list[dict[str, torch.Tensor]]:
    """The losses of a packed step given its plan: tensor arithmetic with the shapes of its
    inputs only, the part ``train.compile`` compiles (one graph, no host synchronisation).
    The forward runs under the caller's autocast, the losses in float32 outside it."""
    n = len(sizes)
    n_rows = n + 1 if plan.padded else n  # a padded plan's group n: rows no loss reads
    out = model(batch, groups=list(sizes), plan=plan.forward)
    with torch.autocast(batch.pen.device.type, enabled=False):
        p = float_params(out.params)
        net = getattr(model, "module", model)  # DDP wraps the model
        seq = grouped_sequence_loss_at(p, net.mixture_targets(batch), batch.pen, plan.point_rows,
                                       plan.point_group, n_rows, cfg.lambda_pen,
                                       cfg.pen_class_weights, plan.x_only)
        drift = None
        if plan.bound_rows is not None:
            pred = most_probable_mean(p)  # (B, S, T, 2)
            drift = grouped_vertical_drift_loss_at(pred, batch.deltas, batch.point_mask,
                                                   plan.bound_rows, plan.bound_group, n_rows)
        sty = grouped_style_loss(out.style.writer_embed.float(), out.style.glyph_embed.float(),
                                 batch.writer_ids, plan.sample_group, n, batch.glyph_labels,
                                 cfg.supcon_temperature)
    result = []
    for g, stream in enumerate(streams):
        res = {k: seq[k][g] for k in ("mdn", "pen", "seq")}
        if use_vdl[g]:
            res["vdl"] = drift[g]
        elif stream == "char":
            res["vdl"] = res["seq"].new_zeros(())
        res.update(style=sty["style"][g], style_writer=sty["writer"][g],
                   style_glyph=sty["glyph"][g])
        result.append(res)
    return result


StepFn = Callable[..., list[dict[str, torch.Tensor]]]


def packed_losses(model: torch.nn.Module, micro: list[tuple[str, CharSequenceBatch]],
                  cfg: TrainConfig, amp: contextlib.AbstractContextManager,
                  vdl: dict[str, bool], step: StepFn = step_losses,
                  shapes: tuple[ShapeLadder, int] | None = None
                  ) -> list[dict[str, torch.Tensor]]:
    """The losses of every micro-batch ``(stream, batch)`` of a step, from one forward: per
    micro-batch ``mdn, pen, seq, vdl, style, style_writer, style_glyph`` (``seq = mdn +
    lambda_pen pen``; ``vdl`` only where ``vdl[stream]``, and 0 for the char stream), each a
    0-d tensor. The one loss computation of training and of the held-out evaluation (one
    micro-batch, :meth:`~cashg.training.trainer.Trainer.evaluate`). ``step``: :func:`step_losses` or its compiled form
    (:mod:`cashg.training.compiled`). ``shapes``: (ladder, stage) of a static-shape step
    (``train.static_shapes``, :func:`static_step_inputs`)."""
    batch, plan, key = step_inputs(model, micro, cfg, amp, vdl, shapes)
    with amp:
        return step(model, batch, plan, *key, cfg)


StepKey = tuple[tuple[int, ...], tuple[bool, ...], tuple[str, ...]]


def step_inputs(model: torch.nn.Module, micro: list[tuple[str, CharSequenceBatch]],
                cfg: TrainConfig, amp: contextlib.AbstractContextManager,
                vdl: dict[str, bool], shapes: tuple[ShapeLadder, int] | None = None
                ) -> tuple[CharSequenceBatch, StepPlan, StepKey]:
    """The joined batch, its plan and ``(sizes, use_vdl, streams)`` of a step's micro-batches
    (the arguments of :func:`step_losses` after the model), on the model's device.

    The micro-batches come as the data pipeline made them, on the host: the batch is joined
    and padded and its whole plan built there (:func:`host_step_inputs`), so that no index
    set costs a host synchronisation, then both move in pinned memory with non-blocking
    copies (:func:`place`)."""
    batch, plan, key = host_step_inputs(model, micro, cfg, vdl, shapes)
    device = next(model.parameters()).device
    with amp:
        batch, plan = place(model, batch, plan, key[0], device)
    return batch, plan, key


def host_step_inputs(model: torch.nn.Module, micro: list[tuple[str, CharSequenceBatch]],
                     cfg: TrainConfig, vdl: dict[str, bool],
                     shapes: tuple[ShapeLadder, int] | None = None
                     ) -> tuple[CharSequenceBatch, StepPlan, StepKey]:
    """:func:`step_inputs` before it moves anything: the joined batch and its plan where the
    micro-batches are (the host), the frozen text states not looked up. Reads the model's
    configuration only (tests/test_host_plan.py builds it with the model on ``meta``)."""
    batch = concat_batches([b for _, b in micro])
    sizes = tuple(int(b.writer_ids.shape[0]) for _, b in micro)
    streams = tuple(s for s, _ in micro)
    use_vdl = tuple(vdl[s] and s != "char" for s in streams)
    if shapes is None:
        plan = plan_step(model, batch, list(sizes), list(use_vdl), cfg)
    else:
        batch, plan = static_step_inputs(model, batch, list(sizes), list(use_vdl), cfg,
                                         *shapes)
    return batch, plan, (sizes, use_vdl, streams)


def place(model: torch.nn.Module, batch: CharSequenceBatch, plan: StepPlan,
          sizes: tuple[int, ...], device: torch.device, move: bool = True
          ) -> tuple[CharSequenceBatch, StepPlan]:
    """A host batch of micro-batches of ``sizes`` samples and its plan on ``device``: a
    static-shape plan's glyph views drawn (on the host, the step's one random draw before
    its forward), the frozen text states looked up in the model's caches (keyed by the
    host code points; :meth:`~cashg.model.cashg_model.CASHG.with_states`), every other
    tensor copied in one pinned buffer without blocking (:func:`~cashg.model.device.
    host_to_all`; on the CPU, the same tensors). ``move=False``: every other tensor left on
    the host (a replayed step copies them into its capture's buffer itself,
    :class:`~cashg.training.graphed.GraphedStep`)."""
    net = getattr(model, "module", model)  # DDP wraps the model
    forward = plan.forward
    if forward.classes and forward.views is None:
        forward = replace(forward, views=net.style.draw_views(list(sizes), batch.pen.device))
    plan = replace(plan, forward=net.with_states(forward, batch, device))
    if not move:
        return batch, plan
    return rebuild((batch, plan), host_to_all(leaves((batch, plan)), device))
