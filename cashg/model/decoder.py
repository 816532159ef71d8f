"""Bi-SWT decoder: bigram-aware sliding-window Transformer decoder (paper Sec. 3.2, app. C.2).

A window for character ``s`` is the token sequence ``[e~_{s-1}, y_{s-1,1:T'}, e~_s, y_{s,1:T-1}]``
(only ``[e~_s, y_{s,1:T-1}]`` for the first character or when ``bi_swt`` is off): identity
embeddings and embedded trajectory points ``(dx, dy, pen one-hot)``, plus a learned segment
embedding (predecessor / current). Tokens are packed left to right (padding on the right), and
the output at ``e~_s`` predicts point 1, the output at ``y_{s,t}`` predicts point ``t+1``.

Each block (pre-LayerNorm): causal self-attention with key-padding masks and RoPE on queries and
keys -> cross-attention to a style memory -> feed-forward. As in SDT, the first
``writer_decoder_layers`` blocks attend to the writer-style memory, the next
``glyph_decoder_layers`` blocks to the glyph-style memory. The final state ``h_sty`` is fused
with the context memory of the token's character by the token-wise gate of Eq. 1:
``g = sigmoid(f_gate([h_sty; m_ctx])), h = (1 - g) * h_sty + g * m_ctx``. With
``gated_fusion`` off (ablation), ``h = h_sty`` (no context memory is used at all).

Incremental decoding: :class:`KVCache` keeps the self-attention keys/values of every block in
buffers preallocated to the longest window (written in place); cross-attention keys/values are
computed once per memory (:meth:`BiSWTDecoder.memory_kv`). Positions are given explicitly, so
cached steps see exactly the relative positions of the full window. A window's prefix goes
through :meth:`BiSWTDecoder.forward` with the cache; every further token through
:meth:`BiSWTDecoder.step`, an inference-only path for one token per window that runs the same
computation (equal up to float rounding) with as few kernel calls as possible (functional calls on the modules'
weights, RoPE from precomputed tables, no causal mask: a single newest query sees every cached
key), because at one token the step cost is dominated by per-call overhead, not arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from cashg.config import ModelConfig
from cashg.model.rope import RotaryEmbedding, rotate_full

N_PEN = 4


@dataclass
class KVCache:
    """Self-attention cache for W windows: per block k/v (W, h, cap, dh); valid (W, cap)."""

    k: list[torch.Tensor]
    v: list[torch.Tensor]
    valid: torch.Tensor
    length: int = 0  # physical slots filled so far
    # additive attention mask (W, 1, 1, cap) for single-token steps: 0 on valid slots and on
    # every slot after the last forward (steps only add valid tokens), -inf on padding; None
    # when nothing is padded. Set by BiSWTDecoder.forward with this cache.
    step_bias: torch.Tensor | None = None

    @property
    def capacity(self) -> int:
        return self.valid.shape[1]


class SelfAttention(nn.Module):
    """Causal multi-head self-attention with RoPE and an optional key/value cache."""

    def __init__(self, d: int, heads: int, dropout: float, rope: RotaryEmbedding):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.rope = rope
        self.dropout = dropout

    def forward(
        self,
        x: torch.Tensor,  # (W, n, D) new tokens
        positions,  # (W, n) logical positions, or RoPE (cos, sin) for them
        key_valid: torch.Tensor,  # (W, n) without cache, (W, cap) with cache
        cache: tuple[torch.Tensor, torch.Tensor] | None = None,  # (W, h, cap, dh) each
        start: int = 0,  # physical slot of the first new token (cache only)
    ) -> torch.Tensor:
        w, n, d = x.shape
        q, k, v = self.qkv(x).view(w, n, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)  # (W,h,n,dh)
        q, k = self.rope(q, positions), self.rope(k, positions)
        if cache is not None:
            ck, cv = cache
            ck[:, :, start:start + n] = k
            cv[:, :, start:start + n] = v
            k, v = ck[:, :, :start + n], cv[:, :, :start + n]
            key_valid = key_valid[:, :start + n]
        m = k.shape[2]
        q_idx = torch.arange(start, start + n, device=x.device)[:, None]
        causal = torch.arange(m, device=x.device)[None, :] <= q_idx  # (n, m)
        mask = causal[None, None] & key_valid[:, None, None, :]  # (W, 1, n, m)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).reshape(w, n, d))


class CrossAttention(nn.Module):
    """Multi-head attention from window tokens to a style memory (keys/values precomputed)."""

    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        self.h, self.dh = heads, d // heads
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, d)
        self.dropout = dropout

    def memory_kv(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values (B, h, M, dh) of a memory (B, M, D)."""
        b, m, _ = memory.shape
        k, v = self.kv(memory).view(b, m, 2, self.h, self.dh).permute(2, 0, 3, 1, 4)
        return k, v

    def forward(self, x: torch.Tensor, kv: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        w, n, d = x.shape
        q = self.q(x).view(w, n, self.h, self.dh).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, kv[0], kv[1], dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).reshape(w, n, d))

