"""Bi-SWT decoder: bigram-aware sliding-window Transformer decoder (paper Sec. 3.2, app. C.2).

A window for character ``s`` is the token sequence ``[e~_{s-1}, y_{s-1,1:T'}, e~_s, y_{s,1:T-1}]``
(only ``[e~_s, y_{s,1:T-1}]`` for the first character or when ``bi_swt`` is off): identity
embeddings and embedded trajectory points ``(dx, dy, pen one-hot)``, plus a learned segment
embedding (predecessor / current). Tokens are packed left to right (padding on the right), and
the output at ``e~_s`` predicts point 1, the output at ``y_{s,t}`` predicts point ``t+1``.

Each block (pre-LayerNorm): causal self-attention with key-padding masks and RoPE on queries and
keys -> cross-attention to a memory -> feed-forward. As in SDT, the first
``writer_decoder_layers`` blocks attend to the writer-style memory, the next
``glyph_decoder_layers`` blocks to the glyph-style memory; their normalised output is the style
branch's ``h_sty``. The context branch (Sec. 3.3: each block conditions on the style memories
and on the position-specific context memory; app. C.2: "separate decoder branches") is
``context_layers`` further blocks over the same window tokens, fed ``h_sty`` as in the
authors' code (handwriting_generator.py: ``context_decoder(g_out, context_memory)``), whose
cross-attention reads the context memory (``context_memory``: the window's current character's
vector m_ctx_s, as the authors do, or the whole sentence's M_ctx, padding masked); its
normalised output is ``h_ctx``. The token-wise gate of Eq. 1 blends the two branches:
``g = sigmoid(f_gate([h_sty; m_ctx_{s(t)}])), h = (1 - g) * h_sty + g * h_ctx``
(``context_layers: 0``: ``h_ctx = m_ctx_{s(t)}``, Eq. 1 on the raw context vector). With
``gated_fusion`` off (ablation), ``h = h_sty``: no branch, no gate, no context memory.

Incremental decoding (inference only) lives in :mod:`cashg.model.decoder_step`; the methods
:meth:`BiSWTDecoder.new_cache`, :meth:`~BiSWTDecoder.step_weights`,
:meth:`~BiSWTDecoder.step_memory` and :meth:`~BiSWTDecoder.step` call it. Teacher forcing runs
the blocks on the valid tokens of packed windows (:mod:`cashg.model.packing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from cashg.core.config.model import ModelConfig
from cashg.core.records import PU
from cashg.model import decoder_step
from cashg.model.decoder_step import KVCache, Restart, StepMemory, StepWeights
from cashg.model.packing import Bucket, Packing, take_rows
from cashg.model.rope import RotaryEmbedding

N_PEN = 4
MAX_STROKE_INDEX = 7  # model.stroke_index: strokes 7, 8, ... of a character share one embedding
# model.point_count: a point's index t inside its character enters as log(1 + t) / log(1 +
# COUNT_SCALE), 1 at the sampler's default cap of 100 points (larger counts go on past 1)
COUNT_SCALE = 100.0


@dataclass
class ContextKV:
    """The context branch's cross-attention keys/values for W windows
    (:meth:`BiSWTDecoder.context_kv`): per context block (k, v), each (W, h, M, dh), and the
    valid keys ``mask`` (W, 1, 1, M) bool (None: every key, e.g. M = 1 character vector)."""

    kv: list
    mask: torch.Tensor | None


class SelfAttention(nn.Module):
    """Causal multi-head self-attention with RoPE and key-padding masks."""

    def __init__(self, d: int, heads: int, dropout: float, rope: RotaryEmbedding):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.rope = rope
        self.dropout = dropout

    def forward(
        self,
        x: torch.Tensor,  # (W, n, D)
        positions,  # (W, n) logical positions, or RoPE (cos, sin) for them
        key_valid: torch.Tensor,  # (W, n)
    ) -> torch.Tensor:
        w, n, d = x.shape
        q, k, v = self.qkv(x).view(w, n, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)  # (W,h,n,dh)
        q, k = self.rope(q, positions), self.rope(k, positions)
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()  # (n, n)
        mask = causal[None, None] & key_valid[:, None, None, :]  # (W, 1, n, n)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).reshape(w, n, d))


class CrossAttention(nn.Module):
    """Multi-head attention from window tokens to a memory (keys/values precomputed).

    ``single_key``: the memory is one vector per window (the context branch reading its
    character's m_ctx). Softmax over one key weighs it 1 whatever the query, so the output is
    that key's value: no query or key projection exists (they would get no gradient), and
    ``memory_kv`` returns the value twice (the key slot is never read)."""

    def __init__(self, d: int, heads: int, dropout: float, single_key: bool = False):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.single_key = single_key
        self.q = None if single_key else nn.Linear(d, d)
        self.kv = nn.Linear(d, d if single_key else 2 * d)
        self.out = nn.Linear(d, d)
        self.dropout = dropout

    def memory_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values (B, h, M, dh) of a memory (B, M, D)."""
        b, m, _ = memory.shape
        if self.single_key:
            v = self.kv(memory).view(b, m, self.h, self.dh).transpose(1, 2)
            return v, v
        k, v = self.kv(memory).view(b, m, 2, self.h, self.dh).permute(2, 0, 3, 1, 4)
        return k, v

    def single_value(self, kv: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """(W, D) output of a single-key attention: the projected value of each window."""
        v = kv[1]  # (W, h, 1, dh)
        return self.out(v.transpose(1, 2).reshape(v.shape[0], -1))

    def forward(self, x: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor],
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """x (W, n, D), kv (W, h, M, dh) each, mask (W, 1, 1, M) bool: valid keys (None: all)."""
        w, n, d = x.shape
        if self.single_key:
            return self.single_value(kv)[:, None].expand(w, n, d)
        q = self.q(x).view(w, n, self.h, self.dh).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, kv[0], kv[1], attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).reshape(w, n, d))


