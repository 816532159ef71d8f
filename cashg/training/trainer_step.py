"""One training iteration: the eager step, the replayed step (``train.cuda_graphs``) and what
they share (:class:`~cashg.training.trainer.Trainer` is built on :class:`TrainingStep`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from cashg.model.batch import CharSequenceBatch
from cashg.training import checkpoint as ck
from cashg.training import distributed as dd
from cashg.training.flat_params import GradientWatch
from cashg.training.optimizer import set_learning_rate
from cashg.training.packed import (
    host_step_inputs,
    packed_losses,
    place,
    step_losses,
)
from cashg.training.readback import PendingStep, device_skip_flag, optimizer_step_unless
from cashg.training.schedules import (
    STREAMS,
    curriculum_stage,
    learning_rate,
)
from cashg.training.step_weights import logged_names, loss_weights, weighted_total


class TrainingStep:
    """One iteration of a :class:`~cashg.training.trainer.Trainer`: forward, losses,
    backward, clipping and the update, eager or replayed."""

    def _warmup_state(self) -> tuple:
        """What a capture's warm-up runs would change besides gradients: BatchNorm statistics
        and the random state (dropout, glyph views), put back by
        :meth:`_restore_warmup_state`; the update they would apply is held (skipped on the
        device, :meth:`_graph_body`) until then."""
        self._hold.fill_(1.0)
        return self.flat_buffers.snapshot(), ck.rng_state()

    def _restore_warmup_state(self, state: tuple) -> None:
        self.flat_buffers.restore(state[0])
        ck.set_rng_state(state[1])
        self._hold.fill_(0.0)

    def train_step(self, t: int, batches: dict[str, list[CharSequenceBatch]],
                   upcoming: Callable[[], tuple[int, dict] | None] | None = None,
                   defer: bool = False) -> dict | PendingStep:
        """Run iteration ``t``; returns its scalar metrics (``skipped`` = 1 when not applied).
        ``upcoming``: fetches the next iteration's ``(t, batches)`` (None at the end); a
        replayed step then builds that step's inputs on the host while the device runs
        this one, before it waits for this step's values (:meth:`_build_ahead`).
        ``defer``: a replayed step is applied or skipped on the device and returns a
        :class:`PendingStep` instead, read later with :meth:`finish_step` (nothing in the
        step waits for the device; :mod:`cashg.training.readback`)."""
        cfg = self.cfg
        set_learning_rate(self.opt, learning_rate(t, cfg))
        # the micro-batches stay on the host: the step's plan is built there and moves with
        # them in pinned, non-blocking copies (cashg.training.packed.step_inputs)
        micro, weights, vdl_on = self._micro(t, batches)
        stage = curriculum_stage(t, cfg)
        watch = self.flat.watch() if stage not in self.checked_stages else None
        self.model.train()
        net = self.ddp if self.ddp is not None else self.model
        # static shapes serve the replayed step: once capturing has failed, the plain packed
        # step (padding would only cost time)
        padded = self.shapes is not None and (self.graphed is None or self.graphed.active)
        shapes = (self.shapes, stage) if padded else None
        ahead, self._ahead = self._ahead, None
        if self.graphed is not None and self.graphed.active and watch is None:
            if ahead is not None and ahead[0] == t:
                (batch, plan, key), epoch = ahead[1], ahead[2]
                self.built_ahead += 1
            else:
                batch, plan, key = host_step_inputs(net, micro, cfg, vdl_on, shapes)
                # a step padded to grown sizes never meets the captures of the old ones again
                epoch = (stage, self.shapes.stage_sizes(stage))
            with self.amp:  # the host tensors stay there: the replay copies them in at once
                batch, plan = place(net, batch, plan, key[0], self.device, move=False)
            # (K + 2,) see _graph_body: the update already applied or skipped on the device
            out = self.graphed(batch, plan, key, weights, epoch=epoch)
            if upcoming is not None and self.graphed.active:
                self._build_ahead(upcoming)
            return self._replayed(t, out, ["train/total", *logged_names(*key[1:])],
                                  self._extra_metrics(t, micro, stage), defer)
        if self.device.type == "cuda":  # one asynchronous copy
            weights = weights.pin_memory()
        coef = weights.to(self.device, non_blocking=True)
        self.flat.zero_grad()
        buffers = self.flat_buffers.snapshot()  # BN statistics, restored if the step is skipped
        sums, grad_norm = self._eager_step(t, net, micro, coef, vdl_on, shapes, watch, stage)
        extra = self._extra_metrics(t, micro, stage)
        # one device-to-host transfer per step (no sync inside the micro-batch loop)
        names = list(sums)
        values = torch.stack([torch.as_tensor(sums[k], device=self.device).float()
                              for k in names] + [grad_norm.float()]).tolist()
        sums = dict(zip(names, values[:-1]))
        gn = values[-1]
        nonfinite = dd.any_true(not all(math.isfinite(v) for v in values), self.device)
        if nonfinite:  # no update at all: drop the gradients, restore running statistics
            self.flat.zero_grad()
            self.flat_buffers.restore(buffers)
        else:
            self.opt.step()
            if self.ema is not None:
                self.ema.update(t + 1, self.flat, self.flat_buffers)
        return self._metrics(sums, gn, nonfinite, extra)

    @staticmethod
    def _metrics(sums: dict[str, float], gn: float, skipped: bool, extra: dict) -> dict:
        return {**sums, "train/lr": extra["train/lr"], "train/stage": extra["train/stage"],
                "train/grad_norm": gn, "train/nonfinite_skipped": float(skipped),
                "samples": extra["samples"]}

    def _extra_metrics(self, t: int, micro: list[tuple[str, CharSequenceBatch]],
                       stage: int) -> dict:
        n_samples = sum(int(b.writer_ids.shape[0]) for _, b in micro)
        return {"train/lr": learning_rate(t, self.cfg), "train/stage": stage,
                "samples": n_samples * self.dist.world}

    def _replayed(self, t: int, out: torch.Tensor, names: list[str], extra: dict,
                  defer: bool) -> dict | PendingStep:
        """A replayed step's outcome from its output ``out`` (K + 2,) (``names``' values,
        the gradient norm, the skip flag; the update is done): moves the weight average,
        and reads the values back now, or (``defer``) one step later (a
        :class:`PendingStep`; :mod:`cashg.training.readback`). A step at which the weight
        average starts is read now: the average starts from the host's count."""
        values, skipped = out[:-1], out[-1]  # (K + 1,) ()
        if defer and (self.ema is None or self.ema.started or t + 1 < self.ema.start):
            if self.ema is not None:
                self.ema.update(t + 1, self.flat, self.flat_buffers, skipped=skipped)
            self.deferred_steps += 1
            return PendingStep.start(t, names, values, skipped, extra)
        host = out.tolist()
        nonfinite = host[-1] > 0
        if not nonfinite and self.ema is not None:
            self.ema.update(t + 1, self.flat, self.flat_buffers)
        return self._metrics(dict(zip(names, host[:-2])), host[-2], nonfinite, extra)

    def finish_step(self, pending: PendingStep) -> dict:
        """A deferred step's metrics, as :meth:`train_step` would have returned them; counts
        the weight average's update on the host."""
        sums, gn, skipped = pending.read()
        if not skipped and self.ema is not None and self.ema.started and \
                pending.iteration + 1 >= self.ema.start:
            self.ema.count()
        return self._metrics(sums, gn, skipped, pending.extra)

    def _micro(self, t: int, batches: dict[str, list[CharSequenceBatch]]
               ) -> tuple[list[tuple[str, CharSequenceBatch]], torch.Tensor, dict[str, bool]]:
        """Iteration ``t``'s micro-batches ``(stream, batch)`` in stream order, their (M, 3)
        loss weights on the host (:func:`loss_weights`) and which streams have a VDL."""
        micro = [(s, b) for s in STREAMS if batches.get(s) for b in batches[s]]
        weights = loss_weights(t, self.cfg, [s for s, _ in micro])  # (M, 3) on the host
        return micro, weights, {s: bool(weights[i, 1] > 0) for i, (s, _) in enumerate(micro)}

    def _build_ahead(self, upcoming: Callable[[], tuple[int, dict] | None]) -> None:
        """The next step's inputs built on the host (joined, padded, planned:
        :func:`~cashg.training.packed.host_step_inputs`) while the device still runs the
        step just replayed, so that the host's share of a step overlaps the device's.
        Nothing random is drawn here (the glyph views are drawn when the inputs are placed),
        and the shape ladder grows as the next step would grow it: a run is the same with
        or without it, and a checkpoint taken now resumes exactly. Only for a step that
        will replay (not the first of a stage, which runs eagerly)."""
        nxt = upcoming()
        if nxt is None:
            return
        t, batches = nxt
        stage = curriculum_stage(t, self.cfg)
        if stage not in self.checked_stages:
            return
        micro, _, vdl_on = self._micro(t, batches)
        net = self.ddp if self.ddp is not None else self.model
        inputs = host_step_inputs(net, micro, self.cfg, vdl_on, (self.shapes, stage))
        self._ahead = (t, inputs, (stage, self.shapes.stage_sizes(stage)))

    def _eager_step(self, t, net, micro, coef, vdl_on, shapes, watch, stage
                    ) -> tuple[dict, torch.Tensor]:
        """Forward, losses, backward and clipping of a step, eagerly: (logged sums, norm)."""
        streams = tuple(s for s, _ in micro)
        use_vdl = tuple(vdl_on[s] and s != "char" for s in streams)
        # every micro-batch in one forward (cashg.training.packed), one backward of the sum
        per_micro = packed_losses(net, micro, self.cfg, self.amp, vdl_on, self.step_fn,
                                  shapes)
        if self.loss_hook is not None:
            per_micro = [self.loss_hook(t, s, losses) for s, losses in zip(streams, per_micro)]
        sums, norm = self._backward(per_micro, streams, use_vdl, coef)
        if watch is not None:
            self._check_all_parameters_reached(watch, stage)
        return sums, norm

    def _graph_body(self, batch: CharSequenceBatch, plan, key, coef: torch.Tensor
                    ) -> torch.Tensor:
        """What ``train.cuda_graphs`` captures (:mod:`cashg.training.graphed`): the whole
        step, its update included, so that a replay is one launch and nothing waits for the
        host. :meth:`_graph_losses`, then the eager step's decision made on the device
        (:mod:`cashg.training.readback`): ``skipped`` is 1 when a value is not finite (or a
        capture's warm-up runs, ``_hold``); the fused AdamW (capturable, its rate a device
        tensor: :mod:`cashg.training.optimizer`) then leaves parameters, moments and step
        count as they are, and the BatchNorm statistics are put back.
        (K + 2,): ``[total, *logged_names(...), grad norm, skipped]``."""
        saved = self.flat_buffers.snapshot()
        values = self._graph_losses(batch, plan, key, coef)  # (K + 1,)
        skipped = torch.maximum(device_skip_flag(values), self._hold)  # ()
        optimizer_step_unless(self.opt, skipped)
        self.flat_buffers.restore_where(skipped, saved)
        return torch.cat([values.float(), skipped.reshape(1)])

    def _graph_losses(self, batch: CharSequenceBatch, plan, key, coef: torch.Tensor
                      ) -> torch.Tensor:
        """The gradient zeroed, the step's losses, their sum weighted by ``coef``
        (:func:`weighted_total`), the backward and the clipping.
        (K + 1,): ``[total, *logged_names(...), grad norm]``."""
        sizes, use_vdl, streams = key
        net = self.ddp if self.ddp is not None else self.model
        self.flat.zero_grad()
        with self.amp:
            per_micro = step_losses(net, batch, plan, sizes, use_vdl, streams, self.cfg)
        sums, norm = self._backward(per_micro, streams, use_vdl, coef)
        names = ["train/total", *logged_names(use_vdl, streams)]
        return torch.stack([sums[k] for k in names] + [norm.float()])

    def _backward(self, per_micro: list[dict[str, torch.Tensor]], streams: tuple[str, ...],
                  use_vdl: tuple[bool, ...], coef: torch.Tensor
                  ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """What follows a step's losses, the same in the eager and the replayed step: their
        weighted total (:func:`weighted_total`) back-propagated once and the gradient's global
        norm clipped to ``grad_clip``. (logged sums with ``train/total``, the norm before
        clipping)."""
        total, sums = weighted_total(per_micro, streams, use_vdl, coef)
        total.backward()
        sums["train/total"] = total.detach()
        return sums, self.flat.clip_grad_norm(self.cfg.grad_clip)

    def _check_all_parameters_reached(self, watch: GradientWatch, stage: int) -> None:
        """After a stage's first backward: every trainable parameter got a gradient.
        torch.optim skips a parameter without one; the flat optimizer would decay and move
        it, so a model whose stage leaves a parameter out stops here instead."""
        unused = [self.trainable_names[i] for i in watch.close()]
        if unused:
            raise RuntimeError(f"curriculum stage {stage}: no gradient reaches {unused}; the "
                               "flat-parameter optimizer needs every trainable parameter in "
                               "every stage (freeze them, or remove them from the model)")
        self.checked_stages.add(stage)

    def prefill_text_states(self) -> int:
        """The frozen text backbone's states of every text the training's batches can hold
        (:meth:`~cashg.training.data.BatchSource.texts`), computed before the loop
        (:meth:`~cashg.model.text_encoder.CharacterContextEncoder.prefill`): on a GPU the backbone
        would otherwise run, eagerly and with host synchronisations, inside the first step
        that meets each text (the paper profile's CANINE-c, at every new sentence). The
        same values either way. Returns the number of texts."""
        texts = self.source.texts()
        with torch.no_grad(), self.amp:
            self.model.text.prefill(texts, self.device)
        return len(texts)
