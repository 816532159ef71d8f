"""Fully autoregressive sampling, character by character, with a key/value cache.

Every sentence (row) of the batch advances on its own: it keeps its own character position
``s`` and its own point counter, and the moment it ends a character it moves on to its next one
at the next step, without waiting for the other rows. Each step generates one point for every
row still writing. The decoder window of row ``b`` at character ``s`` is
``[e~_{s-1}, y_{s-1}, e~_s, y_s(points so far)]`` where ``y_{s-1}`` is the row's OWN output
for its previous character (only ``[e~_s, ...]`` for ``s = 0`` or with ``bi_swt`` off; paper
Sec. 3.2), with exactly the tokens of teacher forcing (:meth:`CASHG.assemble_windows`: segment
embeddings, and with ``identity_every_token`` each trajectory token's character identity, with
``point_position`` / ``char_extent`` / ``line_position`` its
:class:`~cashg.model.decoder.PointContext`).

With the cache (default), every step is one call of :meth:`BiSWTDecoder.step` for all rows: a
row continuing its character appends its newest point token to its own cache row (own length,
own RoPE position); a row that has just ended a character restarts its cache row from its new
context ``[e~_{s-1}, y_{s-1}]`` (encoded in the same call, for the restarting rows only) and
appends ``e~_s``. The style references are encoded once per call and once per distinct set
(sentences of one writer share them), and so are the cross-attention keys/values.
Rows that have finished their last character are dropped from the step whenever they make up a
quarter of it. Without the cache (reference mode, ``use_cache=False``) every step re-runs the
whole window of every row, built by the model's own window builder
(:meth:`CASHG.assemble_windows`), through :meth:`BiSWTDecoder.forward`; the two modes give the
same points (up to float rounding).

The options (:class:`~cashg.core.config.generate.SamplingOptions`) are defined once, in the
contracts layer: the ``generate`` params section extends them, ``cashg generate`` derives its
flags from them (:mod:`cashg.generation.options`).

A character ends at the first point whose pen state is CURSIVE_EOC or EOC, or after
``max_char_points`` points (then its last point is labelled EOC and the character is counted in
``truncated``), so an undertrained model that never ends a character costs its rows
``max_char_points`` steps per character and nothing more. Spaces are characters like any other
(their pseudo-trajectories are generated). Sampling ends when every row has finished its last
character.

``space_mode`` (stochastic decoding only): the points of a whitespace character are the mean of
its most probable component (its pen states are still drawn). A space's second point is the
word gap; sampled, its lower tail writes words together (the demo model at temperature 0.8:
4 % of gaps under 0.05 line heights against 0.5 % in the ground truth, docs/results-log.md).
The random draws are made as without it, so the other characters' stream is unchanged.
Whatever the options, a space's points after its first get dy = 0: the pseudo-points of a
space lie at one height by construction (cashg.core.pen_states), and a model trained with
``train.space_gap_x_only`` has learned only the x offset (the gap) there. A model with
``model.relative_gap`` draws that x offset in units of the sentence's writer gap (the
population's where unknown), and it is multiplied back before the decoder reads it
(:class:`cashg.model.relative_gap.RelativeGapUnit`).

Point choice: greedy = mean of the most probable component and the most probable pen state;
stochastic = component ~ softmax(log_pi * (1 + bias) / temperature), point ~ N(mu, Sigma) with
sigma scaled by ``exp(-bias) * sqrt(temperature)`` (rho kept), pen ~ softmax(logits /
temperature); the two categorical draws use the Gumbel-max trick (``argmax(logits + g)``,
``g = -log(-log(u))``: exact, and a few cheap kernels instead of two ``multinomial`` calls per
step). Random draws come from one seeded ``torch.Generator`` and are made for every row of the
batch at every step (finished rows included), so a given seed and batch composition give the
same points, cached or not.

``check = K`` (writing that checks itself, :mod:`cashg.generation.check`): every sentence is
written by K rows side by side, which share one line state at the start of each character and
draw it independently; a row that ends the character waits until the K have ended, the
benchmark's glyph reader ranks the K drawings, and every row of the sentence goes on from the
kept one (its point tokens, count, height in the line and last pen state). A candidate still
drawing at twice the points of the longest one that ended by itself (and 16 more) is given up
as the cap would end it: a run-on is ranked last anyway, and waiting for it to reach the cap
would cost its sentence up to ``max_char_points`` steps per character. Only kept points
are returned and passed to ``on_step`` (at the moment their character is chosen). With K = 1
the one row is kept at once, and the points are those of the unchecked sampler, bit for bit.

``min_char_points`` (default 1) forbids the end-of-character states before a character has that
many points; ``min_char_points == max_char_points`` gives every character exactly that many
points, which the benchmark uses so that cached and uncached runs do identical, realistic work.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F

from cashg.core.config.generate import SamplingOptions
from cashg.core.ink import GlyphInk, InkSentence, make_sentence
from cashg.generation.check import CharacterCheck, CheckError
from cashg.model.cashg_model import CASHG
from cashg.model.decoder import PointContext, count_feature
from cashg.model.decoder_step import Restart
from cashg.model.gmm_head import N_PEN, RHO_LIMIT, GMMHead
from cashg.model.relative_gap import whitespace

PU, CURSIVE_EOC, EOC = 1, 2, 3
NO_END = (0.0, 0.0, -math.inf, -math.inf)  # pen-logit bias forbidding CURSIVE_EOC and EOC
COMPACT_BELOW = 0.75  # drop finished rows from the step once fewer than this share is live
# check: a candidate still drawing at this many times the points of the longest candidate of
# its character that ended by itself, plus the margin, is given up (_Rows._give_up)
GIVE_UP_FACTOR, GIVE_UP_MARGIN = 2, 16
DEFAULTS = SamplingOptions()  # the default sampling options (frozen)
GREEDY = SamplingOptions(greedy=True)


@dataclass
class SampleResult:
    """Per sentence: deltas (N_b, 2), pen (N_b,), char_index (N_b,) numpy; truncated chars;
    steps: decoder steps of the call (one point for every unfinished row per step)."""

    deltas: list[np.ndarray]
    pen: list[np.ndarray]
    char_index: list[np.ndarray]
    truncated: int
    steps: int = 0
    checked: int = 0  # characters whose candidates the glyph reader ranked (check > 1)

    def absolute(self, i: int) -> np.ndarray:
        """(N_i, 2) absolute coordinates of sentence i (cumulative sum from the origin)."""
        return np.cumsum(self.deltas[i].astype(np.float64), axis=0)


@dataclass(frozen=True)
class Step:
    """The points chosen at one sampling step, over the W rows in the step (tensors; read, do
    not change): ``ids`` (W,) sentence of each row, ``char`` (W,) its character index,
    ``deltas`` (W, 2) offsets from its previous point, ``pen`` (W,) final pen states, ``live``
    (W,) bool: the row was still writing (finished rows' points are not part of any sentence)."""

    ids: torch.Tensor
    char: torch.Tensor
    deltas: torch.Tensor
    pen: torch.Tensor
    live: torch.Tensor


StepCallback = Callable[[Step], None]


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


def draw_noise(gen: torch.Generator, rows: int, n_mixtures: int, like: torch.Tensor):
    """The random numbers of one stochastic step for ``rows`` rows: uniforms (rows, K + 4) for
    the Gumbel-max draws of the component and the pen state, standard normals (rows, 2)."""
    u = torch.rand(rows, n_mixtures + N_PEN, generator=gen, device=like.device, dtype=like.dtype)
    z = torch.randn(rows, 2, generator=gen, device=like.device, dtype=like.dtype)
    return u, z


def choose_points(raw: torch.Tensor, head: GMMHead, opts: SamplingOptions,
                  noise: tuple[torch.Tensor, torch.Tensor] | None,
                  pen_bias: torch.Tensor | None = None):
    """(deltas (W, 2), pen (W,)) from raw head outputs (W, 4 + 6K). ``noise``: the
    :func:`draw_noise` of the W rows (unused, may be None, when greedy). ``pen_bias`` (4,) or
    (W, 4) is added to the pen logits (``NO_END`` gives the end-of-character states
    probability 0).

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
    if noise is None:
        raise ValueError("stochastic sampling needs the noise of draw_noise")
    u, z = noise
    gumbel = u.log().neg_().log_().neg_()  # Gumbel-max: argmax(logits + g) ~ softmax(logits)
    sharp = (1 + opts.bias) / opts.temperature
    k = ((pi_logits * sharp if sharp != 1.0 else pi_logits) + gumbel[:, :n_mix]).argmax(
        -1, keepdim=True)  # (W, 1)
    pen_t = pen_logits / opts.temperature if opts.temperature != 1.0 else pen_logits
    pen = (pen_t + gumbel[:, n_mix:]).argmax(-1)  # (W,)
    mu, sig, rho = chosen_component(raw, k, head)
    scale = math.exp(-opts.bias) * math.sqrt(opts.temperature)
    if scale != 1.0:
        sig = sig * scale
    z0 = z[:, 0]
    corr = torch.addcmul(rho * z0, torch.sqrt(1 - rho * rho), z[:, 1])  # rho z0 + sqrt(1-rho^2) z1
    return torch.addcmul(mu, sig, torch.stack([z0, corr], -1)), pen  # mu + sigma * (z0, corr)


def _check(opts: SamplingOptions) -> None:
    if opts.max_char_points < 1:
        raise ValueError(f"max_char_points must be >= 1, got {opts.max_char_points}")
    if not 1 <= opts.min_char_points <= opts.max_char_points:
        raise ValueError(f"min_char_points must be in [1, max_char_points="
                         f"{opts.max_char_points}], got {opts.min_char_points}")
    if not opts.greedy and opts.temperature <= 0:
        raise ValueError("temperature must be > 0 for stochastic sampling (use greedy)")
    if opts.check < 0:
        raise ValueError(f"check must be >= 0 (0 = off), got {opts.check}")


@torch.inference_mode()
def sample(
    model: CASHG,
    codepoints: torch.Tensor,  # (B, S) long, valid characters first
    char_mask: torch.Tensor,  # (B, S) bool
    style_images: torch.Tensor,  # (B, R, H, W)
    opts: SamplingOptions = DEFAULTS,
    on_step: StepCallback | None = None,
    writer_word_gap: torch.Tensor | None = None,  # (B,) float, NaN = unknown (model.reads_writer_word_gap)
    check: CharacterCheck | None = None,
) -> SampleResult:
    """Generate every sentence of the batch; see the module docstring. The model runs in eval
    mode (its previous mode is restored afterwards). ``on_step``: called with each step's
    :class:`Step` (module docstring). ``writer_word_gap``: each sentence's writer word gap, read
    by a model with ``model.relative_gap`` (None: every writer at the
    population's gap). ``check``: the glyph reader that ranks ``opts.check`` candidates
    per character (:class:`~cashg.generation.check.CheckError` when the option asks for one
    and there is none)."""
    _check(opts)
    if not opts.check:
        check = None
    elif check is None:
        raise CheckError(f"check {opts.check} asks for a glyph reader, and none was given (the "
                         "benchmark's recognizer stage trains one), or use check 0")
    elif check.k != opts.check:
        raise ValueError(f"check: the options ask for {opts.check} candidates, the check "
                         f"holds {check.k}")
    was_training = model.training
    model.eval()
    try:
        return _sample(model, codepoints, char_mask, style_images, opts, on_step, writer_word_gap,
                       check)
    finally:
        model.train(was_training)


class _Rows:
    """Sampling state of the W rows in the step: the B sentences of the call, minus the
    finished ones once they have been dropped (:meth:`_select`).

    Row ``i`` writes sentence ``ids[i]``; it is at character ``char[i]`` with ``t[i]`` points of
    it so far, and its newest token is ``x[i]`` (``e~_s`` right after a character change). Point
    tokens are kept without segment and identity (``cur_p``: the current character, ``prev_p``:
    the previous one) because a character's points enter its own window with the current
    segment and its successor's window with the predecessor segment. ``ids``, ``char`` and
    ``live`` are replaced, never changed in place: the records of earlier steps hold them.
    """

    def __init__(self, model: CASHG, codepoints: torch.Tensor, char_mask: torch.Tensor,
                 style_images: torch.Tensor, opts: SamplingOptions,
                 writer_word_gap: torch.Tensor | None = None, check: CharacterCheck | None = None):
        dec = model.decoder
        self.dec, self.bi_swt = dec, model.cfg.bi_swt
        self.windows = model.assemble_windows  # the window builder of teacher forcing
        self.every_token = model.cfg.identity_every_token
        b = codepoints.shape[0]
        dev = codepoints.device
        m = opts.max_char_points
        # sentences with the same style references (one writer) share one style encoding
        refs, mem_row = torch.unique(style_images.flatten(1), dim=0, return_inverse=True)
        style = model.style(refs.reshape(-1, *style_images.shape[1:]))  # U styles
        self.identity, self.ctx = model.text(codepoints, char_mask)  # (B, S, D) each
        self.char_mask = char_mask
        mem_kv = dec.memory_kv(style.writer_memory, style.glyph_memory)  # (U, h, M, dh)
        # (B,) each sentence's gap unit (model.relative_gap: its writer's gap), or None
        self.unit = (model.gap_unit.units(writer_word_gap, b) if model.gap_unit is not None
                     else None)
        if opts.use_cache:
            self.memory = dec.step_memory(
                mem_kv, mem_row, (self.ctx, char_mask, torch.arange(b, device=dev)))
        else:  # the reference mode: one memory row per sentence
            self.mem_kv = [(k[mem_row], v[mem_row]) for k, v in mem_kv]
        d = self.identity.shape[-1]
        self.seg_prev, self.seg_cur = dec.segment.weight  # (D,) each
        self.rows = torch.arange(b, device=dev)  # (W,)
        self.ids = self.rows  # (W,) sentence of each row
        self.n_chars = char_mask.sum(1)  # (W,)
        self.live = self.n_chars > 0  # (W,) still writing
        self.any_done = not bool(self.live.all())
        self.char = torch.zeros(b, dtype=torch.long, device=dev)  # (W,) character s
        self.t = torch.zeros(b, dtype=torch.long, device=dev)  # (W,) points of s so far
        self.e_cur = self.identity[:, 0].clone()  # (W, D) identity e~_s
        self.e_prev = torch.zeros_like(self.e_cur)  # (W, D) identity e~_{s-1}
        self.m_ctx = self.ctx[:, 0].clone()  # (W, D) context memory of character s
        self.x = self.e_cur + self.seg_cur  # (W, D) newest token of each row
        self.cur_p = self.identity.new_zeros(b, m, d)  # (W, m, D) point tokens of s
        self.prev_p = torch.zeros_like(self.cur_p)  # (W, m, D) point tokens of s - 1
        self.prev_len = torch.zeros_like(self.t)  # (W,) points of s - 1
        # (W, 2) pen position relative to character s's first point (char_positions), the
        # box of s's positions so far (lo, hi: (W, 2) each; char_extents) and the pen's height
        # in the line's frame (W, 1) (line_heights): the PointContext of the newest point
        self.pos = self.identity.new_zeros(b, 2)
        self.lo, self.hi = torch.zeros_like(self.pos), torch.zeros_like(self.pos)
        self.line = self.identity.new_zeros(b, 1)
        self.stroke = torch.zeros_like(self.t)  # (W,) the stroke the next point of s is in
        self.restart: Restart | None = None  # restarting rows of the next cached step
        self.cache = self.weights = None
        if opts.use_cache:  # the longest window is 1 + m + 1 + (m - 1) tokens
            self.cache = dec.new_cache(b, (1 + m if self.bi_swt else 0) + m, self.identity)
            self.weights = dec.step_weights()
        self.check = check
        self.any_waiting = False
        if check is not None:  # rows k * K .. k * K + K - 1 draw sentence k's candidates
            self.codepoints = codepoints
            self.read = check.checked(codepoints)  # (W, S) the characters the reader ranks
            self.waiting = torch.zeros_like(self.live)  # (W,) ended, its group still drawing
            self.cand_delta = self.pos.new_zeros(b, m, 2)  # (W, m, 2) the candidate's points
            self.cand_pen = torch.zeros(b, m, dtype=torch.long, device=dev)  # (W, m)
            self.cand_forced = torch.zeros(b, m, dtype=torch.bool, device=dev)  # (W, m)
            self.start = self.pos.new_zeros(b, 2)  # (W, 2) where the character began
            self.kept: list[tuple] = []  # per resolution: the kept points (see _resolve)
            self.n_checked = 0

    def hidden(self) -> torch.Tensor:
        """(W, D) decoder output at each row's newest token (it predicts the row's next point);
        rows that have finished compute something that is never read."""
        if self.cache is None:
            return self._hidden_uncached()
        if self.any_waiting:  # finished and waiting rows idle at slot 0 (a waiting row's cache
            self.cache.length.masked_fill_(~self.live | self.waiting, 0)  # restarts anyway)
        elif self.any_done:  # finished rows idle at slot 0 (their cache row is never read)
            self.cache.length.masked_fill_(~self.live, 0)
        h, _ = self.dec.step(self.x, self.memory, self.m_ctx, self.cache, self.weights,
                             self.restart)
        self.restart = None
        return h

    def _hidden_uncached(self) -> torch.Tensor:
        """Reference mode: the whole window ``[e~_{s-1}, y_{s-1}, e~_s, y_s[:t]]`` of every row,
        built by the model's own window builder (:meth:`CASHG.assemble_windows`, as in teacher
        forcing) and run through :meth:`BiSWTDecoder.forward`.

        Each row is a two-character "sentence": [previous, current] with its window on the
        current one (slot 1), or [current] alone (slot 0) at its first character. The current
        character gets ``t + 1`` points, its points so far and one slot that the builder
        leaves out (in teacher forcing, the last point predicts nothing)."""
        has_prev = self.char > 0  # (W,) the row's current character sits in slot 1
        n_cur = self.t + 1  # (W,)
        n = max(int(self.prev_len.max()), int(n_cur.max()))
        prev, cur = self.prev_p[:, :n], self.cur_p[:, :n]  # (W, n, D) each
        hp = has_prev[:, None]  # (W, 1)
        identity = torch.stack([torch.where(hp, self.e_prev, self.e_cur),
                                torch.where(hp, self.e_cur, 0.0)], 1)  # (W, 2, D)
        points = torch.stack([torch.where(hp[..., None], prev, cur),
                              torch.where(hp[..., None], cur, 0.0)], 1)  # (W, 2, n, D)
        n_pts = torch.stack([torch.where(has_prev, self.prev_len, n_cur),
                             torch.where(has_prev, n_cur, 0)], 1)  # (W, 2)
        window = torch.stack([~has_prev, has_prev], 1)  # (W, 2) one window per row
        win = self.windows(identity, points, n_pts, torch.ones_like(window), window)
        context = self.dec.window_context(self.ctx, self.char_mask, self.ids, self.char)
        m_ctx = self.m_ctx[:, None].expand(-1, win.tokens.shape[1], -1)  # (W, L, D)
        h, _ = self.dec(win.tokens, win.positions, win.valid, self.mem_kv, m_ctx, context)
        return h[self.rows, win.first_out + self.t]  # (W, D) at y_{s,t} (e~_s when t = 0)

    def advance(self, delta: torch.Tensor, pen: torch.Tensor,
                forced: torch.Tensor | None = None) -> bool:
        """Append each row's new point, deltas (W, 2) and final pen states (W,); rows whose
        point ends a character move on to the next one (or finish); with a check, once every
        candidate of their sentence has ended it (``forced`` (W,): the cap ended it). Returns
        whether any row is still writing."""
        t = self.t
        line = self.line
        ctx = self._point_context(delta, t, pen) if any(self.dec.point_inputs) else None
        p = self.dec.embed_points(delta, pen, ctx)  # (W, D)
        active = self.live
        if self.any_waiting:  # a waiting row keeps its character's points and height
            active = self.live & ~self.waiting
            a = active.nonzero()[:, 0]
            self.cur_p[a, t[a]] = p[a]
            self.line = torch.where(self.waiting[:, None], line, self.line)
        else:
            self.cur_p[self.rows, t] = p
        self.x = p + self.seg_cur
        if self.every_token:
            self.x = self.x + self.e_cur
        if self.check is not None:
            self._keep_candidate_point(delta, pen, forced, t, active)
        self.t = t + active  # finished (and waiting) rows stay at their slot
        ends = (pen >= CURSIVE_EOC) & active  # (W,)
        if self.check is not None:
            if bool(ends.any()) or self.any_waiting:
                ends, t = self._resolve(ends)
            else:
                return True
        if not bool(ends.any()):
            return True
        finished = ends & (self.char + 1 >= self.n_chars)
        restart = ends & ~finished
        self.t = torch.where(ends, 0, self.t)
        self.char = torch.where(restart, self.char + 1, self.char)
        if bool(finished.any()):
            self.live = self.live & ~finished
            self.any_done = True
            n_live = int(self.live.sum())
            if n_live == 0:
                return False
            if n_live < COMPACT_BELOW * len(self.rows):
                keep = self.live.nonzero()[:, 0]
                self._select(keep)
                self.any_done = False
                restart, t = restart[keep], t[keep]
        r = restart.nonzero()[:, 0]  # (R,) rows that start their next character
        if len(r):
            n = t[r] + 1  # (R,) points of the character just ended
            self.prev_len[r] = n
            tp = int(n.max())
            self.prev_p[r, :tp] = self.cur_p[r, :tp]
            self.e_prev[r] = self.e_cur[r]
            ids, chars = self.ids[r], self.char[r]
            self.e_cur[r] = self.identity[ids, chars]
            self.m_ctx[r] = self.ctx[ids, chars]
            self.x[r] = self.e_cur[r] + self.seg_cur
            if self.cache is not None:
                self.restart = self._context(r, n, tp)
        return True

    def _keep_candidate_point(self, delta: torch.Tensor, pen: torch.Tensor,
                              forced: torch.Tensor | None, t: torch.Tensor,
                              active: torch.Tensor) -> None:
        """Store the new point of each drawing row (``active``) as point ``t`` of its
        candidate."""
        a = active.nonzero()[:, 0]
        ta = t[a]
        self.cand_delta[a, ta] = delta[a]
        self.cand_pen[a, ta] = pen[a]
        if forced is not None:
            self.cand_forced[a, ta] = forced[a]

    def _resolve(self, ends: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows ``ends`` (W,) have ended their character: they wait. Every sentence whose K
        rows now all wait keeps one candidate (the reader's choice where the character is
        read, else the first), copies its state into the K rows and appends its points to
        :attr:`kept`. Returns (W,) bool the rows of those sentences, which now end the
        character, and (W,) the index of each row's last point (as the step's ``t``)."""
        k = self.check.k
        self.waiting = self.waiting | ends
        if k > 1:
            self._give_up(k)
        ready = (self.waiting | ~self.live).view(-1, k).all(1) & self.live.view(-1, k)[:, 0]
        g = ready.nonzero()[:, 0]  # (G,) groups whose K candidates have all ended
        out = torch.zeros_like(ends)
        if len(g) == 0:
            self.any_waiting = True
            return out, self.t - 1
        rows = g[:, None] * k + torch.arange(k, device=g.device)  # (G, K)
        lead = rows[:, 0]
        ids, chars = self.ids[lead], self.char[lead]  # (G,) expanded sentence, character
        n = self.t[rows]  # (G, K) points of each candidate
        choice = torch.zeros_like(g)
        read = self.read[ids, chars]  # (G,)
        if k > 1 and bool(read.any()):
            choice[read] = torch.from_numpy(self._choose(rows[read], n[read],
                                                         self.codepoints[ids[read], chars[read]]))
            self.n_checked += int(read.sum())
        kept = rows.gather(1, choice[:, None])[:, 0]  # (G,) the kept row of each sentence
        n_kept = self.t[kept]  # (G,)
        span = torch.arange(int(n_kept.max()), device=g.device)
        on = span[None] < n_kept[:, None]  # (G, n) the kept points
        gi = torch.arange(len(g), device=g.device)[:, None].expand_as(on)[on]
        at = span[None].expand_as(on)[on]
        self.kept.append((torch.div(ids, k, rounding_mode="floor")[gi], chars[gi],
                          self.cand_delta[kept[gi], at], self.cand_pen[kept[gi], at],
                          self.cand_forced[kept[gi], at], at))
        to, src = rows.flatten(), kept.repeat_interleave(k)  # (G K,) each
        tp = int(n_kept.max())
        self.cur_p[to, :tp] = self.cur_p[src, :tp]
        self.t[to] = self.t[src]
        self.line[to] = self.line[src]
        end = self.start[kept] + (self.cand_delta[kept, :tp] * on[..., None]).sum(1)  # (G, 2)
        self.start[to] = end.repeat_interleave(k, 0)
        self.waiting[to] = False
        self.any_waiting = bool(self.waiting.any())
        out[to] = True
        return out, self.t - 1

    def _give_up(self, k: int) -> None:
        """End the candidates still drawing at :data:`GIVE_UP_FACTOR` times the points of the
        longest candidate of their character that ended by itself (and :data:`GIVE_UP_MARGIN`
        more): a run-on the reader would rank last anyway, since a candidate the cap ended
        loses to any that ended itself. Marked as ended by the cap (EOC on its last point), it
        stops costing its sentence steps."""
        t = self.t
        last = (t - 1).clamp(min=0)
        natural = self.waiting & ~self.cand_forced[self.rows, last]  # (W,) ended by itself
        longest = torch.where(natural, t, 0).view(-1, k).amax(1)  # (G,)
        limit = (GIVE_UP_FACTOR * longest + GIVE_UP_MARGIN).repeat_interleave(k)  # (W,)
        over = self.live & ~self.waiting & (longest > 0).repeat_interleave(k) & (t > limit)
        if bool(over.any()):
            r = over.nonzero()[:, 0]
            self.cand_forced[r, last[r]] = True
            self.cand_pen[r, last[r]] = EOC
            self.waiting = self.waiting | over

    def _choose(self, rows: torch.Tensor, n: torch.Tensor, codepoints: torch.Tensor):
        """(G,) the reader's choice among the candidates ``rows`` (G, K) of G characters
        (``n`` (G, K) points each, intended ``codepoints`` (G,))."""
        start, delta = self.start[rows].cpu().numpy(), self.cand_delta[rows].cpu().numpy()
        pens, forced = self.cand_pen[rows].cpu().numpy(), self.cand_forced[rows].cpu().numpy()
        n = n.cpu().numpy()
        inks, capped = [], []
        for i, cp in enumerate(codepoints.tolist()):
            for j in range(rows.shape[1]):
                m = int(n[i, j])
                xy = start[i, j] + np.cumsum(delta[i, j, :m].astype(np.float64), axis=0)
                inks.append(GlyphInk(xy, pens[i, j, :m], chr(cp)))
                capped.append(bool(forced[i, j, m - 1]))
        return self.check.choose(inks, np.asarray(capped))

    def _point_context(self, delta: torch.Tensor, t: torch.Tensor,
                       pen: torch.Tensor) -> PointContext:
        """The :class:`~cashg.model.decoder.PointContext` of each row's new point (offset
        ``delta``, pen state ``pen``), kept up to date one point at a time as
        :func:`~cashg.model.decoder.point_context` computes it for whole characters: the
        position after the first point of a character is the sum of its later offsets, the
        extent the running box of those positions, the line height the running sum of every y
        offset since the origin, the stroke index the number of pen lifts before the point in
        its character, the count the point's index in its character."""
        position, extent, line, stroke, count = self.dec.point_inputs
        first = (t == 0)[:, None]  # (W, 1) the point opens a character
        self.pos = torch.where(first, 0.0, self.pos + delta)  # char_positions
        box = None
        if extent:
            self.lo = torch.where(first, 0.0, torch.minimum(self.lo, self.pos))
            self.hi = torch.where(first, 0.0, torch.maximum(self.hi, self.pos))
            box = torch.cat([self.lo - self.pos, self.hi - self.pos], -1)  # char_extents
        if line:
            self.line = self.line + delta[:, 1:]  # line_heights
        index = None
        if stroke:  # stroke_indices: this point's stroke; the next one's after a lift
            index = torch.where(first[:, 0], 0, self.stroke)
            self.stroke = index + (pen == PU).long()
        clock = count_feature(t, delta.dtype) if count else None  # point_counts
        return PointContext(self.pos if position else None, box, self.line if line else None,
                            index, clock)

    def _context(self, r: torch.Tensor, n: torch.Tensor, tp: int) -> Restart:
        """The restart of rows ``r`` (R,) whose previous characters have ``n`` (R,) points (at
        most ``tp``): their context ``[e~_{s-1}, y_{s-1}]`` with the predecessor segment (none
        without ``bi_swt``), as in build_windows."""
        if not self.bi_swt:
            return Restart(r, self.x.new_zeros(len(r), 0, self.x.shape[1]), torch.zeros_like(r))
        e = self.e_prev[r]  # (R, D)
        pts = self.prev_p[r, :tp] + self.seg_prev  # (R, Tp, D)
        if self.every_token:
            pts = pts + e[:, None]
        return Restart(r, torch.cat([(e + self.seg_prev)[:, None], pts], 1), 1 + n)

    def _select(self, keep: torch.Tensor) -> None:
        """Keep rows ``keep`` (W',) only (drops finished rows from the step)."""
        names = ["ids", "n_chars", "live", "char", "t", "e_cur", "e_prev", "m_ctx", "x",
                 "cur_p", "prev_p", "prev_len", "pos", "lo", "hi", "line", "stroke"]
        if self.check is not None:  # whole sentences finish together: groups stay whole
            names += ["waiting", "cand_delta", "cand_pen", "cand_forced", "start"]
        for name in names:
            setattr(self, name, getattr(self, name)[keep])
        self.rows = torch.arange(len(keep), device=keep.device)
        if self.cache is not None:  # memory rows stay shared
            self.cache = self.cache.select(keep)
            self.memory = self.memory.select(keep)
        else:
            self.mem_kv = [(k[keep], v[keep]) for k, v in self.mem_kv]


