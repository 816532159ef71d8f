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

Incremental decoding (inference only): :class:`KVCache` keeps the self-attention keys/values of
every block for W windows in buffers preallocated to the longest window and written in place;
each window has its OWN length (slot ``j`` of window ``w`` holds its token at position ``j``,
valid iff ``j < length[w]``), so windows advance independently. Cross-attention keys/values are
computed once per memory (:meth:`BiSWTDecoder.memory_kv`). :meth:`BiSWTDecoder.step` appends one
token to every window; windows that restart (a sampled sentence moving on to its next
character) first get their new context ``[e~_{s-1}, y_{s-1}]`` encoded in the same call (a
:class:`Restart`: those rows only, causal among themselves, into slots ``0..``), then their
``e~_s`` as the step token. The step runs the computation of :meth:`BiSWTDecoder.forward` (equal
up to float rounding) with as few kernel calls as possible (functional calls on the modules'
weights, RoPE from precomputed tables, the step tokens of all windows and the context tokens of
the restarting ones through each Linear together; in the last block the context tokens stop
after their keys/values). Its attention has one query per (window, head) and reads each
window's keys only up to that window's own length (:mod:`cashg.model.step_attention`: numba
kernels on the CPU, which also append the step's key/value to the cache in the same pass).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from cashg.core.config.model import ModelConfig
from cashg.model.rope import RotaryEmbedding, rotate_full
from cashg.model.step_attention import KeyCounts, attend_one_query

N_PEN = 4


@dataclass
class KVCache:
    """Self-attention cache of W windows with per-window lengths.

    k, v: per block (W, h, cap, dh); slot ``j`` of window ``w`` holds the key/value of its token
    at position ``j``. length: (W,) long, the filled slots of each window (the next token goes to
    slot ``length[w]``, at RoPE position ``length[w]``); setting ``length[w] = 0`` empties window
    ``w``. cos, sin: (cap, dh) full-width RoPE tables of :meth:`RotaryEmbedding.step_tables`.
    """

    k: list[torch.Tensor]
    v: list[torch.Tensor]
    length: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor

    @property
    def capacity(self) -> int:
        return self.k[0].shape[2]

    def select(self, rows: torch.Tensor) -> KVCache:
        """The cache of windows ``rows`` (R,) only (copies), e.g. to drop finished windows."""
        return KVCache([k[rows] for k in self.k], [v[rows] for v in self.v], self.length[rows],
                       self.cos, self.sin)


@dataclass
class Restart:
    """Windows that restart at a :meth:`BiSWTDecoder.step`: their cache is emptied and their
    ``length`` (R,) leading context tokens ``tokens`` (R, P, D) (right padded, P >= max length;
    P = 0 for windows without context) are encoded at positions ``0..length - 1`` before the
    step token, which then sits at position ``length``."""

    rows: torch.Tensor  # (R,) long, distinct
    tokens: torch.Tensor  # (R, P, D)
    length: torch.Tensor  # (R,) long


@dataclass
class ContextKV:
    """The context branch's cross-attention keys/values for W windows
    (:meth:`BiSWTDecoder.context_kv`): per context block (k, v), each (W, h, M, dh), and the
    valid keys ``mask`` (W, 1, 1, M) bool (None: every key, e.g. M = 1 character vector)."""

    kv: list
    mask: torch.Tensor | None


@dataclass
class SentenceContext:
    """The sentences' context memories as :meth:`BiSWTDecoder.step` reads them with
    ``context_memory: sentence``: kv per context block (k, v), each (B, h, S, dh) contiguous;
    rows (W,) the sentence of each window; n (W,) its characters (valid keys)."""

    kv: list
    rows: torch.Tensor
    n: torch.Tensor
    keys: KeyCounts  # window w reads the first n[w] keys of row rows[w]

    @staticmethod
    def of(kv: list, rows: torch.Tensor, n: torch.Tensor, heads: int) -> SentenceContext:
        kv = [(k.contiguous(), v.contiguous()) for k, v in kv]
        return SentenceContext(kv, rows, n, KeyCounts.of(n, heads, kv[0][0], rows,
                                                         n_max=kv[0][0].shape[2]))

    def select(self, windows: torch.Tensor) -> SentenceContext:
        return SentenceContext.of(self.kv, self.rows[windows], self.n[windows], self.keys.heads)


@dataclass
class StepMemory:
    """The memories as :meth:`BiSWTDecoder.step` reads them, prepared once per sampling call
    (:meth:`BiSWTDecoder.step_memory`) and again when windows are dropped (:meth:`select`).

    kv: per style block cross-attention (k, v), each (U, h, M, dh) contiguous, U distinct
    memories; rows: (W,) long, the memory row of each window (windows share rows, e.g. the
    sentences of one writer); keys: per memory length, the :class:`KeyCounts` of "every memory
    token"; context: the sentence context memories (``context_memory: sentence``; None with
    ``character``, whose one key per window :meth:`BiSWTDecoder.step` takes from ``m_ctx``)."""

    kv: list
    rows: torch.Tensor
    keys: dict[int, KeyCounts]
    context: SentenceContext | None = None

    def select(self, windows: torch.Tensor) -> StepMemory:
        """The memory of windows ``windows`` (W',) only; the memory rows stay shared."""
        rows = self.rows[windows]
        keys = {m: KeyCounts.of(torch.full_like(rows, m), kc.heads, self.kv[0][0], rows,
                                n_max=m) for m, kc in self.keys.items()}
        ctx = None if self.context is None else self.context.select(windows)
        return StepMemory(self.kv, rows, keys, ctx)


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
        token-wise layer (LayerNorms, projections, feed-forward) skips the padding; only the
        two attentions see the padded (W, L) layout, which they need for their batched
        kernels. Valid tokens get the same values as :meth:`forward` up to float rounding."""
        sa, ca = self.self_attn, self.cross_attn
        w, n, d = pack.windows, pack.length, x.shape[-1]
        # causal self-attention: q, k, v of the valid tokens, scattered into the windows
        qkv = pack.unpack(sa.qkv(self.ln1(x)))  # (W, L, 3D)
        q, k, v = qkv.view(w, n, 3, sa.h, sa.dh).permute(2, 0, 3, 1, 4)  # (W, h, L, dh)
        q, k = sa.rope(q, rot), sa.rope(k, rot)
        mask = pack.causal[None, None] & key_valid[:, None, None, :]  # (W, 1, L, L)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=sa.dropout if self.training else 0.0)
        x = x + self.drop(sa.out(pack.pack(y.transpose(1, 2).reshape(w, n, d))))
        # cross-attention to the window's memory
        if ca.single_key:  # every token of a window gets its one value
            x = x + self.drop(ca.single_value(kv)[pack.window])
        else:
            q = pack.unpack(ca.q(self.ln2(x))).view(w, n, ca.h, ca.dh).transpose(1, 2)
            y = F.scaled_dot_product_attention(
                q, kv[0], kv[1], attn_mask=cross_mask,
                dropout_p=ca.dropout if self.training else 0.0)
            x = x + self.drop(ca.out(pack.pack(y.transpose(1, 2).reshape(w, n, d))))
        return x + self.drop(self.ffn(self.ln3(x)))


@dataclass(frozen=True)
class Packing:
    """Where the N valid tokens of W right-padded windows of L tokens sit.

    flat (N,) long: index of each valid token in the flattened (W * L) layout, in window
    order; causal (L, L) bool: the causal mask of one window; window (N,) long: the window
    of each valid token."""

    flat: torch.Tensor
    windows: int
    length: int
    causal: torch.Tensor
    window: torch.Tensor

    @staticmethod
    def of(valid: torch.Tensor) -> Packing:
        """The packing of the True entries of ``valid`` (W, L)."""
        w, n = valid.shape
        j = torch.arange(n, device=valid.device)
        flat = valid.reshape(-1).nonzero().squeeze(1)
        return Packing(flat, w, n, j[None, :] <= j[:, None], flat // n)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) valid rows of a padded (W, L, ...) tensor."""
        return x.reshape(self.windows * self.length, *x.shape[2:]).index_select(0, self.flat)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(W, L, ...) with the packed rows x (N, ...) in place and zeros on the padding."""
        out = x.new_zeros(self.windows * self.length, *x.shape[1:])
        return out.index_copy(0, self.flat, x).view(self.windows, self.length, *x.shape[1:])


class BlockWeights(NamedTuple):
    """One decoder block's parameters as plain tensors for :meth:`BiSWTDecoder.step`; each
    LayerNorm as ``(normalized_shape, weight, bias, eps)``, each Linear as ``(weight, bias)``
    (the cross-attention's key/value projection is applied once per memory, memory_kv)."""

    ln1: tuple
    qkv: tuple
    attn_out: tuple
    ln2: tuple
    q: tuple
    cross_out: tuple
    ln3: tuple
    ffn_up: tuple
    ffn_down: tuple


@dataclass(frozen=True)
class StepWeights:
    """The decoder parameters for :meth:`BiSWTDecoder.step`, read once per sampling call: a
    module attribute look-up costs about as much as a small kernel."""

    blocks: tuple[BlockWeights, ...]
    ln_out: tuple
    gelu: str  # GELU approximation ("none" = exact erf)
    context: tuple[BlockWeights, ...] = ()  # the context branch's blocks
    context_kv: tuple = ()  # their cross-attention key/value projections (weight, bias)
    ln_ctx: tuple | None = None


class _Cross(NamedTuple):
    """What one block's cross-attention reads in a step: kv (U, h, M, dh) each with the
    windows' :class:`KeyCounts`; for the context tokens of restarting windows, their memory
    (R, h, M, dh) each and its valid keys (R, 1, 1, M) (None: all)."""

    kv: tuple[torch.Tensor, torch.Tensor]
    keys: KeyCounts | None  # None: a single key per window (no attention to compute)
    restart_kv: tuple[torch.Tensor, torch.Tensor] | None
    restart_mask: torch.Tensor | None


@dataclass
class _StepPlan:
    """Where one :meth:`BiSWTDecoder.step` reads and writes; shared by all blocks."""

    slot: torch.Tensor  # (W,) cache slot = RoPE position of each window's step token
    rot: tuple[torch.Tensor, torch.Tensor]  # step tokens' RoPE (cos, sin), (W, 1, 1, dh) each
    keys: KeyCounts  # slot + 1: window w attends to its slots [0, slot]
    restart: Restart | None  # windows with context tokens (P > 0) to encode first
    restart_all: bool  # restart.rows is 0..W-1
    ctx_rot: tuple[torch.Tensor, torch.Tensor] | None  # context RoPE, (P, dh) each


def _block_step(
    wts: BlockWeights,
    x: torch.Tensor,  # (W + R * P, D) the step tokens, then the context tokens of restarts
    plan: _StepPlan,
    cross: _Cross,
    ck: torch.Tensor,  # (W, h, cap, dh) cached keys of this block, written in place
    cv: torch.Tensor,  # (W, h, cap, dh) cached values
    heads: int,
    gelu: str,
    last: bool,  # the last block: context tokens only need their keys/values
) -> torch.Tensor:
    """:meth:`DecoderBlock.forward` (eval mode) for one step token per window (and the context
    tokens of restarting windows) with a cache: the same computation, written functionally
    with as few kernel calls as possible. Returns (W + R * P, D), or (W, D) for the last block."""
    w = plan.slot.shape[0]
    d = x.shape[-1]
    dh = d // heads
    a = F.linear(torch.layer_norm(x, *wts.ln1), *wts.qkv)  # (N, 3D) for all tokens at once
    y_ctx = None
    if plan.restart is not None:  # a fresh causal window over each restart's context tokens
        rows = plan.restart.rows
        r, p = plan.restart.tokens.shape[:2]
        c = a[w:].view(r, p, 3, heads, dh).permute(2, 0, 3, 1, 4)  # (3, R, h, P, dh)
        c_qk = rotate_full(c[:2], *plan.ctx_rot)  # (2, R, h, P, dh)
        # before the step tokens: a restart's step token goes to slot length <= P - 1 and
        # overwrites the padding there
        if plan.restart_all:  # rows = 0..W-1: a plain copy
            ck[:, :, :p] = c_qk[1]
            cv[:, :, :p] = c[2]
        else:
            ck[:, :, :p].index_copy_(0, rows, c_qk[1])
            cv[:, :, :p].index_copy_(0, rows, c[2])
        if not last:
            y_ctx = F.scaled_dot_product_attention(c_qk[0], c_qk[1], c[2], is_causal=True)
            y_ctx = y_ctx.transpose(1, 2).reshape(r * p, d)  # padding rows never read
    # the step token of every window at its own slot, attending to slots [0, slot]
    s = a[:w].view(w, 3, heads, 1, dh).transpose(0, 1)  # (3, W, h, 1, dh)
    qk = rotate_full(s[:2], *plan.rot)  # (2, W, h, 1, dh) rotated queries and keys
    y = attend_one_query(qk[0, :, :, 0], ck, cv, plan.keys,
                         new=(qk[1, :, :, 0], s[2, :, :, 0])).view(w, d)  # appends at slot
    if y_ctx is None:
        x = x[:w]
    else:
        y = torch.cat([y, y_ctx])  # (N, D)
    x = x + F.linear(y, *wts.attn_out)
    # cross-attention to the block's memory (keys/values computed once per memory)
    if wts.q is None:  # a single key per window: its value, whatever the query
        y = cross.kv[1].reshape(w, d)  # (W, h, 1, dh) -> (W, D)
        if y_ctx is not None:
            y = torch.cat([y, cross.restart_kv[1].reshape(r, d).repeat_interleave(p, 0)])
    else:
        q = F.linear(torch.layer_norm(x, *wts.ln2), *wts.q)  # (N, D)
        y = attend_one_query(q[:w].view(w, heads, dh), *cross.kv, cross.keys).view(w, d)
        if y_ctx is not None:
            y_ctx = F.scaled_dot_product_attention(
                q[w:].view(r, p, heads, dh).transpose(1, 2), *cross.restart_kv,
                attn_mask=cross.restart_mask)  # (R, h, P, dh)
            y = torch.cat([y, y_ctx.transpose(1, 2).reshape(r * p, d)])
    x = x + F.linear(y, *wts.cross_out)
    # feed-forward
    hid = F.gelu(F.linear(torch.layer_norm(x, *wts.ln3), *wts.ffn_up), approximate=gelu)
    return x + F.linear(hid, *wts.ffn_down)


def char_positions(deltas: torch.Tensor) -> torch.Tensor:
    """(..., T, 2) pen position after each point relative to the character's first point
    (the running sum of the offsets after the first) from a character's deltas (..., T, 2).

    The first offset is left out because its origin differs between streams (a glyph's own
    origin, or the predecessor's last point). Padding after the last point (zero offsets)
    repeats the last position; it is masked wherever it is read. An RNN integrates the offsets
    in its state; attention over offset tokens has to learn the sum, which costs many steps."""
    return deltas.cumsum(-2) - deltas[..., :1, :]


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

    def embed_points(self, deltas: torch.Tensor, pen: torch.Tensor,
                     position: torch.Tensor | None = None) -> torch.Tensor:
        """Trajectory tokens (..., D) from deltas (..., 2), pen states (...) long and, with
        ``point_position``, the in-character positions (..., 2) of :func:`char_positions`."""
        x = self.point_xy(deltas) + self.point_pen(pen)
        if self.point_pos is not None:
            if position is None:
                raise ValueError("point_position is on: embed_points needs the positions")
            x = x + self.point_pos(position)
        return x

    def embed_chars(self, deltas: torch.Tensor, pen: torch.Tensor) -> torch.Tensor:
        """Trajectory tokens (..., T, D) of whole characters, deltas (..., T, 2) and pen
        (..., T); the in-character positions are derived only when they are embedded."""
        pos = char_positions(deltas) if self.point_pos is not None else None
        return self.embed_points(deltas, pen, pos)

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
            return self.context_kv(ctx[batch_index, char_index][:, None])  # (W, 1, D)
        sent = self.context_kv(ctx, char_mask)  # per sentence, then per window
        return ContextKV([(k[batch_index], v[batch_index]) for k, v in sent.kv],
                         sent.mask[batch_index])

    def new_cache(self, windows: int, capacity: int, like: torch.Tensor) -> KVCache:
        """An empty cache of ``windows`` windows of up to ``capacity`` tokens (dtype and device
        of ``like``), for the style and the context branch's blocks."""
        shape = (windows, self.heads, capacity, self.dh)
        n = len(self.blocks) + len(self.context_blocks)
        cos, sin = self.rope.step_tables(capacity)
        return KVCache(
            k=[like.new_zeros(shape) for _ in range(n)],
            v=[like.new_zeros(shape) for _ in range(n)],
            length=torch.zeros(windows, dtype=torch.long, device=like.device),
            cos=cos.to(like), sin=sin.to(like),
        )

    def forward(
        self,
        x: torch.Tensor,  # (W, n, D) window tokens
        positions: torch.Tensor,  # (W, n) long
        token_valid: torch.Tensor,  # (W, n) bool
        mem_kv: list,  # per style block (k, v), each (W, h, M, dh)
        m_ctx: torch.Tensor | None,  # (W, n, D) context memory of each token's character
        context: ContextKV | None = None,  # the context branch's memory (window_context)
        packed: bool = True,
    ):
        """(h (W, n, D), gate (W, n, D) or None) for whole windows (teacher forcing, and the
        uncached reference mode of sampling).

        With ``packed`` the blocks run on the valid tokens only
        (:meth:`DecoderBlock.forward_packed`; outputs on padding are zeros); ``packed=False``
        is the plain padded computation, kept as the reference."""
        if self.context_blocks and context is None:
            raise ValueError("the context branch needs its memory (window_context)")
        if packed:
            return self._forward_packed(x, positions, token_valid, mem_kv, m_ctx, context)
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

    def _forward_packed(self, x, positions, token_valid, mem_kv, m_ctx, context):
        """:meth:`forward` without a cache, the padding skipped by every token-wise layer."""
        pack = Packing.of(token_valid)
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

        def ln(m: nn.LayerNorm) -> tuple:
            return (m.normalized_shape, m.weight, m.bias, m.eps)

        def lin(m: nn.Linear) -> tuple:
            return (m.weight, m.bias)

        def block(b: DecoderBlock) -> BlockWeights:  # ln2, q: None with a single key
            single = b.cross_attn.single_key
            return BlockWeights(ln(b.ln1), lin(b.self_attn.qkv), lin(b.self_attn.out),
                                None if single else ln(b.ln2),
                                None if single else lin(b.cross_attn.q), lin(b.cross_attn.out),
                                ln(b.ln3), lin(b.ffn[0]), lin(b.ffn[3]))

        ctx = self.context_blocks
        return StepWeights(
            tuple(block(b) for b in self.blocks), ln(self.ln_out),
            self.blocks[0].ffn[1].approximate, tuple(block(b) for b in ctx),
            tuple(lin(b.cross_attn.kv) for b in ctx),
            ln(self.ln_ctx) if self.ln_ctx is not None else None)

    def step_memory(self, mem_kv: list, rows: torch.Tensor | None = None,
                    sentence_context: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
                    | None = None) -> StepMemory:
        """:class:`StepMemory` from :meth:`memory_kv` (U distinct memories) and the memory
        row of each window (W,) (None: window w reads row w). With ``context_memory:
        sentence`` and a context branch, ``sentence_context`` = (ctx (B, S, D), char_mask
        (B, S), the sentence of each window (W,)): the sentences' context memories."""
        mem_kv = [(k.contiguous(), v.contiguous()) for k, v in mem_kv]
        if rows is None:
            rows = torch.arange(mem_kv[0][0].shape[0], device=mem_kv[0][0].device)
        keys = {m: KeyCounts.of(torch.full_like(rows, m), self.heads, mem_kv[0][0], rows,
                                n_max=m) for m in {k.shape[2] for k, _ in mem_kv}}
        context = None
        if self.context_blocks and self.context_memory == "sentence":
            if sentence_context is None:
                raise ValueError("context_memory 'sentence': step_memory needs the sentences' "
                                 "context memories")
            ctx, char_mask, sentence = sentence_context
            kv = self.context_kv(ctx).kv
            context = SentenceContext.of(kv, sentence, char_mask.sum(1)[sentence], self.heads)
        return StepMemory(mem_kv, rows, keys, context)

    def step(
        self,
        x: torch.Tensor,  # (W, D) the newest token of every window
        memory: StepMemory,  # from step_memory()
        m_ctx: torch.Tensor | None,  # (W, D) context memory of each window's character
        cache: KVCache,
        weights: StepWeights,  # from step_weights()
        restart: Restart | None = None,
    ):
        """Append one token to every cached window, each at its own slot ``cache.length``;
        the windows of ``restart`` first restart from their context tokens. Inference only (no
        dropout); equal to :meth:`forward` over the whole windows up to float rounding, at a
        fraction of its cost. Returns (h (W, D), gate (W, D) or None) of the new tokens."""
        if restart is not None:
            cache.length[restart.rows] = restart.length
            if restart.tokens.shape[1] == 0:
                restart = None  # emptied windows, nothing to encode
        slot = cache.length  # (W,)
        w = len(slot)
        keys = KeyCounts.of(slot + 1, self.heads, x)  # reads max(slot): one sync per step
        if keys.n_max > cache.capacity:
            raise ValueError("KV cache capacity exceeded")
        plan = _StepPlan(
            slot=slot, rot=(cache.cos[slot][:, None, None], cache.sin[slot][:, None, None]),
            keys=keys, restart=restart, ctx_rot=None, restart_all=False)
        mem_rows = None
        if restart is not None:
            p = restart.tokens.shape[1]
            plan.ctx_rot = (cache.cos[:p], cache.sin[:p])
            plan.restart_all = len(restart.rows) == w and bool(
                (restart.rows == torch.arange(w, device=slot.device)).all())
            mem_rows = memory.rows[restart.rows]
            x = torch.cat([x, restart.tokens.reshape(-1, x.shape[-1])])  # (W + R * P, D)
        n_sty, n_ctx = len(weights.blocks), len(weights.context)
        for i, (wts, kv) in enumerate(zip(weights.blocks, memory.kv)):
            cross = _Cross(kv, memory.keys[kv[0].shape[2]],
                           None if mem_rows is None else (kv[0][mem_rows], kv[1][mem_rows]),
                           None)
            x = _block_step(wts, x, plan, cross, cache.k[i], cache.v[i], self.heads,
                            weights.gelu, i == n_sty - 1 and n_ctx == 0)
        h_sty = torch.layer_norm(x, *weights.ln_out)  # (W, D), or (W + R * P, D) with a branch
        if self.fusion is None:
            cache.length = slot + 1
            return h_sty, None
        h_ctx = None
        if n_ctx:
            y = h_sty
            for j, cross in enumerate(self._context_cross(weights, memory, m_ctx, restart)):
                y = _block_step(weights.context[j], y, plan, cross, cache.k[n_sty + j],
                                cache.v[n_sty + j], self.heads, weights.gelu, j == n_ctx - 1)
            h_ctx = torch.layer_norm(y, *weights.ln_ctx)
            h_sty = h_sty[:w]
        cache.length = slot + 1
        return self.fusion(h_sty, m_ctx, h_ctx)

    def _context_cross(self, weights: StepWeights, memory: StepMemory, m_ctx: torch.Tensor,
                       restart: Restart | None) -> list[_Cross]:
        """Per context block, what its cross-attention reads in a step: each window's own
        character vector m_ctx (W, D) as its one key (``character``; projected here, since it
        changes with the window's character), or its sentence's context memory."""
        if memory.context is None:  # character: one key per window, read from m_ctx
            w = m_ctx.shape[0]
            out = []
            for proj in weights.context_kv:  # value projections (single-key blocks)
                v = F.linear(m_ctx, *proj).view(w, self.heads, 1, self.dh)  # (W, h, 1, dh)
                out.append(_Cross((v, v), None, None if restart is None else
                                  (v[restart.rows], v[restart.rows]), None))
            return out
        sc = memory.context
        mask = None
        if restart is not None:
            n_keys = sc.kv[0][0].shape[2]
            mask = (torch.arange(n_keys, device=sc.n.device)
                    < sc.n[restart.rows][:, None])[:, None, None, :]  # (R, 1, 1, S)
        rows = None if restart is None else sc.rows[restart.rows]
        return [_Cross(kv, sc.keys, None if rows is None else (kv[0][rows], kv[1][rows]), mask)
                for kv in sc.kv]