class DecoderBlock(nn.Module):
    """Pre-LN block: causal RoPE self-attention, cross-attention to one memory, feed-forward."""

    def __init__(self, cfg: ModelConfig, rope: RotaryEmbedding, memory: str):
        super().__init__()
        d = cfg.d_model
        self.memory = memory  # "writer" or "glyph"
        self.ln1, self.ln2, self.ln3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)
        self.self_attn = SelfAttention(d, cfg.n_heads, cfg.dropout, rope)
        self.cross_attn = CrossAttention(d, cfg.n_heads, cfg.dropout)
        self.ffn = nn.Sequential(
            nn.Linear(d, cfg.ffn_dim), nn.GELU(), nn.Dropout(cfg.dropout), nn.Linear(cfg.ffn_dim, d)
        )
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, positions, key_valid, kv, cache=None, start=0):
        x = x + self.drop(self.self_attn(self.ln1(x), positions, key_valid, cache, start))
        x = x + self.drop(self.cross_attn(self.ln2(x), kv))
        return x + self.drop(self.ffn(self.ln3(x)))

    def forward_packed(self, x: torch.Tensor, pack: Packing, rot, key_valid: torch.Tensor,
                       kv: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
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
        # cross-attention to the window's style memory
        q = pack.unpack(ca.q(self.ln2(x))).view(w, n, ca.h, ca.dh).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, kv[0], kv[1], dropout_p=ca.dropout if self.training else 0.0)
        x = x + self.drop(ca.out(pack.pack(y.transpose(1, 2).reshape(w, n, d))))
        return x + self.drop(self.ffn(self.ln3(x)))