class DecoderBlock(nn.Module):
    """Pre-LN block: causal RoPE self-attention, cross-attention to one memory, feed-forward."""

    def __init__(self, cfg: ModelConfig, rope: RotaryEmbedding, memory: str,
                 single_key: bool = False):
        super().__init__()
        d = cfg.d_model
        self.memory = memory  # "writer", "glyph" or "context"
        self.ln1, self.ln3 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ln2 = None if single_key else nn.LayerNorm(d)  # a single key ignores the query
        self.self_attn = SelfAttention(d, cfg.n_heads, cfg.dropout, rope)
        self.cross_attn = CrossAttention(d, cfg.n_heads, cfg.dropout, single_key)
        self.ffn = nn.Sequential(
            nn.Linear(d, cfg.ffn_dim), nn.GELU(), nn.Dropout(cfg.dropout), nn.Linear(cfg.ffn_dim, d)
        )
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, positions, key_valid, kv, cross_mask=None):
        x = x + self.drop(self.self_attn(self.ln1(x), positions, key_valid))
        x = x + self.drop(self.cross_attn(x if self.ln2 is None else self.ln2(x), kv,
                                          cross_mask))
        return x + self.drop(self.ffn(self.ln3(x)))

    def forward_packed(self, x: torch.Tensor, pack: Packing, rot, key_valid: torch.Tensor,
                       kv: tuple[torch.Tensor, torch.Tensor],
                       cross_mask: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`forward` (no cache) on the valid tokens only, x (N, D) packed: every
        token-wise layer (LayerNorms, projections, feed-forward) skips the padding; the two
        attentions run per length bucket (:meth:`Packing.per_bucket`), each bucket padded to
        its own longest window. Valid tokens get the same values as :meth:`forward` up to
        float rounding. rot: RoPE (cos, sin) (W, 1, L, dh/2) of the windows' positions."""
        sa, ca = self.self_attn, self.cross_attn
        d = x.shape[-1]
        drop_sa = sa.dropout if self.training else 0.0
        drop_ca = ca.dropout if self.training else 0.0

        def self_attention(b: Bucket, qkv: torch.Tensor) -> torch.Tensor:  # (W_b, L_b, 3D)
            w, n = qkv.shape[:2]
            q, k, v = qkv.view(w, n, 3, sa.h, sa.dh).permute(2, 0, 3, 1, 4)  # (W_b, h, L_b, dh)
            rot_b = (rot[0][b.windows, :, :n], rot[1][b.windows, :, :n])
            q, k = sa.rope(q, rot_b), sa.rope(k, rot_b)
            mask = pack.causal[:n, :n][None, None] & b.valid[:, None, None, :]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop_sa)
            return y.transpose(1, 2).reshape(w, n, d)

        def cross_attention(b: Bucket, q: torch.Tensor) -> torch.Tensor:  # (W_b, L_b, D)
            w, n = q.shape[:2]
            q = q.view(w, n, ca.h, ca.dh).transpose(1, 2)
            mask = None if cross_mask is None else cross_mask[b.windows]
            y = F.scaled_dot_product_attention(q, take_rows(kv[0], b.windows),
                                               take_rows(kv[1], b.windows),
                                               attn_mask=mask, dropout_p=drop_ca)
            return y.transpose(1, 2).reshape(w, n, d)

        x = x + self.drop(sa.out(pack.per_bucket(sa.qkv(self.ln1(x)), self_attention)))
        if ca.single_key:  # every token of a window gets its one value
            x = x + self.drop(take_rows(ca.single_value(kv), pack.window))
        else:
            x = x + self.drop(ca.out(pack.per_bucket(ca.q(self.ln2(x)), cross_attention)))
        return x + self.drop(self.ffn(self.ln3(x)))