def _sample(model: CASHG, codepoints, char_mask, style_images, opts,
            on_step: StepCallback | None = None,
            writer_word_gap: torch.Tensor | None = None,
            check: CharacterCheck | None = None) -> SampleResult:
    """One point for every unfinished row per step until every row has finished."""
    n_sentences = codepoints.shape[0]
    if check is not None:  # K rows per sentence (module docstring)
        codepoints, char_mask, style_images = (x.repeat_interleave(check.k, 0) for x in (
            codepoints, char_mask, style_images))
        if writer_word_gap is not None:
            writer_word_gap = writer_word_gap.repeat_interleave(check.k, 0)
    b = codepoints.shape[0]
    rows = _Rows(model, codepoints, char_mask, style_images, opts, writer_word_gap, check)
    gen = torch.Generator(device=codepoints.device).manual_seed(opts.seed)
    head_proj = partial(F.linear, weight=model.head.proj.weight, bias=model.head.proj.bias)
    no_end = rows.x.new_tensor(NO_END)  # (4,)
    spaces = whitespace(codepoints)  # (B, S) bool
    space_rows = spaces if opts.space_mode and not opts.greedy else None
    last_pen = (torch.full((b,), EOC, dtype=torch.long, device=codepoints.device)
                if opts.lift_mode and not opts.greedy else None)  # (B,) each row's last pen
    m = opts.max_char_points
    records = []  # per step: (ids, char, deltas, pen, forced, live), each over the W rows
    steps = 0
    going = bool(rows.live.any())
    while going:
        steps += 1
        hidden = rows.hidden()  # (W, D)
        raw = head_proj(hidden)  # (W, 4 + 6K)
        noise = None
        if not opts.greedy:  # drawn for all B rows at every step: the stream does not depend
            u, z = draw_noise(gen, b, model.head.n_mixtures, raw)  # on which rows are left
            noise = (u, z) if len(rows.ids) == b else (u[rows.ids], z[rows.ids])
        pen_bias = None
        if opts.min_char_points > 1:
            pen_bias = torch.where((rows.t + 1 < opts.min_char_points)[:, None], no_end, 0.0)
        delta, pen = choose_points(raw, model.head, opts, noise, pen_bias)
        if space_rows is not None or (opts.lift_mode and not opts.greedy):
            at_mode = torch.zeros_like(rows.live)
            if space_rows is not None:  # spaces at the mode: the gap without its short tail
                at_mode = at_mode | space_rows[rows.ids, rows.char]
            if opts.lift_mode and not opts.greedy:  # the jump after a pen lift at the mode
                lp = last_pen[rows.ids]
                at_mode = at_mode | (lp == PU) | (lp == EOC)
            mode, _ = choose_points(raw, model.head, GREEDY, None, pen_bias)
            delta = torch.where(at_mode[:, None], mode, delta)
        on_line = spaces[rows.ids, rows.char] & (rows.t >= 1)  # (W,) a space's later points
        delta = torch.where(on_line[:, None], delta * delta.new_tensor([1.0, 0.0]), delta)
        if rows.unit is not None:  # model.relative_gap: the gap, drawn in writer units
            scale = torch.where(on_line, rows.unit[rows.ids].to(delta), 1.0)  # (W,)
            delta = delta * F.pad(scale[:, None], (0, 1), value=1.0)
        forced = (rows.t == m - 1) & (pen < CURSIVE_EOC)  # the cap ends the character
        pen = torch.where(forced, EOC, pen)
        if check is None:
            records.append((rows.ids, rows.char, delta, pen, forced, rows.live))
            if on_step is not None:
                on_step(Step(rows.ids, rows.char, delta, pen, rows.live))
        if last_pen is not None:
            last_pen[rows.ids] = pen
        going = rows.advance(delta, pen, forced)
        if check is not None and rows.kept:
            _take_kept(rows, records, on_step, last_pen)
    result = _collect(records, n_sentences, steps)
    if check is not None:
        result.checked = rows.n_checked
    return result


