"""What a teacher-forced forward derives from the batch's masks alone, computed before it.

Which characters get a Bi-SWT window, where each window's tokens come from, where the valid
tokens sit and in which length bucket attention runs them (:class:`~cashg.model.packing.
Packing`), and the frozen text backbone's states: all are index tensors of data-dependent
size (``nonzero``, ``unique``, ``int(max)``, a Python dictionary look-up), each a host
synchronisation and, under ``torch.compile``, a graph break. A :class:`ForwardPlan` holds
them, so the forward given a plan is tensor arithmetic whose sizes are its inputs' shapes:
``torch.compile`` traces a whole training step as one graph (tests/test_compiled_step.py).

The plan is a pure function of the batch (and, for the text states, of the frozen backbone):
the forward computes exactly the same values with or without one (same indices, same order).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from cashg.model.packing import Packing
from cashg.model.text_encoder import TextPlan


@dataclass(frozen=True)
class WindowPlan:
    """The Bi-SWT windows (paper Sec. 3.2) of a batch, as indices: W windows of L tokens.

    batch_index, char_index (W,): the sample and the current character s of each window;
    first_out (W,): index of the token e~_s (predicts the first point); bank_index (W, L):
    each token's row in the bank ``[identity (B*S); points (B*S*T); zero row]``;
    current (W, L) long: segment id (1 current character, 0 predecessor); valid (W, L);
    trajectory (W, L) bool: valid trajectory tokens (not identity tokens); token_char (W, L):
    each token's character position; own_char (W, L): each token's character as a row of the
    (B*S) identity table; positions (W, L); target (W,) long: the flat (B*S) row its
    predictions go to (B*S for the dummy windows of :meth:`padded`, whose rows are dropped)."""

    batch_index: torch.Tensor
    char_index: torch.Tensor
    first_out: torch.Tensor
    bank_index: torch.Tensor
    current: torch.Tensor
    valid: torch.Tensor
    trajectory: torch.Tensor
    token_char: torch.Tensor
    own_char: torch.Tensor
    positions: torch.Tensor
    target: torch.Tensor

    @staticmethod
    def of(n_pts: torch.Tensor, char_mask: torch.Tensor, n_points: int,
           window_mask: torch.Tensor | None = None, bi_swt: bool = True,
           length: int | None = None) -> WindowPlan:
        """The windows of every character of ``window_mask & char_mask`` (B, S) (default
        ``char_mask``): ``[e~_{s-1}, y_{s-1,1:n}, e~_s, y_{s,1:n-1}]``, only ``[e~_s, ...]``
        for ``s = 0`` or without ``bi_swt``; n_pts (B, S) long: points of each character,
        ``n_points`` the batch's T. ``length``: L, at least the longest window (None: the
        longest window, a host synchronisation; a static-shape step passes a size of its own)."""
        b, s = char_mask.shape
        t = n_points
        dev = char_mask.device
        bw, sw = (char_mask if window_mask is None else window_mask & char_mask).nonzero(
            as_tuple=True)  # (W,)
        s_prev = (sw - 1).clamp(min=0)
        has_prev = (sw > 0) & bi_swt
        n_prev = torch.where(has_prev, 1 + n_pts[bw, s_prev], 0)  # (W,)
        lengths = n_prev + n_pts[bw, sw]  # (W,)
        big_l = length if length is not None else (int(lengths.max()) if len(bw) else 1)
        j = torch.arange(big_l, device=dev)[None]  # (1, L)
        in_prev = j < n_prev[:, None]  # (W, L)
        token_char = torch.where(in_prev, s_prev[:, None], sw[:, None])
        pt = torch.where(in_prev, j - 1, j - n_prev[:, None] - 1)  # -1 on identity tokens
        valid = j < lengths[:, None]
        flat_char = bw[:, None] * s + token_char  # (W, L)
        n_id = b * s
        idx = torch.where(pt < 0, flat_char, n_id + flat_char * t + pt.clamp(min=0))
        idx = torch.where(valid, idx, n_id + n_id * t)  # padding -> the zero row
        return WindowPlan(bw, sw, n_prev, idx, (~in_prev).long(), valid, valid & (pt >= 0),
                          token_char, flat_char, j.expand(len(bw), -1), bw * s + sw)

    def take(self, rows: torch.Tensor, length: int) -> WindowPlan:
        """The windows ``rows`` (K,) long, cut to their first ``length`` tokens (at least
        the longest of them): a length class of a static-shape plan."""

        def per_window(x: torch.Tensor) -> torch.Tensor:
            x = x.index_select(0, rows)
            return x[:, :length] if x.dim() == 2 else x

        return WindowPlan(*(per_window(getattr(self, f.name)) for f in fields(self)))

    def padded(self, n_windows: int, n_slots: int, n_points: int) -> WindowPlan:
        """These windows and dummy ones up to ``n_windows``: one valid token each (the bank's
        zero row; attention needs a key), at sample 0, character 0, predicting into row
        ``n_slots`` (B*S), which the forward drops (a static-shape step,
        :mod:`cashg.model.static_shapes`). ``n_points``: the batch's T."""
        w, big_l = self.valid.shape
        extra = n_windows - w
        if extra < 0:
            raise ValueError(f"{w} windows do not fit in {n_windows}")
        if extra == 0:
            return self
        dev = self.valid.device

        def more(x: torch.Tensor, fill: int | bool) -> torch.Tensor:
            return torch.cat([x, x.new_full((extra, *x.shape[1:]), fill)])

        first = torch.zeros(extra, big_l, dtype=torch.bool, device=dev)
        first[:, 0] = True
        return WindowPlan(more(self.batch_index, 0), more(self.char_index, 0),
                          more(self.first_out, 0), more(self.bank_index, n_slots * (1 + n_points)),
                          more(self.current, 1), torch.cat([self.valid, first]),
                          more(self.trajectory, False), more(self.token_char, 0),
                          more(self.own_char, 0), torch.arange(big_l, device=dev)[None].expand(n_windows, -1),
                          more(self.target, n_slots))