@dataclass(frozen=True)
class PointContext:
    """Where a trajectory point sits, besides its own offset: the decoder's optional token
    inputs (each None when its option is off), computed alike by teacher forcing
    (:func:`point_context`) and by the sampler, one point at a time.

    position (..., 2): the pen relative to its character's first point (``point_position``,
    :func:`char_positions`); extent (..., 4): the character's ink so far as a box relative to
    the pen (``char_extent``, :func:`char_extents`); line (..., 1): the pen's height in the
    line's frame (``line_position``, :func:`line_heights`); stroke (...) long: which stroke of
    its character the point belongs to (``stroke_index``, :func:`stroke_indices`); count
    (..., 1): how many points of its character came before it, on a log scale
    (``point_count``, :func:`point_counts`)."""

    position: torch.Tensor | None = None
    extent: torch.Tensor | None = None
    line: torch.Tensor | None = None
    stroke: torch.Tensor | None = None
    count: torch.Tensor | None = None


def char_positions(deltas: torch.Tensor) -> torch.Tensor:
    """(..., T, 2) pen position after each point relative to the character's first point
    (the running sum of the offsets after the first) from a character's deltas (..., T, 2).

    The first offset is left out because its origin differs between streams (a glyph's own
    origin, or the predecessor's last point). Padding after the last point (zero offsets)
    repeats the last position; it is masked wherever it is read. An RNN integrates the offsets
    in its state; attention over offset tokens has to learn the sum, which costs many steps."""
    return deltas.cumsum(-2) - deltas[..., :1, :]


def char_extents(positions: torch.Tensor) -> torch.Tensor:
    """(..., T, 4) ``[min x, min y, max x, max y]`` of a character's points up to and with each
    point, minus that point, from its in-character positions (..., T, 2)
    (:func:`char_positions`): how far the strokes drawn so far reach from the pen (left, up,
    right, down; y down). After a pen lift inside a character the next stroke usually starts
    at such an edge (the top of an H's stems, the stem of a B); relative offsets alone make
    the decoder recover it by attending over every earlier token."""
    lo = positions.cummin(-2).values
    hi = positions.cummax(-2).values
    return torch.cat([lo - positions, hi - positions], -1)


def line_heights(deltas: torch.Tensor, point_mask: torch.Tensor) -> torch.Tensor:
    """(B, S, T, 1) the pen's height after each point in the sample's own frame: the running
    sum of the y offsets of its valid points in writing order, from its origin (deltas (B, S,
    T, 2), point_mask (B, S, T); padding adds nothing).

    Every stream keeps a sample in its line's height-normalised frame (y in [0, 1] over the
    whole line; :mod:`cashg.training.data`: the first offset is ``(0, y_0)``), and sampling
    starts from the same origin, so this is where the pen is within the line's band. With
    offsets alone the decoder cannot tell how far the line has drifted from where it began:
    each character is placed from its predecessor's ink, and the errors add up over a line
    (7.5x the writers' drift without them)."""
    b, s, t, _ = deltas.shape
    dy = torch.where(point_mask, deltas[..., 1], 0.0)
    return dy.reshape(b, s * t).cumsum(1).view(b, s, t, 1)


