"""Fully autoregressive sampling, character by character, with a key/value cache.

For each character position ``s`` (all sentences of the batch in lockstep; sentences shorter
than ``s`` are inactive), the decoder window is ``[e~_{s-1}, y_{s-1}, e~_s]`` where ``y_{s-1}`` is
the model's OWN output for the previous character (only ``[e~_s]`` for ``s = 0`` or with
``bi_swt`` off). With the cache, this prefix is encoded once per character, then every new
point costs one decoder step (self-attention keys/values cached per block; cross-attention
keys/values of the style memories computed once per call). Without the cache (reference
mode, ``use_cache=False``) the whole window is re-run for every point.

A character ends at the first point whose pen state is CURSIVE_EOC or EOC, or after
``max_char_points`` points (then its last point is labelled EOC and the character is counted in
``truncated``). Spaces are characters like any other (their pseudo-trajectories are generated).

Point choice: greedy = mean of the most probable component and the most probable pen state;
stochastic = component ~ softmax(log_pi * (1 + bias) / temperature), point ~ N(mu, Sigma) with
sigma scaled by ``exp(-bias) * sqrt(temperature)`` (rho kept), pen ~ softmax(logits /
temperature); the two categorical draws use the Gumbel-max trick (``argmax(logits + g)``,
``g = -log(-log(u))``: exact, and a few cheap kernels instead of two ``multinomial`` calls per
step). Random draws come from one seeded ``torch.Generator`` and are made for every row at every
step, so cached and uncached runs consume identical random numbers.

``min_char_points`` (default 1) forbids the end-of-character states before a character has that
many points; ``min_char_points == max_char_points`` gives every character exactly that many
points, which the benchmark uses so that cached and uncached runs do identical, realistic work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F

from cashg.ink import InkSentence, make_sentence
from cashg.model.cashg_model import CASHG
from cashg.model.gmm_head import N_PEN, RHO_LIMIT, GMMHead

CURSIVE_EOC, EOC = 2, 3
NO_END = (0.0, 0.0, -math.inf, -math.inf)  # pen-logit bias forbidding CURSIVE_EOC and EOC


@dataclass(frozen=True)
class SamplingOptions:
    greedy: bool = False
    temperature: float = 1.0
    bias: float = 0.0
    max_char_points: int = 100  # the English per-character point cap of preprocessing
    seed: int = 0
    use_cache: bool = True
    # end-of-character states are impossible before this many points (their probability is
    # set to 0); min = max forces a fixed number of points per character (benchmarks)
    min_char_points: int = 1


@dataclass
class SampleResult:
    """Per sentence: deltas (N_b, 2), pen (N_b,), char_index (N_b,) numpy; truncated chars."""

    deltas: list[np.ndarray]
    pen: list[np.ndarray]
    char_index: list[np.ndarray]
    truncated: int

    def absolute(self, i: int) -> np.ndarray:
        """(N_i, 2) absolute coordinates of sentence i (cumulative sum from the origin)."""
        return np.cumsum(self.deltas[i].astype(np.float64), axis=0)


def chosen_component(raw: torch.Tensor, k: torch.Tensor, head: GMMHead):
    """(mu (W, 2), sigma (W, 2), rho (W,)) of component ``k`` (W, 1) of each row, from raw head
    outputs (W, 4 + 6K) in the layout of :func:`~cashg.model.gmm_head.mixture_from_raw` and with
    its transforms, applied to the chosen component only (a step needs no more)."""
    w = raw.shape[0]
    comp = raw[:, N_PEN:].view(w, 6, head.n_mixtures).gather(2, k[:, None].expand(w, 6, 1))
    comp = comp[..., 0]  # (W, 6): pi, mu_x, mu_y, sigma_x, sigma_y, rho (raw)
    sigma = F.softplus(comp[:, 3:5]) + head.sigma_eps
    rho = torch.tanh(comp[:, 5]).clamp(-RHO_LIMIT, RHO_LIMIT)
    return comp[:, 1:3], sigma, rho


def choose_points(raw: torch.Tensor, head: GMMHead, opts: SamplingOptions,
                  gen: torch.Generator | None, pen_bias: torch.Tensor | None = None):
    """(deltas (W, 2), pen (W,)) from raw head outputs (W, 4 + 6K). ``pen_bias`` (4,) is added
    to the pen logits (``NO_END`` gives the end-of-character states probability 0).

    The mixture weights are used as logits (``softmax(log_pi * c) == softmax(pi_logits * c)``);
    categorical draws by Gumbel-max; only the chosen component is transformed."""
    n_mix = head.n_mixtures
    pen_logits = raw[:, :N_PEN]
    if pen_bias is not None:
        pen_logits = pen_logits + pen_bias
    pi_logits = raw[:, N_PEN:N_PEN + n_mix]  # (W, K)
    if opts.greedy:
        k = pi_logits.argmax(-1, keepdim=True)  # (W, 1)
        mu = raw[:, N_PEN + n_mix:].view(-1, 5, n_mix)[:, :2].gather(
            2, k[:, None].expand(-1, 2, 1))[..., 0]  # (W, 2) mean of the most probable component
        return mu, pen_logits.argmax(-1)
    u = torch.rand(raw.shape[0], n_mix + N_PEN, generator=gen, device=raw.device,
                   dtype=raw.dtype)  # (W, K + 4)
    gumbel = u.log_().neg_().log_().neg_()  # Gumbel-max: argmax(logits + g) ~ softmax(logits)
    sharp = (1 + opts.bias) / opts.temperature
    k = ((pi_logits * sharp if sharp != 1.0 else pi_logits) + gumbel[:, :n_mix]).argmax(
        -1, keepdim=True)  # (W, 1)
    pen_t = pen_logits / opts.temperature if opts.temperature != 1.0 else pen_logits
    pen = (pen_t + gumbel[:, n_mix:]).argmax(-1)  # (W,)
    mu, sig, rho = chosen_component(raw, k, head)
    scale = math.exp(-opts.bias) * math.sqrt(opts.temperature)
    if scale != 1.0:
        sig = sig * scale
    z = torch.randn(raw.shape[0], 2, generator=gen, device=raw.device, dtype=raw.dtype)
    z0 = z[:, 0]
    corr = torch.addcmul(rho * z0, torch.sqrt(1 - rho * rho), z[:, 1])  # rho z0 + sqrt(1-rho^2) z1
    return torch.addcmul(mu, sig, torch.stack([z0, corr], -1)), pen  # mu + sigma * (z0, corr)


def _window(model, e_prev, prev_tok, prev_len, e_cur, cur_tok, n_cur, has_prev):
    """Pack ``[e_prev, prev points, e_cur, current points[:n_cur]]`` per row (right padded).

    e_prev/e_cur (B, D); prev_tok (B, Tp, D); prev_len (B,); cur_tok (B, Tc, D) already
    carrying the current-character segment embedding (as the cached steps feed them).
    Returns tokens (B, L, D), positions (B, L), valid (B, L), index of e_cur (B,).
    """
    b, d = e_cur.shape
    dev = e_cur.device
    tp = prev_tok.shape[1]
    n_prev = torch.where(has_prev, 1 + prev_len, 0)  # (B,)
    length = n_prev + 1 + n_cur
    big_l = int(length.max())
    seg = model.decoder.segment.weight  # (2, D)
    bank = torch.cat([(e_prev + seg[0])[:, None], prev_tok + seg[0], (e_cur + seg[1])[:, None],
                      cur_tok[:, :n_cur], e_cur.new_zeros(b, 1, d)], dim=1)
    j = torch.arange(big_l, device=dev)[None]
    idx = torch.where(j < n_prev[:, None], j, 1 + tp + (j - n_prev[:, None]))
    idx = torch.where(j < length[:, None], idx, bank.shape[1] - 1)
    tokens = torch.gather(bank, 1, idx[..., None].expand(-1, -1, d))
    return tokens, j.expand(b, -1), j < length[:, None], n_prev


def _check(opts: SamplingOptions) -> None:
    if opts.max_char_points < 1:
        raise ValueError(f"max_char_points must be >= 1, got {opts.max_char_points}")
    if not 1 <= opts.min_char_points <= opts.max_char_points:
        raise ValueError(f"min_char_points must be in [1, max_char_points="
                         f"{opts.max_char_points}], got {opts.min_char_points}")
    if not opts.greedy and opts.temperature <= 0:
        raise ValueError("temperature must be > 0 for stochastic sampling (use greedy)")


@torch.inference_mode()
def sample(
    model: CASHG,
    codepoints: torch.Tensor,  # (B, S) long, valid characters first
    char_mask: torch.Tensor,  # (B, S) bool
    style_images: torch.Tensor,  # (B, R, H, W)
    opts: SamplingOptions = SamplingOptions(),
) -> SampleResult:
    """Generate every sentence of the batch; see the module docstring. The model runs in eval
    mode (its previous mode is restored afterwards)."""
    _check(opts)
    was_training = model.training
    model.eval()
    try:
        return _sample(model, codepoints, char_mask, style_images, opts)
    finally:
        model.train(was_training)


def _sample(model: CASHG, codepoints, char_mask, style_images, opts) -> SampleResult:
    dev = codepoints.device
    dec = model.decoder
    gen = torch.Generator(device=dev).manual_seed(opts.seed)
    b, s_max = codepoints.shape
    style = model.style(style_images)
    identity, ctx = model.text(codepoints, char_mask)  # (B, S, D) each
    mem_kv = dec.memory_kv(style.writer_memory, style.glyph_memory)  # once per call
    d = identity.shape[-1]
    n_chars = char_mask.sum(1)
    rows = torch.arange(b, device=dev)
    m = opts.max_char_points
    seg_cur = dec.segment.weight[1]  # (D,)
    track_pos = dec.point_pos is not None  # in-character positions are embedded
    no_end = identity.new_tensor(NO_END)  # (4,)
    head_proj = partial(F.linear, weight=model.head.proj.weight, bias=model.head.proj.bias)
    cache = steps = None
    if opts.use_cache:  # allocated once: the longest window is 1 + m + 1 + (m - 1) tokens
        cache = dec.new_cache(b, (1 + m if model.cfg.bi_swt else 0) + m, identity)
        cos_tab, sin_tab = dec.rope.step_tables(cache.capacity)  # (cap, dh) each
        weights = dec.step_weights()
        steps = torch.arange(1, m, device=dev)  # (m - 1,) step t sits at position n_prev + t
    prev_d = identity.new_zeros(b, 1, 2)
    prev_pen = torch.zeros(b, 1, dtype=torch.long, device=dev)
    prev_len = torch.zeros(b, dtype=torch.long, device=dev)
    per_char = []  # (cur_d (B, T, 2), cur_pen (B, T), n_gen (B,)) on the CPU
    truncated = 0
    for s in range(s_max):
        active = s < n_chars  # (B,)
        has_prev = torch.full((b,), bool(model.cfg.bi_swt and s > 0), device=dev)
        e_prev = identity[:, max(s - 1, 0)]
        e_cur = identity[:, s]
        prev_tok = dec.embed_chars(prev_d, prev_pen)  # (B, Tp, D)
        cur_add = seg_cur  # (D,) or (B, D): added to every generated token of this character
        if model.cfg.identity_every_token:
            prev_tok = prev_tok + e_prev[:, None]
            cur_add = seg_cur + e_cur
        m_ctx = ctx[:, s][:, None]  # (B, 1, D)
        cur_d = identity.new_zeros(b, m, 2)
        cur_pen = torch.zeros(b, m, dtype=torch.long, device=dev)
        cur_tok = identity.new_zeros(b, m, d)
        cur_pos = identity.new_zeros(b, 2) if track_pos else None  # relative to the 1st point
        done = ~active
        if opts.use_cache:  # the prefix [e_prev, y_prev, e_cur] once, then one step per point
            tokens, pos, valid, n_prev = _window(model, e_prev, prev_tok, prev_len, e_cur,
                                                 cur_tok, 0, has_prev)
            cache.length = 0
            h, _ = dec(tokens, pos, valid, mem_kv, m_ctx.expand(-1, tokens.shape[1], -1), cache)
            h_last = h[rows, n_prev]
            step_pos = (n_prev[:, None] + steps).T  # (m - 1, B)
            rot_cos = cos_tab[step_pos][:, :, None, None]  # (m - 1, B, 1, 1, dh)
            rot_sin = sin_tab[step_pos][:, :, None, None]
        for t in range(m):
            if opts.use_cache and t > 0:
                h, _ = dec.step(cur_tok[:, t - 1:t], (rot_cos[t - 1], rot_sin[t - 1]), mem_kv,
                                m_ctx, cache, weights)
                h_last = h[:, 0]
            elif not opts.use_cache:
                tokens, pos, valid, n_prev = _window(model, e_prev, prev_tok, prev_len, e_cur,
                                                     cur_tok, t, has_prev)
                h, _ = dec(tokens, pos, valid, mem_kv, m_ctx.expand(-1, tokens.shape[1], -1))
                h_last = h[rows, n_prev + t]
            delta, pen = choose_points(head_proj(h_last), model.head, opts, gen,
                                       None if t + 1 >= opts.min_char_points else no_end)
            if t == m - 1:
                truncated += int((~done & (pen < CURSIVE_EOC)).sum())
                pen = torch.where(pen < CURSIVE_EOC, EOC, pen)
            # every row is written (rows already done write points past their end, never read)
            cur_d[:, t] = delta
            cur_pen[:, t] = pen
            if track_pos and t > 0:
                cur_pos = cur_pos + delta
            cur_tok[:, t] = dec.embed_points(delta, pen, cur_pos) + cur_add
            done = done | (pen >= CURSIVE_EOC)
            if bool(done.all()):
                break
        ends = cur_pen[:, :t + 1] >= CURSIVE_EOC  # (B, T) every active row has an end
        n_gen = torch.where(active, ends.to(torch.uint8).argmax(1) + 1, 0)  # first end + 1
        per_char.append((cur_d[:, :t + 1].cpu(), cur_pen[:, :t + 1].cpu(), n_gen.cpu()))
        t_prev = max(1, int(n_gen.max()))
        # the predecessor of the next character; zeros after each row's end (what a row wrote
        # after its end is masked anyway, zeros keep it harmless)
        keep = torch.arange(t_prev, device=dev) < n_gen[:, None]  # (B, Tp)
        prev_d = torch.where(keep[..., None], cur_d[:, :t_prev], 0.0)
        prev_pen = torch.where(keep, cur_pen[:, :t_prev], 0)
        prev_len = n_gen
    return _collect(per_char, b, truncated)


def _collect(per_char: list, b: int, truncated: int) -> SampleResult:
    """Concatenate the per-character outputs of each sentence."""
    out_d, out_pen, out_ci = [], [], []
    for i in range(b):
        parts = [(c_d[i, :n[i]], c_pen[i, :n[i]], s) for s, (c_d, c_pen, n) in enumerate(per_char)
                 if n[i] > 0]
        out_d.append(np.concatenate([p[0].numpy() for p in parts]) if parts
                     else np.zeros((0, 2), np.float32))
        out_pen.append(np.concatenate([p[1].numpy() for p in parts]) if parts
                       else np.zeros(0, np.int64))
        out_ci.append(np.concatenate([np.full(len(p[1]), p[2], np.int32) for p in parts])
                      if parts else np.zeros(0, np.int32))
    return SampleResult(out_d, out_pen, out_ci, truncated)


def encode_texts(texts: list[str], device: torch.device | str = "cpu"):
    """(codepoints (B, S) long, char_mask (B, S) bool) for a list of texts."""
    s = max(1, max((len(t) for t in texts), default=1))
    cps = torch.zeros(len(texts), s, dtype=torch.long)
    mask = torch.zeros(len(texts), s, dtype=torch.bool)
    for i, t in enumerate(texts):
        cps[i, : len(t)] = torch.tensor([ord(c) for c in t], dtype=torch.long)
        mask[i, : len(t)] = True
    return cps.to(device), mask.to(device)


def generate_sentences(
    model: CASHG,
    texts: list[str],
    style_images: torch.Tensor,  # (B, R, H, W) or (R, H, W) shared by all texts
    opts: SamplingOptions = SamplingOptions(),
    writer_id: str = "",
    id_prefix: str = "gen",
) -> list[InkSentence]:
    """Sample the texts and return :class:`~cashg.ink.InkSentence` (absolute coordinates)."""
    dev = next(model.parameters()).device
    cps, mask = encode_texts(texts, dev)
    if style_images.dim() == 3:
        style_images = style_images[None].expand(len(texts), -1, -1, -1)
    res = sample(model, cps, mask, style_images.to(dev), opts)
    return [
        make_sentence(f"{id_prefix}-{i:05d}", writer_id, text, res.absolute(i), res.pen[i],
                      res.char_index[i])
        for i, text in enumerate(texts)
    ]
