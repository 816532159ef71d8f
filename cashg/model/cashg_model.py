"""The CASHG model: Character Context Encoder, style encoder, Bi-SWT decoder and GMM head.

``CASHG.forward(batch)`` runs teacher-forced decoding of every character window of a
:class:`~cashg.model.batch.CharSequenceBatch` at once (windows flattened over batch and
character positions) and returns mixture parameters per target point (B, S, T).
Autoregressive sampling lives in :mod:`cashg.generation.sampling`. Nothing here imports training code.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch
from torch import nn

from cashg.core.config.model import ModelConfig
from cashg.model.batch import CharSequenceBatch
from cashg.model.decoder import BiSWTDecoder
from cashg.model.gmm_head import GMMHead, MixtureParams
from cashg.model.packing import Packing, take_rows
from cashg.model.plan import ForwardPlan, WindowPlan, longest_window
from cashg.model.relative_gap import RelativeGapUnit
from cashg.model.static_shapes import LENGTH_CLASSES
from cashg.model.style_encoder import StyleEncoder, StyleOutput
from cashg.model.text_encoder import CharacterContextEncoder


@dataclass
class ModelOutput:
    """params: mixture over (B, S, T) target points; style: style encoder outputs;
    gates: (B, S, T, D) fusion gates at the predicting tokens (None when fusion is off)."""

    params: MixtureParams
    style: StyleOutput
    gates: torch.Tensor | None


@dataclass
class Windows:
    """Flattened teacher-forcing windows: W windows of L tokens."""

    batch_index: torch.Tensor  # (W,) sample of each window
    char_index: torch.Tensor  # (W,) current character s of each window
    tokens: torch.Tensor  # (W, L, D)
    positions: torch.Tensor  # (W, L)
    valid: torch.Tensor  # (W, L)
    token_char: torch.Tensor  # (W, L) character position s(t) of each token
    first_out: torch.Tensor  # (W,) index of the token e~_s (predicts the first point)


class CASHG(nn.Module):
    """Context-Aware Stylized Online Handwriting Generation."""

    def __init__(self, cfg: ModelConfig, backbone_config: dict | None = None):
        super().__init__()
        self.cfg = cfg
        self.text = CharacterContextEncoder(cfg, backbone_config)
        self.style = StyleEncoder(cfg)
        self.decoder = BiSWTDecoder(cfg)
        self.head = GMMHead(cfg.d_model, cfg.n_mixtures, cfg.sigma_eps)
        self.gap_unit = RelativeGapUnit() if cfg.relative_gap else None

    @property
    def reads_writer_word_gap(self) -> bool:
        """Whether each writer's measured word gap changes what the model writes."""
        return self.gap_unit is not None

    def mixture_targets(self, batch: CharSequenceBatch) -> torch.Tensor:
        """(B, S, T, 2) the offsets the mixture is scored on: ``batch.deltas``, with a
        space's gap in units of the writer's gap under ``model.relative_gap``
        (:class:`~cashg.model.relative_gap.RelativeGapUnit`; the VDL, which reads heights only,
        takes the predicted modes in this frame as they are)."""
        if self.gap_unit is None:
            return batch.deltas
        return self.gap_unit.targets(batch.deltas, batch.codepoints, batch.writer_word_gap)

    def build_windows(
        self,
        identity: torch.Tensor,  # (B, S, D)
        deltas: torch.Tensor,  # (B, S, T, 2)
        pen: torch.Tensor,  # (B, S, T)
        char_mask: torch.Tensor,  # (B, S)
        point_mask: torch.Tensor,  # (B, S, T)
        window_mask: torch.Tensor | None = None,  # (B, S) characters that get a window
    ) -> Windows:
        """Pack ``[e~_{s-1}, y_{s-1}, e~_s, y_{s,1:T-1}]`` for every valid character (of
        ``window_mask``, default ``char_mask``; a predecessor needs no window of its own):
        the points embedded (:meth:`BiSWTDecoder.embed_chars`), then :meth:`assemble_windows`."""
        points = self.decoder.embed_chars(deltas, pen, point_mask)  # (B, S, T, D)
        return self.assemble_windows(identity, points, point_mask.sum(-1), char_mask,
                                     window_mask)

    def assemble_windows(
        self,
        identity: torch.Tensor,  # (B, S, D) identity embeddings e~
        points: torch.Tensor,  # (B, S, T, D) embedded trajectory points, left aligned
        n_pts: torch.Tensor,  # (B, S) long, points of each character
        char_mask: torch.Tensor,  # (B, S)
        window_mask: torch.Tensor | None = None,  # (B, S) characters that get a window
    ) -> Windows:
        """The Bi-SWT windows (paper Sec. 3.2) of already embedded points: for every character
        ``s`` of ``window_mask`` (default ``char_mask``), ``[e~_{s-1}, y_{s-1,1:n}, e~_s,
        y_{s,1:n-1}]`` (only ``[e~_s, ...]`` for ``s = 0`` or with ``bi_swt`` off), each token
        plus its segment embedding (predecessor / current) and, with
        ``identity_every_token``, each trajectory token plus its own character's identity;
        left aligned, padding zeros. The one window builder: teacher forcing
        (:meth:`build_windows`) and the uncached sampler (which passes a two-character
        "sentence" [previous, current] per row, the current one with its points so far plus
        one never-read slot) both call it."""
        plan = WindowPlan.of(n_pts, char_mask, points.shape[2], window_mask, self.cfg.bi_swt)
        return self.windows_of_plan(identity, points, plan)

    def windows_of_plan(
        self,
        identity: torch.Tensor,  # (B, S, D) identity embeddings e~
        points: torch.Tensor,  # (B, S, T, D) embedded trajectory points, left aligned
        plan: WindowPlan,
    ) -> Windows:
        """The window tokens of :meth:`assemble_windows`, its indices given (:mod:`cashg.model.
        plan`): every token gathered from the bank ``[identity; points; zero row]``."""
        d = identity.shape[-1]
        bank = torch.cat([identity.reshape(-1, d), points.reshape(-1, d),
                          identity.new_zeros(1, d)])
        tokens = take_rows(bank, plan.bank_index) + self.decoder.segment(plan.current) * \
            plan.valid[..., None]
        if self.cfg.identity_every_token:  # the identity of each trajectory token's character
            own = take_rows(identity.reshape(-1, d), plan.own_char)  # (W, L, D)
            tokens = tokens + own * plan.trajectory[..., None]
        return Windows(plan.batch_index, plan.char_index, tokens, plan.positions, plan.valid,
                       plan.token_char, plan.first_out)

    def plan(self, batch: CharSequenceBatch, targets_only: bool = False,
             reference: bool = False, windows: torch.Tensor | None = None) -> ForwardPlan:
        """What :meth:`forward` derives from the batch's masks (:mod:`cashg.model.plan`), for
        the same arguments: computed before a compiled step, so the step has no
        data-dependent shapes and no host synchronisation. :meth:`index_plan` then
        :meth:`with_states`, where the batch is."""
        return self.with_states(self.index_plan(batch, targets_only, reference, windows),
                                batch, batch.pen.device)

    def index_plan(self, batch: CharSequenceBatch, targets_only: bool = False,
                   reference: bool = False, windows: torch.Tensor | None = None) -> ForwardPlan:
        """:meth:`plan` without the frozen text states (the plan's text part holds its
        indices only): tensor arithmetic on the batch's masks and code points, where the
        batch is. A training step builds it from the host batch (no host synchronisation,
        no device work) and moves it in one pinned copy (:func:`cashg.training.packed.
        step_inputs`)."""
        only = None if reference else (batch.target_mask if targets_only else windows)
        win = WindowPlan.of(batch.point_mask.sum(-1), batch.char_mask, batch.pen.shape[-1],
                            only, self.cfg.bi_swt)
        return ForwardPlan(win, None if reference else Packing.of(win.valid),
                           self.text.index_plan(batch.codepoints, batch.char_mask))

    def with_states(self, plan: ForwardPlan, batch: CharSequenceBatch,
                    device: torch.device | str) -> ForwardPlan:
        """``plan`` with the frozen text backbone's states on ``device`` (from its caches,
        keyed by the batch's code points: a host batch costs no synchronisation)."""
        if plan.text is None or plan.text.identity_states is not None:
            return plan
        return replace(plan, text=self.text.with_states(plan.text, batch.codepoints,
                                                        batch.char_mask, device))

    def static_plan(self, batch: CharSequenceBatch, groups: Sequence[int], windows: torch.Tensor,
                    fit: Callable[[str, int], int]) -> ForwardPlan:
        """:meth:`static_index_plan` with the text states (:meth:`with_states`) and the
        glyph views drawn, where the batch is."""
        plan = self.static_index_plan(batch, windows, fit)
        plan = replace(plan, views=self.style.draw_views(groups, batch.pen.device))
        return self.with_states(plan, batch, batch.pen.device)

    def static_index_plan(self, batch: CharSequenceBatch, windows: torch.Tensor,
                          fit: Callable[[str, int], int]) -> ForwardPlan:
        """:meth:`index_plan` of ``windows`` (B, S) with every size a function of the batch's
        shape (B, S, T) and of sizes ``fit(name, n)`` gives for counts ``n`` (>= n, from a few
        values: :class:`~cashg.model.static_shapes.ShapeLadder`) (:mod:`cashg.model.
        static_shapes`): the windows in :data:`~cashg.model.static_shapes.LENGTH_CLASSES`, each
        class padded with dummy windows (``"W<c>"``; a class that no window of the stage has
        reached yet is left out) and run by the padded decoder at its own length (the
        classes' bounds; the last ``"L"``); the text indices of ``"U"`` code
        points. No random draw: the glyph views are drawn when the plan is placed
        (:meth:`static_plan`, :func:`cashg.training.packed.place`), so that a plan built
        ahead of its step draws them in the step's order. The dummy windows' predictions
        are dropped."""
        b, s, t = batch.pen.shape
        n_pts = batch.point_mask.sum(-1)
        longest = fit("L", longest_window(n_pts, windows, self.cfg.bi_swt))
        win = WindowPlan.of(n_pts, batch.char_mask, t, windows, self.cfg.bi_swt, length=longest)
        lengths = win.valid.sum(1)  # (W,)
        classes, low = [], 0
        for c, high in enumerate((*LENGTH_CLASSES, longest)):
            high = min(high, longest)
            rows = ((lengths > low) & (lengths <= high)).nonzero().squeeze(1)
            n_windows = fit(f"W{c}", len(rows))
            if n_windows:  # a class no window of the stage has reached costs no call
                classes.append(win.take(rows, high).padded(n_windows, b * s, t))
            low = high
        n_codes = int(torch.unique(batch.codepoints[batch.char_mask]).numel())
        return ForwardPlan(classes[0], None,
                           self.text.index_plan(batch.codepoints, batch.char_mask,
                                                fit("U", n_codes)),
                           None, tuple(classes))

    def forward(self, batch: CharSequenceBatch, return_gates: bool = False,
                targets_only: bool = False, reference: bool = False,
                windows: torch.Tensor | None = None,
                groups: Sequence[int] | None = None,
                plan: ForwardPlan | None = None) -> ModelOutput:
        """Teacher-forced mixture parameters for every point of every valid character, the
        decoder run on the valid tokens only. ``targets_only``: only the characters of
        ``batch.target_mask`` get a window (the others, context only, get padding values and
        cost nothing; right when no loss reads their predictions); ``windows`` (B, S) bool
        chooses them per character instead. ``groups``: the sizes of the micro-batches a
        packed training step joined (:meth:`StyleEncoder.forward`). ``reference=True`` is the
        plain computation the fast one must equal (tests): a window for every valid character
        and the decoder over the padded windows. ``plan``: :meth:`plan` of the same
        arguments, computed beforehand (a compiled training step); the same values either way."""
        b, s, t = batch.pen.shape
        if plan is None:
            plan = self.plan(batch, targets_only, reference, windows)
        else:  # an index plan (no text states yet): looked up here, where the batch is
            plan = self.with_states(plan, batch, batch.pen.device)
        style = self.style(batch.style_images, groups, plan.views)
        identity, ctx = self.text(batch.codepoints, batch.char_mask, plan.text)
        points = self.decoder.embed_chars(batch.deltas, batch.pen,
                                          batch.point_mask)  # (B, S, T, D)
        classes = plan.classes or (plan.windows,)
        outs = [self._window_outputs(batch, identity, points, ctx, style, w,
                                     plan.packing if len(classes) == 1 else None)
                for w in classes]  # [(h_out (W_c, T, D), gate, out_idx, Windows)]
        if len(outs) == 1:
            h_out, gate, out_idx, win = outs[0]
            target = plan.windows.target
        else:  # a static-shape plan's length classes, one after the other
            h_out, gate = torch.cat([o[0] for o in outs]), None
            target = torch.cat([w.target for w in classes])
        p = self.head(h_out)  # over (W, T)
        params = _scatter_params(p, target, (b, s, t))
        gates = None
        if return_gates and gate is not None:
            g = torch.gather(gate, 1, out_idx[..., None].expand(-1, -1, gate.shape[-1]))
            gates = g.new_zeros(b, s, t, g.shape[-1])
            gates[win.batch_index, win.char_index] = g
        return ModelOutput(params, style, gates)

    def _window_outputs(self, batch: CharSequenceBatch, identity: torch.Tensor,
                        points: torch.Tensor, ctx: torch.Tensor, style: StyleOutput,
                        plan: WindowPlan, packing: Packing | None):
        """The decoder over the windows of ``plan``: (h_out (W, T, D) the state predicting
        each point of each window's current character, gate (W, L, D) or None, out_idx (W, T),
        the :class:`Windows`)."""
        t = batch.pen.shape[-1]
        win = self.windows_of_plan(identity, points, plan)
        mem_kv = [(take_rows(k, win.batch_index), take_rows(v, win.batch_index)) for k, v in
                  self.decoder.memory_kv(style.writer_memory, style.glyph_memory)]
        m_ctx = take_rows(ctx.flatten(0, 1), win.batch_index[:, None] * ctx.shape[1]
                          + win.token_char)  # (W, L, D)
        context = self.decoder.window_context(ctx, batch.char_mask, win.batch_index,
                                              win.char_index)
        h, gate = self.decoder(win.tokens, win.positions, win.valid, mem_kv, m_ctx, context,
                               packed=packing is not None, packing=packing)
        out_idx = (win.first_out[:, None] + torch.arange(t, device=h.device)).clamp(
            max=h.shape[1] - 1)  # (W, T): token predicting point k of the current character
        h_out = torch.gather(h, 1, out_idx[..., None].expand(-1, -1, h.shape[-1]))
        return h_out, gate, out_idx, win


def _scatter_params(p: MixtureParams, target: torch.Tensor, shape) -> MixtureParams:
    """Place per-window (W, T, ...) parameters into (B, S, T, ...) at each window's flat (B*S)
    row ``target`` (W,) (row B*S: a dummy window's, dropped); padding gets safe values."""
    b, s, t = shape

    def put(x: torch.Tensor, fill: float) -> torch.Tensor:
        out = x.new_full((b * s + 1, t, *x.shape[2:]), fill)
        out[target] = x
        return out[:-1].view(*shape, *x.shape[2:])

    return MixtureParams(put(p.log_pi, 0.0), put(p.mu, 0.0), put(p.sigma, 1.0), put(p.rho, 0.0),
                         put(p.pen_logits, 0.0))


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Trainable, frozen and total parameter counts."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    return {"trainable": trainable, "frozen": frozen, "total": trainable + frozen}