def stroke_indices(pen: torch.Tensor) -> torch.Tensor:
    """(..., T) long: the stroke of its character each point belongs to, from the pen states
    (..., T) of whole characters: the number of pen lifts (``PU``) before the point, so the
    point after a lift opens the next stroke (the lift itself is the pen state of the last
    point of a stroke). Padding repeats the count; it is masked wherever it is read."""
    lifts = (pen == PU).long()
    return lifts.cumsum(-1) - lifts


def count_feature(index: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(..., 1) the ``point_count`` input of points whose index inside their character is
    ``index`` (...) long: ``log(1 + t) / log(1 + COUNT_SCALE)``. A log scale keeps the short
    characters apart and still grows past the longest glyphs of training, where a learned
    embedding per index would have seen no data."""
    return (torch.log1p(index.to(dtype)) / math.log1p(COUNT_SCALE))[..., None]


def point_counts(deltas: torch.Tensor) -> torch.Tensor:
    """(..., T, 1) the ``point_count`` input of whole characters, deltas (..., T, 2): point
    ``t`` of a character has ``t`` points before it. Padding continues the count; it is masked
    wherever it is read."""
    index = torch.arange(deltas.shape[-2], device=deltas.device)  # (T,)
    return count_feature(index, deltas.dtype).expand(*deltas.shape[:-1], 1)


def point_context(deltas: torch.Tensor, point_mask: torch.Tensor, position: bool,
                  extent: bool, line: bool, stroke: bool = False,
                  pen: torch.Tensor | None = None, count: bool = False) -> PointContext:
    """The :class:`PointContext` of whole characters (teacher forcing): deltas (B, S, T, 2),
    point_mask and pen (B, S, T); only the parts asked for are computed."""
    pos = char_positions(deltas) if position or extent else None
    if stroke and pen is None:
        raise ValueError("stroke_index is on: point_context needs the pen states")
    return PointContext(pos if position else None, char_extents(pos) if extent else None,
                        line_heights(deltas, point_mask) if line else None,
                        stroke_indices(pen) if stroke else None,
                        point_counts(deltas) if count else None)


class GatedContextFusion(nn.Module):
    """Eq. 1: g = sigmoid(f_gate([h_sty; m_ctx])), h = (1 - g) h_sty + g h_ctx, with h_ctx the
    context branch's output (``m_ctx`` itself without a branch, Eq. 1 as written)."""

    def __init__(self, d: int):
        super().__init__()
        self.f_gate = nn.Linear(2 * d, d)

    def forward(self, h_sty: torch.Tensor, m_ctx: torch.Tensor,
                h_ctx: torch.Tensor | None = None):
        """(fused (..., D), gate (..., D) in (0, 1))."""
        g = torch.sigmoid(self.f_gate(torch.cat([h_sty, m_ctx], dim=-1)))
        target = m_ctx if h_ctx is None else h_ctx
        if not h_sty.dtype == target.dtype == g.dtype:  # bf16 autocast: norms give float32
            dtype = torch.promote_types(torch.promote_types(h_sty.dtype, target.dtype), g.dtype)
            h_sty, target, g = h_sty.to(dtype), target.to(dtype), g.to(dtype)
        return torch.lerp(h_sty, target, g), g  # (1 - g) h_sty + g target


class BiSWTDecoder(nn.Module):
    """Token embedding, the style branch's blocks, the context branch and the gated fusion."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        d = cfg.d_model
        if d % cfg.n_heads:
            raise ValueError(f"d_model {d} is not divisible by n_heads {cfg.n_heads}")
        self.point_xy = nn.Linear(2, d)
        self.point_pen = nn.Embedding(N_PEN, d)
        self.point_pos = nn.Linear(2, d) if cfg.point_position else None
        self.point_extent = nn.Linear(4, d) if cfg.char_extent else None
        self.line_pos = nn.Linear(1, d) if cfg.line_position else None
        self.point_stroke = (nn.Embedding(MAX_STROKE_INDEX + 1, d) if cfg.stroke_index
                             else None)
        self.point_count = nn.Linear(1, d) if cfg.point_count else None
        self.segment = nn.Embedding(2, d)  # 0 = predecessor tokens, 1 = current character
        rope = RotaryEmbedding(d // cfg.n_heads, cfg.rope_base)
        self.blocks = nn.ModuleList(
            [DecoderBlock(cfg, rope, "writer") for _ in range(cfg.writer_decoder_layers)]
            + [DecoderBlock(cfg, rope, "glyph") for _ in range(cfg.glyph_decoder_layers)]
        )
        self.ln_out = nn.LayerNorm(d)
        self.fusion = GatedContextFusion(d) if cfg.gated_fusion else None
        n_ctx = cfg.context_layers if cfg.gated_fusion else 0
        self.context_blocks = nn.ModuleList(
            [DecoderBlock(cfg, rope, "context", cfg.context_memory == "character")
             for _ in range(n_ctx)])
        self.ln_ctx = nn.LayerNorm(d) if n_ctx else None
        self.context_memory = cfg.context_memory
        self.heads, self.dh = cfg.n_heads, d // cfg.n_heads
        self.rope = rope

    @property
    def point_inputs(self) -> tuple[bool, bool, bool, bool, bool]:
        """Which :class:`PointContext` parts the tokens embed: (position, extent, line,
        stroke, count)."""
        return (self.point_pos is not None, self.point_extent is not None,
                self.line_pos is not None, self.point_stroke is not None,
                self.point_count is not None)

    def embed_points(self, deltas: torch.Tensor, pen: torch.Tensor,
                     context: PointContext | None = None) -> torch.Tensor:
        """Trajectory tokens (..., D) from deltas (..., 2), pen states (...) and the parts of
        ``context`` the options embed (``point_position``, ``char_extent``,
        ``line_position``, ``stroke_index``, ``point_count``: :class:`PointContext`)."""
        x = self.point_xy(deltas) + self.point_pen(pen)
        parts = ((self.point_pos, "position", "point_position"),
                 (self.point_extent, "extent", "char_extent"),
                 (self.line_pos, "line", "line_position"),
                 (self.point_stroke, "stroke", "stroke_index"),
                 (self.point_count, "count", "point_count"))
        for layer, name, option in parts:
            if layer is None:
                continue
            value = None if context is None else getattr(context, name)
            if value is None:
                raise ValueError(f"{option} is on: embed_points needs the {name}")
            if name == "stroke":
                value = value.clamp(0, MAX_STROKE_INDEX)
            x = x + layer(value)
        return x

    def embed_chars(self, deltas: torch.Tensor, pen: torch.Tensor,
                    point_mask: torch.Tensor) -> torch.Tensor:
        """Trajectory tokens (..., T, D) of whole characters, deltas (B, S, T, 2), pen and
        point_mask (B, S, T); the :class:`PointContext` parts are derived only when they
        are embedded."""
        position, extent, line, stroke, count = self.point_inputs
        ctx = point_context(deltas, point_mask, position, extent, line, stroke, pen,
                            count) if any(
            self.point_inputs) else None
        return self.embed_points(deltas, pen, ctx)

    def memory_kv(self, writer_memory: torch.Tensor, glyph_memory: torch.Tensor) -> list:
        """Per style block cross-attention (k, v), each (B, h, M, dh) contiguous; computed once
        per memory."""
        mem = {"writer": writer_memory, "glyph": glyph_memory}
        return [tuple(t.contiguous() for t in blk.cross_attn.memory_kv(mem[blk.memory]))
                for blk in self.blocks]

    def context_kv(self, memory: torch.Tensor, valid: torch.Tensor | None = None) -> ContextKV:
        """The context branch's keys/values of a context memory (W, M, D) per window, with its
        valid entries (W, M) bool (None: all)."""
        mask = None if valid is None else valid[:, None, None, :]
        return ContextKV([blk.cross_attn.memory_kv(memory) for blk in self.context_blocks],
                         mask)

    def window_context(self, ctx: torch.Tensor, char_mask: torch.Tensor,
                       batch_index: torch.Tensor, char_index: torch.Tensor) -> ContextKV | None:
        """The context memory each window's branch reads (None without a branch): the
        current character's vector ctx[b, s] (``character``) or the whole sentence's
        ctx[b] (``sentence``); ctx (B, S, D), char_mask (B, S), batch/char index (W,)."""
        if not self.context_blocks:
            return None
        if self.context_memory == "character":
            rows = batch_index * ctx.shape[1] + char_index
            return self.context_kv(take_rows(ctx.flatten(0, 1), rows)[:, None])  # (W, 1, D)
        sent = self.context_kv(ctx, char_mask)  # per sentence, then per window
        return ContextKV([(take_rows(k, batch_index), take_rows(v, batch_index))
                          for k, v in sent.kv],
                         sent.mask[batch_index])

    def new_cache(self, windows: int, capacity: int, like: torch.Tensor) -> KVCache:
        """An empty :class:`~cashg.model.decoder_step.KVCache` of ``windows`` windows of up to
        ``capacity`` tokens (dtype and device of ``like``)."""
        return decoder_step.new_cache(self, windows, capacity, like)

    def forward(
        self,
        x: torch.Tensor,  # (W, n, D) window tokens
        positions: torch.Tensor,  # (W, n) long
        token_valid: torch.Tensor,  # (W, n) bool
        mem_kv: list,  # per style block (k, v), each (W, h, M, dh)
        m_ctx: torch.Tensor | None,  # (W, n, D) context memory of each token's character
        context: ContextKV | None = None,  # the context branch's memory (window_context)
        packed: bool = True,
        packing: Packing | None = None,  # where the valid tokens sit, computed beforehand
    ):
        """(h (W, n, D), gate (W, n, D) or None) for whole windows (teacher forcing, and the
        uncached reference mode of sampling).

        With ``packed`` the blocks run on the valid tokens only
        (:meth:`DecoderBlock.forward_packed`; outputs on padding are zeros); ``packed=False``
        is the plain padded computation, kept as the reference. ``packing`` (implies
        ``packed``): :meth:`Packing.of` ``token_valid``, computed before (a compiled step)."""
        if self.context_blocks and context is None:
            raise ValueError("the context branch needs its memory (window_context)")
        if packed or packing is not None:
            pack = Packing.of(token_valid) if packing is None else packing
            return self._forward_packed(x, positions, pack, mem_kv, m_ctx, context)
        rot = self.rope.angles(positions)  # shared by all blocks
        for i, blk in enumerate(self.blocks):
            x = blk(x, rot, token_valid, mem_kv[i])
        h_sty = self.ln_out(x)
        if self.fusion is None:
            return h_sty, None
        h_ctx = None
        if self.context_blocks:
            y = h_sty
            for blk, kv in zip(self.context_blocks, context.kv):
                y = blk(y, rot, token_valid, kv, context.mask)
            h_ctx = self.ln_ctx(y)
        return self.fusion(h_sty, m_ctx, h_ctx)

    def _forward_packed(self, x, positions, pack: Packing, mem_kv, m_ctx, context):
        """:meth:`forward` without a cache, the padding skipped by every token-wise layer."""
        token_valid = pack.valid
        rot = self.rope.angles(positions)  # (cos, sin) (W, 1, L, dh/2), shared by all blocks
        xp = pack.pack(x)  # (N, D)
        for blk, kv in zip(self.blocks, mem_kv):
            xp = blk.forward_packed(xp, pack, rot, token_valid, kv)
        h = self.ln_out(xp)  # (N, D)
        gate = None
        if self.fusion is not None:
            h_ctx = None
            if self.context_blocks:
                y = h
                for blk, kv in zip(self.context_blocks, context.kv):
                    y = blk.forward_packed(y, pack, rot, token_valid, kv, context.mask)
                h_ctx = self.ln_ctx(y)
            h, gate = self.fusion(h, pack.pack(m_ctx), h_ctx)
            gate = pack.unpack(gate)
        return pack.unpack(h), gate

    def step_weights(self) -> StepWeights:
        """Plain-tensor parameters for :meth:`step` (take them again after changing weights)."""
        return decoder_step.step_weights(self)

    def step_memory(self, mem_kv: list, rows: torch.Tensor | None = None,
                    sentence_context: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
                    | None = None) -> StepMemory:
        """:func:`cashg.model.decoder_step.step_memory`."""
        return decoder_step.step_memory(self, mem_kv, rows, sentence_context)

    def step(self, x: torch.Tensor, memory: StepMemory, m_ctx: torch.Tensor | None,
             cache: KVCache, weights: StepWeights, restart: Restart | None = None):
        """Append one token to every cached window (:func:`cashg.model.decoder_step.step`);
        returns (h (W, D), gate (W, D) or None) of the new tokens."""
        return decoder_step.step(self, x, memory, m_ctx, cache, weights, restart)
