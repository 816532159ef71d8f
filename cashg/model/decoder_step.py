"""Incremental decoding with the Bi-SWT decoder (inference only).

:class:`KVCache` keeps the self-attention keys/values of every block for W windows in buffers preallocated to the longest window and written in place;
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

from cashg.model.rope import rotate_full
from cashg.model.step_attention import KeyCounts, attend_one_query


# the functions take the decoder (cashg.model.decoder.BiSWTDecoder, which calls them) as
# ``dec``, typed nn.Module: this module must not import the decoder back
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


def new_cache(dec: nn.Module, windows: int, capacity: int, like: torch.Tensor) -> KVCache:
    """An empty cache of ``windows`` windows of up to ``capacity`` tokens (dtype and device
    of ``like``), for the style and the context branch's blocks."""
    shape = (windows, dec.heads, capacity, dec.dh)
    n = len(dec.blocks) + len(dec.context_blocks)
    cos, sin = dec.rope.step_tables(capacity)
    return KVCache(
        k=[like.new_zeros(shape) for _ in range(n)],
        v=[like.new_zeros(shape) for _ in range(n)],
        length=torch.zeros(windows, dtype=torch.long, device=like.device),
        cos=cos.to(like), sin=sin.to(like),
    )


def step_weights(dec: nn.Module) -> StepWeights:
    """Plain-tensor parameters for :func:`step` (take them again after changing weights)."""

    def ln(m: nn.LayerNorm) -> tuple:
        return (m.normalized_shape, m.weight, m.bias, m.eps)

    def lin(m: nn.Linear) -> tuple:
        return (m.weight, m.bias)

    def block(b: nn.Module) -> BlockWeights:  # ln2, q: None with a single key
        single = b.cross_attn.single_key
        return BlockWeights(ln(b.ln1), lin(b.self_attn.qkv), lin(b.self_attn.out),
                            None if single else ln(b.ln2),
                            None if single else lin(b.cross_attn.q), lin(b.cross_attn.out),
                            ln(b.ln3), lin(b.ffn[0]), lin(b.ffn[3]))

    ctx = dec.context_blocks
    return StepWeights(
        tuple(block(b) for b in dec.blocks), ln(dec.ln_out),
        dec.blocks[0].ffn[1].approximate, tuple(block(b) for b in ctx),
        tuple(lin(b.cross_attn.kv) for b in ctx),
        ln(dec.ln_ctx) if dec.ln_ctx is not None else None)


def step_memory(dec: nn.Module, mem_kv: list, rows: torch.Tensor | None = None,
                sentence_context: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
                | None = None) -> StepMemory:
    """:class:`StepMemory` from :meth:`BiSWTDecoder.memory_kv` (U distinct memories) and the memory
    row of each window (W,) (None: window w reads row w). With ``context_memory:
    sentence`` and a context branch, ``sentence_context`` = (ctx (B, S, D), char_mask
    (B, S), the sentence of each window (W,)): the sentences' context memories."""
    mem_kv = [(k.contiguous(), v.contiguous()) for k, v in mem_kv]
    if rows is None:
        rows = torch.arange(mem_kv[0][0].shape[0], device=mem_kv[0][0].device)
    keys = {m: KeyCounts.of(torch.full_like(rows, m), dec.heads, mem_kv[0][0], rows,
                            n_max=m) for m in {k.shape[2] for k, _ in mem_kv}}
    context = None
    if dec.context_blocks and dec.context_memory == "sentence":
        if sentence_context is None:
            raise ValueError("context_memory 'sentence': step_memory needs the sentences' "
                             "context memories")
        ctx, char_mask, sentence = sentence_context
        kv = dec.context_kv(ctx).kv
        context = SentenceContext.of(kv, sentence, char_mask.sum(1)[sentence], dec.heads)
    return StepMemory(mem_kv, rows, keys, context)


def step(
    dec: nn.Module,
    x: torch.Tensor,  # (W, D) the newest token of every window
    memory: StepMemory,  # from step_memory()
    m_ctx: torch.Tensor | None,  # (W, D) context memory of each window's character
    cache: KVCache,
    weights: StepWeights,  # from step_weights()
    restart: Restart | None = None,
):
    """Append one token to every cached window, each at its own slot ``cache.length``;
    the windows of ``restart`` first restart from their context tokens. Inference only (no
    dropout); equal to :meth:`BiSWTDecoder.forward` over the whole windows up to float rounding, at a
    fraction of its cost. Returns (h (W, D), gate (W, D) or None) of the new tokens."""
    if restart is not None:
        cache.length[restart.rows] = restart.length
        if restart.tokens.shape[1] == 0:
            restart = None  # emptied windows, nothing to encode
    slot = cache.length  # (W,)
    w = len(slot)
    keys = KeyCounts.of(slot + 1, dec.heads, x)  # reads max(slot): one sync per step
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
        x = _block_step(wts, x, plan, cross, cache.k[i], cache.v[i], dec.heads,
                        weights.gelu, i == n_sty - 1 and n_ctx == 0)
    h_sty = torch.layer_norm(x, *weights.ln_out)  # (W, D), or (W + R * P, D) with a branch
    if dec.fusion is None:
        cache.length = slot + 1
        return h_sty, None
    h_ctx = None
    if n_ctx:
        y = h_sty
        for j, cross in enumerate(_context_cross(dec, weights, memory, m_ctx, restart)):
            y = _block_step(weights.context[j], y, plan, cross, cache.k[n_sty + j],
                            cache.v[n_sty + j], dec.heads, weights.gelu, j == n_ctx - 1)
        h_ctx = torch.layer_norm(y, *weights.ln_ctx)
        h_sty = h_sty[:w]
    cache.length = slot + 1
    return dec.fusion(h_sty, m_ctx, h_ctx)


def _context_cross(dec: nn.Module, weights: StepWeights, memory: StepMemory,
                   m_ctx: torch.Tensor,
                   restart: Restart | None) -> list[_Cross]:
    """Per context block, what its cross-attention reads in a step: each window's own
    character vector m_ctx (W, D) as its one key (``character``; projected here, since it
    changes with the window's character), or its sentence's context memory."""
    if memory.context is None:  # character: one key per window, read from m_ctx
        w = m_ctx.shape[0]
        out = []
        for proj in weights.context_kv:  # value projections (single-key blocks)
            v = F.linear(m_ctx, *proj).view(w, dec.heads, 1, dec.dh)  # (W, h, 1, dh)
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