@dataclass(frozen=True)
class Packing:
    """Where the N valid tokens of W right-padded windows of L tokens sit.

    flat (N,) long: index of each valid token in the flattened (W * L) layout, in window
    order; causal (L, L) bool: the causal mask of one window."""

    flat: torch.Tensor
    windows: int
    length: int
    causal: torch.Tensor

    @staticmethod
    def of(valid: torch.Tensor) -> Packing:
        """The packing of the True entries of ``valid`` (W, L)."""
        w, n = valid.shape
        j = torch.arange(n, device=valid.device)
        return Packing(valid.reshape(-1).nonzero().squeeze(1), w, n, j[None, :] <= j[:, None])

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) valid rows of a padded (W, L, ...) tensor."""
        return x.reshape(self.windows * self.length, *x.shape[2:]).index_select(0, self.flat)

    def unpack(self, x: torch.Tensor) -> torch.Tensor:
        """(W, L, ...) with the packed rows x (N, ...) in place and zeros on the padding."""
        out = x.new_zeros(self.windows * self.length, *x.shape[1:])
        return out.index_copy(0, self.flat, x).view(self.windows, self.length, *x.shape[1:])


@dataclass(frozen=True)
class StepWeights:
    """The decoder parameters as plain tensors for :meth:`BiSWTDecoder.step`, read once per
    sampling call: a module attribute look-up costs about as much as a small kernel.

    blocks: per block ``(ln1, qkv, attn_out, ln2, q, cross_out, ln3, ffn_up, ffn_down)``, each
    LayerNorm as ``(normalized_shape, weight, bias, eps)`` and each Linear as ``(weight, bias)``.
    """

    blocks: tuple
    ln_out: tuple
    gelu: str  # GELU approximation ("none" = exact erf)


def _block_step(
    wts: tuple,  # one entry of StepWeights.blocks
    x: torch.Tensor,  # (W, 1, D) one new token per window
    rot: tuple[torch.Tensor, torch.Tensor],  # full-width (cos, sin), each (W, 1, 1, dh)
    bias: torch.Tensor | None,  # (W, 1, 1, start + 1) additive mask or None
    mem_kv: tuple[torch.Tensor, torch.Tensor],  # (W, h, M, dh) each
    ck: torch.Tensor,  # (W, h, cap, dh) cached keys, written in place at slot ``start``
    cv: torch.Tensor,  # (W, h, cap, dh) cached values
    start: int,
    heads: int,
    gelu: str,
) -> torch.Tensor:
    """:meth:`DecoderBlock.forward` (eval mode) for one token per window with a cache: the same
    computation (RoPE via :func:`rotate_full`; a single newest query needs no causal mask),
    written functionally with as few kernel calls as possible."""
    ln1, qkv, attn_out, ln2, q_proj, cross_out, ln3, up, down = wts
    w, _, d = x.shape
    dh = d // heads
    # causal self-attention over the cached window
    a = F.linear(F.layer_norm(x, *ln1), *qkv).view(w, 3, heads, 1, dh).transpose(0, 1)
    qk = rotate_full(a[:2], *rot)  # (2, W, h, 1, dh) rotated queries and keys
    ck[:, :, start:start + 1] = qk[1]
    cv[:, :, start:start + 1] = a[2]
    y = F.scaled_dot_product_attention(qk[0], ck[:, :, :start + 1], cv[:, :, :start + 1],
                                       attn_mask=bias)  # (W, h, 1, dh)
    x = x + F.linear(y.reshape(w, 1, d), *attn_out)
    # cross-attention to the style memory (keys/values precomputed once)
    q = F.linear(F.layer_norm(x, *ln2), *q_proj).view(w, heads, 1, dh)
    y = F.scaled_dot_product_attention(q, *mem_kv)  # (W, h, 1, dh)
    x = x + F.linear(y.reshape(w, 1, d), *cross_out)
    # feed-forward
    hid = F.gelu(F.linear(F.layer_norm(x, *ln3), *up), approximate=gelu)
    return x + F.linear(hid, *down)


def char_positions(deltas: torch.Tensor) -> torch.Tensor:
    """(..., T, 2) pen position after each point relative to the character's first point
    (the running sum of the offsets after the first) from a character's deltas (..., T, 2).

    The first offset is left out because its origin differs between streams (a glyph's own
    origin, or the predecessor's last point). Padding after the last point (zero offsets)
    repeats the last position; it is masked wherever it is read. An RNN integrates the offsets
    in its state; attention over offset tokens has to learn the sum, which costs many steps."""
    return deltas.cumsum(-2) - deltas[..., :1, :]


class GatedContextFusion(nn.Module):
    """Eq. 1: g = sigmoid(f_gate([h_sty; m_ctx])), h = (1 - g) h_sty + g m_ctx."""

    def __init__(self, d: int):
        super().__init__()
        self.f_gate = nn.Linear(2 * d, d)

    def forward(self, h_sty: torch.Tensor, m_ctx: torch.Tensor):
        """(fused (..., D), gate (..., D) in (0, 1))."""
        g = torch.sigmoid(self.f_gate(torch.cat([h_sty, m_ctx], dim=-1)))
        return (1 - g) * h_sty + g * m_ctx, g


class BiSWTDecoder(nn.Module):
    """Token embedding, decoder blocks and the gated context fusion."""

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
        """Per block cross-attention (k, v), each (B, h, M, dh); computed once per memory."""
        mem = {"writer": writer_memory, "glyph": glyph_memory}
        return [blk.cross_attn.memory_kv(mem[blk.memory]) for blk in self.blocks]

    def new_cache(self, windows: int, capacity: int, like: torch.Tensor) -> KVCache:
        shape = (windows, self.heads, capacity, self.dh)
        n = len(self.blocks)
        return KVCache(
            k=[like.new_zeros(shape) for _ in range(n)],
            v=[like.new_zeros(shape) for _ in range(n)],
            valid=torch.zeros(windows, capacity, dtype=torch.bool, device=like.device),
        )

    def forward(
        self,
        x: torch.Tensor,  # (W, n, D) window tokens (or new tokens with a cache)
        positions: torch.Tensor,  # (W, n) long
        token_valid: torch.Tensor,  # (W, n) bool
        mem_kv: list,  # per block (k, v), each (W, h, M, dh)
        m_ctx: torch.Tensor | None,  # (W, n, D) context memory of each token's character
        cache: KVCache | None = None,
        packed: bool = True,
    ):
        """(h (W, n, D), gate (W, n, D) or None). With a cache, appends the n new tokens.

        Without a cache (teacher forcing) and with ``packed`` the blocks run on the valid
        tokens only (:meth:`DecoderBlock.forward_packed`; outputs on padding are zeros);
        ``packed=False`` is the plain padded computation, kept as the reference."""
        if cache is None and packed:
            return self._forward_packed(x, positions, token_valid, mem_kv, m_ctx)
        start = 0
        key_valid = token_valid
        if cache is not None:
            start = cache.length
            if start + x.shape[1] > cache.capacity:
                raise ValueError("KV cache capacity exceeded")
            cache.valid[:, start:start + x.shape[1]] = token_valid
            key_valid = cache.valid
        rot = self.rope.angles(positions)  # shared by all blocks
        for i, blk in enumerate(self.blocks):
            layer_cache = (cache.k[i], cache.v[i]) if cache is not None else None
            x = blk(x, rot, key_valid, mem_kv[i], layer_cache, start)
        if cache is not None:
            cache.length = start + x.shape[1]
            pad = ~cache.valid[:, :cache.length]  # (W, length)
            cache.step_bias = None
            if bool(pad.any()):
                cache.step_bias = cache.valid.new_zeros(cache.valid.shape, dtype=x.dtype)
                cache.step_bias[:, :cache.length].masked_fill_(pad, float("-inf"))
                cache.step_bias = cache.step_bias[:, None, None]  # (W, 1, 1, cap)
        h_sty = self.ln_out(x)
        if self.fusion is None:
            return h_sty, None
        return self.fusion(h_sty, m_ctx)

    def _forward_packed(self, x, positions, token_valid, mem_kv, m_ctx):
        """:meth:`forward` without a cache, the padding skipped by every token-wise layer."""
        pack = Packing.of(token_valid)
        rot = self.rope.angles(positions)  # (cos, sin) (W, 1, L, dh/2), shared by all blocks
        xp = pack.pack(x)  # (N, D)
        for blk, kv in zip(self.blocks, mem_kv):
            xp = blk.forward_packed(xp, pack, rot, token_valid, kv)
        h = self.ln_out(xp)  # (N, D)
        gate = None
        if self.fusion is not None:
            h, gate = self.fusion(h, pack.pack(m_ctx))
            gate = pack.unpack(gate)
        return pack.unpack(h), gate

    def step_weights(self) -> StepWeights:
        """Plain-tensor parameters for :meth:`step` (take them again after changing weights)."""

        def ln(m: nn.LayerNorm) -> tuple:
            return (m.normalized_shape, m.weight, m.bias, m.eps)

        def lin(m: nn.Linear) -> tuple:
            return (m.weight, m.bias)

        blocks = tuple(
            (ln(b.ln1), lin(b.self_attn.qkv), lin(b.self_attn.out), ln(b.ln2),
             lin(b.cross_attn.q), lin(b.cross_attn.out), ln(b.ln3), lin(b.ffn[0]), lin(b.ffn[3]))
            for b in self.blocks
        )
        return StepWeights(blocks, ln(self.ln_out), self.blocks[0].ffn[1].approximate)

    def step(
        self,
        x: torch.Tensor,  # (W, 1, D) the newest token of every window
        rot: tuple[torch.Tensor, torch.Tensor],  # (cos, sin) (W, 1, 1, dh) from step_tables
        mem_kv: list,  # per block (k, v), each (W, h, M, dh)
        m_ctx: torch.Tensor | None,  # (W, 1, D)
        cache: KVCache,
        weights: StepWeights,  # from step_weights()
    ):
        """Append one token to every cached window: inference only (no dropout), equal to
        :meth:`forward` with the cache and n = 1 up to float rounding, at a fraction of its
        per-call overhead. Returns (h (W, 1, D), gate (W, 1, D) or None)."""
        start = cache.length
        if start >= cache.capacity:
            raise ValueError("KV cache capacity exceeded")
        cache.valid[:, start] = True
        bias = None if cache.step_bias is None else cache.step_bias[..., :start + 1]
        for wts, ck, cv, kv in zip(weights.blocks, cache.k, cache.v, mem_kv):
            x = _block_step(wts, x, rot, bias, kv, ck, cv, start, self.heads, weights.gelu)
        cache.length = start + 1
        h_sty = F.layer_norm(x, *weights.ln_out)
        if self.fusion is None:
            return h_sty, None
        return self.fusion(h_sty, m_ctx)