def _take_kept(rows: _Rows, records: list, on_step: StepCallback | None,
               last_pen: torch.Tensor | None) -> None:
    """Move the points kept at this step (:meth:`_Rows._resolve`) into ``records``, tell
    ``on_step`` (one :class:`Step` per point index, over the sentences kept at once) and give
    every row of those sentences the kept character's last pen state (``lift_mode``)."""
    k = rows.check.k
    for ids, char, delta, pen, forced, at in rows.kept:
        records.append((ids, char, delta, pen, forced, torch.ones_like(forced)))
        if on_step is not None:
            for j in range(int(at.max()) + 1):
                sel = at == j
                on_step(Step(ids[sel], char[sel], delta[sel], pen[sel], torch.ones_like(
                    forced[sel])))
        if last_pen is not None:
            last = torch.ones_like(at, dtype=torch.bool)
            last[:-1] = at[1:] == 0  # each sentence's last kept point
            for row in range(k):
                last_pen[ids[last] * k + row] = pen[last]
    rows.kept.clear()


def _collect(records: list, b: int, steps: int) -> SampleResult:
    """Each sentence's points in step order, and the truncated characters, from the per-step
    records (rows that had finished are dropped)."""
    if not records:
        return SampleResult([np.zeros((0, 2), np.float32)] * b, [np.zeros(0, np.int64)] * b,
                            [np.zeros(0, np.int32)] * b, 0, steps)
    ids, char, deltas, pen, forced, live = (torch.cat(x).cpu().numpy() for x in zip(*records))
    ids, char, deltas, pen = ids[live], char[live], deltas[live], pen[live]
    truncated = int(forced[live].sum())
    order = np.argsort(ids, kind="stable")  # per sentence, steps stay in order
    cuts = np.cumsum(np.bincount(ids, minlength=b))[:-1]
    return SampleResult(np.split(deltas[order], cuts), np.split(pen[order], cuts),
                        np.split(char[order].astype(np.int32), cuts), truncated, steps)


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
    opts: SamplingOptions = DEFAULTS,
    writer_id: str = "",
    id_prefix: str = "gen",
    on_step: StepCallback | None = None,
    writer_word_gap: float | None = None,
    check: CharacterCheck | None = None,
) -> list[InkSentence]:
    """Sample the texts and return :class:`~cashg.core.ink.InkSentence` (absolute coordinates);
    ``on_step`` and ``check`` as in :func:`sample`; ``writer_word_gap``: the writer's word gap for a
    model with ``model.relative_gap`` (None: the population's)."""
    dev = next(model.parameters()).device
    cps, mask = encode_texts(texts, dev)
    if style_images.dim() == 3:
        style_images = style_images[None].expand(len(texts), -1, -1, -1)
    gaps = (None if writer_word_gap is None
            else torch.full((len(texts),), float(writer_word_gap), device=dev))
    res = sample(model, cps, mask, style_images.to(dev), opts, on_step, gaps, check)
    return [
        make_sentence(f"{id_prefix}-{i:05d}", writer_id, text, res.absolute(i), res.pen[i],
                      res.char_index[i])
        for i, text in enumerate(texts)
    ]