def longest_window(n_pts: torch.Tensor, windows: torch.Tensor, bi_swt: bool = True) -> int:
    """The length of the longest window of the characters of ``windows`` (B, S) bool, whose
    characters have ``n_pts`` (B, S) points: the predecessor's identity and points, then the
    current character's identity and all but its last point (:meth:`WindowPlan.of`)."""
    n_prev = torch.zeros_like(n_pts)
    if bi_swt:
        n_prev[:, 1:] = 1 + n_pts[:, :-1]
    return int(torch.where(windows, n_prev + n_pts, 0).max()) if windows.any() else 1


@dataclass(frozen=True)
class GlyphViews:
    """The style encoder's glyph-view draw of a training step, drawn before it (a replayed
    step creates no tensor from host values): ``perms`` (G, n) one random permutation of the
    n glyph-memory tokens per micro-batch, ``group_of`` (B,) long each sample's micro-batch
    (:meth:`cashg.model.style_encoder.StyleEncoder.glyph_views`)."""

    perms: torch.Tensor
    group_of: torch.Tensor


@dataclass(frozen=True)
class ForwardPlan:
    """Everything :meth:`cashg.model.cashg_model.CASHG.forward` derives from the batch's masks:
    its windows, their packing (None: the padded reference computation), the text
    encoder's frozen states (None: computed in the forward; a trained backbone) and the
    glyph-view draw (None: drawn in the forward)."""

    windows: WindowPlan
    packing: Packing | None
    text: TextPlan | None
    views: GlyphViews | None = None
    # a static-shape plan's windows in length classes, each run by the decoder on its own,
    # padded to its own length (``windows`` is then the first class: every size static)
    classes: tuple[WindowPlan, ...] = ()
