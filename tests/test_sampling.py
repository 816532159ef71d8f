"""Autoregressive sampling: cached == uncached, seeding, stopping, rows progressing
independently, ink output, the decoder's cached step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cashg.generation.sampling import (
    SamplingOptions,
    choose_points,
    chosen_component,
    draw_noise,
    encode_texts,
    generate_sentences,
    sample,
)
from cashg.losses import most_probable_mean, space_gap_points
from cashg.model import CASHG
from cashg.model.batch import SequenceSample, collate
from cashg.model.decoder_step import Restart
from cashg.model.gmm_head import mixture_from_raw
from cashg.model.presets import TINY, with_changes
from cashg.model.step_attention import KeyCounts, attend_one_query

torch.set_num_threads(1)
TEXTS = ["hello there", "hi", "a b"]


@pytest.fixture(scope="module")
def model() -> CASHG:
    torch.manual_seed(0)
    m = CASHG(TINY).eval()
    with torch.no_grad():  # make end-of-character states unlikely: multi-point characters
        m.head.proj.bias[:4] = torch.tensor([3.0, 0.0, -1.5, -1.5])
    return m


def _run(model, use_cache, greedy, seed=7, max_pts=12, min_pts=1):
    cps, mask = encode_texts(TEXTS)
    imgs = torch.rand(len(TEXTS), 3, 64, 64, generator=torch.Generator().manual_seed(1))
    return sample(model, cps, mask, imgs, SamplingOptions(
        greedy=greedy, seed=seed, use_cache=use_cache, max_char_points=max_pts,
        min_char_points=min_pts))


def _assert_same(a, b):
    for i in range(len(TEXTS)):
        np.testing.assert_array_equal(a.pen[i], b.pen[i])
        np.testing.assert_array_equal(a.char_index[i], b.char_index[i])
        np.testing.assert_allclose(a.deltas[i], b.deltas[i], atol=1e-5, rtol=0)
    assert a.truncated == b.truncated


@pytest.mark.parametrize("greedy", [True, False])
def test_cached_and_uncached_give_identical_points(model, greedy):
    a, b = _run(model, True, greedy), _run(model, False, greedy)
    for i in range(len(TEXTS)):
        np.testing.assert_array_equal(a.pen[i], b.pen[i])
        np.testing.assert_array_equal(a.char_index[i], b.char_index[i])
        np.testing.assert_allclose(a.deltas[i], b.deltas[i], atol=1e-5, rtol=0)
    assert max(len(x) for x in a.deltas) > 2 * len(TEXTS[0])  # several points per character


@pytest.mark.parametrize("greedy", [True, False])
def test_sentences_of_one_writer_share_the_style_encoding(model, greedy):
    """Rows with the same references are encoded once (the style encoder sees the distinct
    reference sets only) and read the same memory rows; cached == uncached still."""
    texts = ["hello there", "hi", "a b", "abc"]
    cps, mask = encode_texts(texts)
    refs = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    imgs = refs[torch.tensor([0, 1, 0, 0])]  # writers A, B, A, A
    seen = []
    hook = model.style.register_forward_hook(lambda m, args, out: seen.append(args[0].shape[0]))
    try:
        a, b = (sample(model, cps, mask, imgs, SamplingOptions(
            greedy=greedy, seed=3, max_char_points=9, use_cache=c)) for c in (True, False))
    finally:
        hook.remove()
    assert seen == [2, 2]
    for i in range(len(texts)):
        np.testing.assert_array_equal(a.pen[i], b.pen[i])
        np.testing.assert_array_equal(a.char_index[i], b.char_index[i])
        np.testing.assert_allclose(a.deltas[i], b.deltas[i], atol=1e-5, rtol=0)


def test_seeded_and_stopping_rules(model):
    a, b, c = _run(model, True, False, 7), _run(model, True, False, 7), _run(model, True, False, 8)
    for i in range(len(TEXTS)):
        np.testing.assert_array_equal(a.deltas[i], b.deltas[i])
    assert any(len(x) != len(y) or not np.array_equal(x, y) for x, y in zip(a.deltas, c.deltas))
    for i, text in enumerate(TEXTS):
        ci, pen = a.char_index[i], a.pen[i]
        assert sorted(set(ci.tolist())) == list(range(len(text)))  # spaces generated too
        assert (np.diff(ci) >= 0).all()
        last = np.r_[ci[1:] != ci[:-1], True]
        assert (pen[last] >= 2).all() and (pen[~last] < 2).all()  # EOC states end characters
        assert np.bincount(ci).max() <= 12


def test_generate_sentences_returns_valid_ink(model):
    sents = generate_sentences(model, ["ab", "c"], torch.rand(3, 64, 64),
                               SamplingOptions(seed=1, max_char_points=6), writer_id="w1")
    assert [s.text for s in sents] == ["ab", "c"]
    res = _run(model, True, False)
    for s in sents:
        s.validate()
        assert s.writer_id == "w1"
    np.testing.assert_allclose(res.absolute(0), np.cumsum(res.deltas[0], 0), rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("bi_swt,gated", [(False, False), (False, True), (True, False)])
@pytest.mark.parametrize("greedy", [True, False])
def test_ablations_cached_matches_uncached(bi_swt, gated, greedy):
    torch.manual_seed(0)
    m = CASHG(with_changes(TINY, bi_swt=bi_swt, gated_fusion=gated)).eval()
    with torch.no_grad():
        m.head.proj.bias[:4] = torch.tensor([3.0, 0.0, -1.5, -1.5])
    _assert_same(_run(m, True, greedy), _run(m, False, greedy))


@pytest.mark.parametrize("use_cache", [True, False])
def test_fixed_points_per_character(model, use_cache):
    """min = max: exactly n points per character, only the last one ends it."""
    n = 5
    res = _run(model, use_cache, False, max_pts=n, min_pts=n)
    for i, text in enumerate(TEXTS):
        assert np.bincount(res.char_index[i]).tolist() == [n] * len(text)
        last = np.arange(len(res.pen[i])) % n == n - 1
        assert (res.pen[i][last] >= 2).all() and (res.pen[i][~last] < 2).all()
    if use_cache:
        _assert_same(res, _run(model, False, False, max_pts=n, min_pts=n))


def test_bad_options_are_rejected(model):
    cps, mask = encode_texts(["a"])
    imgs = torch.rand(1, 3, 64, 64)
    for opts in (SamplingOptions(min_char_points=5, max_char_points=4),
                 SamplingOptions(min_char_points=0), SamplingOptions(max_char_points=0),
                 SamplingOptions(temperature=0.0)):
        with pytest.raises(ValueError):
            sample(model, cps, mask, imgs, opts)


def test_chosen_component_matches_the_mixture(model):
    """The per-step draw reads raw head outputs in the layout of mixture_from_raw."""
    torch.manual_seed(3)
    h = torch.randn(6, TINY.d_model)
    raw = model.head.proj(h)
    p = mixture_from_raw(raw, model.head.n_mixtures, model.head.sigma_eps)
    ref = model.head(h)
    torch.testing.assert_close(ref.mu, p.mu)  # the head is proj + mixture_from_raw
    k = torch.tensor([[0], [1], [2], [0], [2], [1]])
    mu, sigma, rho = chosen_component(raw, k, model.head)
    w = torch.arange(6)
    torch.testing.assert_close(mu, p.mu[w, k[:, 0]])
    torch.testing.assert_close(sigma, p.sigma[w, k[:, 0]])
    torch.testing.assert_close(rho, p.rho[w, k[:, 0]])
    greedy, pen = choose_points(raw, model.head, SamplingOptions(greedy=True), None)
    torch.testing.assert_close(greedy, p.mu[w, p.log_pi.argmax(-1)])
    assert torch.equal(pen, p.pen_logits.argmax(-1))


def test_gumbel_draws_follow_the_mixture_weights(model):
    """Component and pen frequencies match softmax(logits) (Gumbel-max is exact)."""
    raw = torch.zeros(20000, 4 + 6 * model.head.n_mixtures)
    raw[:, :4] = torch.tensor([1.0, 0.0, -1.0, 0.5])
    raw[:, 4:7] = torch.tensor([0.0, 1.0, 2.0])
    gen = torch.Generator().manual_seed(0)
    noise = draw_noise(gen, len(raw), model.head.n_mixtures, raw)
    _, pen = choose_points(raw, model.head, SamplingOptions(), noise)
    freq = np.bincount(pen.numpy(), minlength=4) / len(pen)
    np.testing.assert_allclose(freq, torch.softmax(raw[0, :4], 0).numpy(), atol=0.015)
    no_end = torch.tensor([0.0, 0.0, -float("inf"), -float("inf")])
    _, pen = choose_points(raw, model.head, SamplingOptions(), noise, no_end)
    assert int(pen.max()) <= 1


@pytest.mark.parametrize("changes", [
    {"gated_fusion": False}, {"context_layers": 0}, {"context_memory": "character"},
    {"context_memory": "sentence", "context_layers": 2}])
def test_decoder_step_matches_full_window(changes):
    """Windows of their own lengths (right-padded contexts through a Restart, then one step
    token each; later one window restarts from a new context and one restarts empty) give, at
    every step, the output of their whole window through forward (style branch, context
    branch over either context memory, gated fusion)."""
    torch.manual_seed(0)
    m = CASHG(with_changes(TINY, **changes)).eval()
    dec = m.decoder
    w, d = 3, TINY.d_model
    mem = dec.memory_kv(torch.randn(w, 5, d), torch.randn(w, 6, d))
    ctx = torch.randn(w, d)
    sentences = torch.randn(w, 4, d)  # the sentences' context memories, 4, 2 and 3 characters
    char_mask = torch.arange(4)[None] < torch.tensor([[4], [2], [3]])
    restarts = {0: Restart(torch.arange(3), torch.randn(3, 5, d), torch.tensor([5, 3, 4])),
                3: Restart(torch.tensor([2, 1]), torch.randn(2, 2, d), torch.tensor([2, 0]))}
    windows: list[list[torch.Tensor]] = [[] for _ in range(w)]  # each row's window tokens

    def full_window_output(i: int) -> torch.Tensor:
        x = torch.stack(windows[i])[None]  # (1, L, D)
        n = x.shape[1]
        branch = dec.window_context(sentences.clone(), char_mask, torch.tensor([i]),
                                    torch.tensor([0]))
        if branch is not None and changes.get("context_memory") != "sentence":
            branch = dec.context_kv(ctx[i:i + 1, None])  # the character's own vector
        h, _ = dec(x, torch.arange(n)[None], torch.ones(1, n, dtype=torch.bool),
                   [(k[i:i + 1], v[i:i + 1]) for k, v in mem], ctx[i:i + 1, None].expand(1, n, d),
                   branch)
        return h[0, -1]

    with torch.inference_mode():
        cache = dec.new_cache(w, 12, ctx)
        wts = dec.step_weights()
        step_mem = dec.step_memory(mem, None, (sentences, char_mask, torch.arange(w)))
        for step in range(6):
            x = torch.randn(w, d)
            r = restarts.get(step)
            if r is not None:
                for j, row in enumerate(r.rows.tolist()):
                    windows[row] = list(r.tokens[j, :r.length[j]])
            for i in range(w):
                windows[i].append(x[i])
            h, _ = dec.step(x, step_mem, ctx, cache, wts, r)
            assert cache.length.tolist() == [len(win) for win in windows]
            for i in range(w):
                torch.testing.assert_close(h[i], full_window_output(i), atol=1e-5, rtol=0)
        assert len(set(cache.length.tolist())) == 3  # three different window lengths
        cache.length[0] = cache.capacity
        with pytest.raises(ValueError, match="capacity"):
            dec.step(x, step_mem, ctx, cache, wts)


@pytest.mark.parametrize("kernels", [True, False])
def test_one_query_attention_matches_sdpa(kernels):
    """The numba kernels (CPU) and the torch path: each window attends to its own first
    n[w] keys, after appending its new key/value at slot n[w] - 1; to all keys of a memory
    row shared by several windows (source)."""
    torch.manual_seed(0)
    w, h, cap, dh = 5, 3, 9, 8
    q, k_new, v_new = torch.randn(w, h, dh), torch.randn(w, h, dh), torch.randn(w, h, dh)
    k, v = torch.randn(w, h, cap, dh), torch.randn(w, h, cap, dh)
    n = torch.tensor([1, 4, 9, 6, 4])
    k_ref, v_ref = k.clone(), v.clone()
    k_ref[torch.arange(w), :, n - 1] = k_new
    v_ref[torch.arange(w), :, n - 1] = v_new
    out = attend_one_query(q, k, v, KeyCounts.of(n, h, q, kernels=kernels), new=(k_new, v_new))
    torch.testing.assert_close(k, k_ref, rtol=0, atol=0)  # appended in place, nothing else
    torch.testing.assert_close(v, v_ref, rtol=0, atol=0)
    for i in range(w):
        ref = torch.nn.functional.scaled_dot_product_attention(
            q[i, :, None], k_ref[i, :, :n[i]], v_ref[i, :, :n[i]])[:, 0]
        torch.testing.assert_close(out[i], ref, atol=1e-6, rtol=0)
    source = torch.tensor([2, 0, 2, 1, 0])  # memory row of each window
    full = attend_one_query(q, k[:3], v[:3], KeyCounts.of(torch.full((w,), cap), h, q, source,
                                                          kernels=kernels))
    ref = torch.nn.functional.scaled_dot_product_attention(q[:, :, None], k[source],
                                                           v[source])[:, :, 0]
    torch.testing.assert_close(full, ref, atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="own key row"):
        attend_one_query(q, k, v, KeyCounts.of(n, h, q, source, kernels=kernels),
                         new=(k_new, v_new))


def _never_ending(seed: int = 0) -> CASHG:
    """An 'undertrained' model whose head never ends a character."""
    torch.manual_seed(seed)
    m = CASHG(TINY).eval()
    with torch.no_grad():
        m.head.proj.bias[:4] = torch.tensor([20.0, 0.0, -20.0, -20.0])
    return m


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("greedy", [True, False])
def test_undertrained_model_stops_every_character_at_the_cap(use_cache, greedy):
    """A model that never ends a character: every character gets exactly max_char_points
    points, its last one forced to EOC and counted as truncated; the short sentence finishes
    after its own points, the call after the longest sentence's (rows do not wait)."""
    m, cap = _never_ending(), 7
    texts = ["ab", "hello world", "xyz"]
    cps, mask = encode_texts(texts)
    imgs = torch.rand(len(texts), 3, 64, 64, generator=torch.Generator().manual_seed(1))
    res = sample(m, cps, mask, imgs, SamplingOptions(greedy=greedy, max_char_points=cap,
                                                     use_cache=use_cache))
    for i, text in enumerate(texts):
        assert np.bincount(res.char_index[i]).tolist() == [cap] * len(text)
        last = np.arange(len(res.pen[i])) % cap == cap - 1
        assert (res.pen[i][last] == 3).all() and (res.pen[i][~last] < 2).all()
    assert res.truncated == sum(len(t) for t in texts)
    assert res.steps == cap * len(texts[1])


def _model_with_varied_lengths() -> CASHG:
    """Greedy decoding of this random model ends some characters after one point and runs
    others to the cap, differently in each sentence (checked by the test using it)."""
    torch.manual_seed(1)
    m = CASHG(TINY).eval()
    with torch.no_grad():
        m.head.proj.bias[:4] = torch.tensor([0.0, 0.0, 0.0, 0.0])
    return m


@pytest.mark.parametrize("use_cache", [True, False])
def test_rows_progress_independently(use_cache):
    """A sentence's greedy points are the same alone and inside a batch (rows never wait
    for each other, finished rows leave the step), and the batch takes as many steps as its
    longest sentence has points, fewer than decoding character position by position would."""
    m = _model_with_varied_lengths()
    cps, mask = encode_texts(TEXTS)
    imgs = torch.rand(len(TEXTS), 3, 64, 64, generator=torch.Generator().manual_seed(1))
    opts = SamplingOptions(greedy=True, max_char_points=12, use_cache=use_cache)
    res = sample(m, cps, mask, imgs, opts)
    for i in range(len(TEXTS)):  # the same padded codepoints: the text encoder sees the same
        alone = sample(m, cps[i:i + 1], mask[i:i + 1], imgs[i:i + 1], opts)
        assert alone.steps == len(alone.pen[0])
        np.testing.assert_array_equal(alone.pen[0], res.pen[i])
        np.testing.assert_array_equal(alone.char_index[0], res.char_index[i])
        np.testing.assert_allclose(alone.deltas[0], res.deltas[i], atol=1e-5, rtol=0)
    per_char = [np.bincount(ci) for ci in res.char_index]
    lockstep = sum(max(c[s] for c in per_char if s < len(c)) for s in range(len(TEXTS[0])))
    assert res.steps == max(len(p) for p in res.pen) < lockstep
    assert any(c.min() != c.max() for c in per_char)  # characters of different lengths


@pytest.mark.parametrize("point_position,bi_swt,every,placement", [
    (True, True, False, {}), (False, True, False, {}),
    (True, False, False, {}), (True, True, True, {}),
    (False, False, True, {}),
    (True, True, True, {"char_extent": True, "line_position": True}),
    (True, True, True, {"char_extent": True, "stroke_index": True}),
    (True, True, True, {"stroke_index": True, "point_count": True}),
    (False, True, False, {"char_extent": True}),
    (False, False, False, {"line_position": True})])
def test_greedy_samples_are_the_teacher_forced_modes(point_position, bi_swt, every, placement):
    """Sampling builds every token as teacher forcing does (offsets, pen states, in-character
    positions, the character's extent so far, the pen's height in the line, per-token
    identities, the stroke index, segments, windows): re-reading greedy samples with
    ``forward`` gives, at every point, the most probable component's mean = the sampled
    offset and the pen argmax."""
    torch.manual_seed(0)
    m = CASHG(with_changes(TINY, point_position=point_position, bi_swt=bi_swt,
                           identity_every_token=every, **placement)).eval()
    if placement:  # inputs strong enough that a wrong extent or height changes the points
        with torch.no_grad():
            for layer in (m.decoder.point_extent, m.decoder.line_pos, m.decoder.point_stroke,
                          m.decoder.point_count):
                if layer is not None:
                    layer.weight.mul_(30.0)
    with torch.no_grad():
        lifts = placement.get("stroke_index", False)  # strokes after lifts to count
        m.head.proj.bias[:4] = torch.tensor([3.0, 2.9 if lifts else 0.0, -1.5, -1.5])
    res = _run(m, True, True, min_pts=3, max_pts=8)
    if lifts:
        after_lift = sum(int((pen[:-1] == 1).sum()) for pen in res.pen)
        assert after_lift > 5
    imgs = torch.rand(len(TEXTS), 3, 64, 64, generator=torch.Generator().manual_seed(1))
    samples = []
    for i, text in enumerate(TEXTS):
        pts = np.concatenate([res.deltas[i], res.pen[i][:, None]], 1)
        chars = [pts[res.char_index[i] == c] for c in range(len(text))]
        samples.append(SequenceSample(text, chars, imgs[i].numpy(), i))
    batch = collate(samples)
    with torch.no_grad():
        p = m(batch).params
    mode = most_probable_mean(p)  # (B, S, T, 2)
    sel = batch.point_mask
    on_line = space_gap_points(batch.codepoints, sel.shape[-1]) & sel  # dy = 0 there
    mode[..., 1] = torch.where(on_line, 0.0, mode[..., 1])
    assert int(on_line.sum()) > 0
    torch.testing.assert_close(mode[sel], batch.deltas[sel], atol=1e-5, rtol=0)
    # pen argmax, except where sampling overrides it: no end before point 3 (min_pts), an
    # end forced at point 8 (max_pts)
    pen = p.pen_logits.argmax(-1)  # (B, S, T)
    t = torch.arange(sel.shape[-1])
    free = sel & (t >= 2) & (t < 7)
    assert int(free.sum()) > 20
    assert bool((pen[free] == batch.pen[free]).all())


# ---------------------------------------------------------------- space_mode / lift_mode
def _modes(model, texts, seed, n, **modes):
    cps, mask = encode_texts(texts)
    imgs = torch.rand(len(texts), 3, 64, 64, generator=torch.Generator().manual_seed(1))
    return sample(model, cps, mask, imgs, SamplingOptions(
        seed=seed, temperature=0.8, max_char_points=n, min_char_points=n, **modes))


def test_space_mode_writes_spaces_at_the_mode(model):
    """Spaces only, a fixed number of points: with space_mode every point is the mixture's mode,
    so the seed no longer matters; without it the points are drawn."""
    texts = ["  ", "   "]
    a, b = (_modes(model, texts, s, 2, space_mode=True) for s in (1, 2))
    for i in range(len(texts)):
        np.testing.assert_allclose(a.deltas[i], b.deltas[i], atol=1e-6, rtol=0)
    c, d = (_modes(model, texts, s, 2) for s in (1, 2))
    assert not np.allclose(c.deltas[0], d.deltas[0])


def test_lift_mode_puts_only_the_points_after_a_lift_at_the_mode(model):
    """One point per character: every point follows a pen lift (the sentence start or the
    previous character's EOC) unless the previous character joined cursively."""
    texts = ["abcdef", "hello"]
    runs = [_modes(model, texts, s, 1, lift_mode=True) for s in (1, 2)]
    for i in range(len(texts)):
        pens = [r.pen[i] for r in runs]
        after = [np.r_[True, (p[:-1] == 1) | (p[:-1] == 3)] for p in pens]
        same_prefix = np.r_[True, (pens[0] == pens[1])[:-1]]
        both = np.cumprod(after[0] & after[1] & same_prefix).astype(bool)  # every point so far
        assert both.sum() >= 2  # the first point and at least one jump compared
        np.testing.assert_allclose(runs[0].deltas[i][both], runs[1].deltas[i][both], atol=1e-6)
    plain = [_modes(model, texts, s, 1) for s in (1, 2)]
    assert not np.allclose(plain[0].deltas[0][:1], plain[1].deltas[0][:1])


@pytest.mark.parametrize("modes", [{}, {"space_mode": True}, {"greedy": True}])
def test_a_space_after_its_first_point_stays_at_its_height(model, modes):
    """A space's pseudo-points lie at one height (pen_states): its points after the first get
    dy = 0 whatever the decoding; its first point and every other character's keep theirs."""
    texts = ["a b", "xy  z"]
    res = _modes(model, texts, 3, 3, **modes)
    for i, text in enumerate(texts):
        ci, d = res.char_index[i], res.deltas[i]
        later = np.r_[False, ci[1:] == ci[:-1]]  # (N,) not the first point of its character
        space = np.array([text[c] == " " for c in ci])
        assert (d[space & later, 1] == 0).all()
        assert (d[~(space & later), 1] != 0).all()


@pytest.mark.parametrize("modes", [{"space_mode": True}, {"lift_mode": True},
                                   {"space_mode": True, "lift_mode": True}])
def test_modes_cached_matches_uncached(model, modes):
    cps, mask = encode_texts(TEXTS)
    imgs = torch.rand(len(TEXTS), 3, 64, 64, generator=torch.Generator().manual_seed(1))
    a, b = (sample(model, cps, mask, imgs, SamplingOptions(seed=3, use_cache=c, **modes))
            for c in (True, False))
    _assert_same(a, b)


@pytest.mark.parametrize("use_cache", [True, False])
def test_step_callback_sees_every_point_and_changes_nothing(model, use_cache):
    """``on_step`` receives each step's points (the live rows' points, in order, are exactly the
    result's) and leaves the result bit-identical; an exception it raises stops sampling."""
    cps, mask = encode_texts(TEXTS)
    imgs = torch.rand(len(TEXTS), 3, 64, 64, generator=torch.Generator().manual_seed(1))
    opts = SamplingOptions(seed=3, use_cache=use_cache, max_char_points=12, space_mode=True,
                           lift_mode=True)
    plain = sample(model, cps, mask, imgs, opts)
    seen: dict[int, list] = {i: [] for i in range(len(TEXTS))}

    def on_step(step):
        for i, c, d, p, live in zip(step.ids.tolist(), step.char.tolist(),
                                    step.deltas.tolist(), step.pen.tolist(),
                                    step.live.tolist()):
            if live:
                seen[i].append((c, *d, p))

    watched = sample(model, cps, mask, imgs, opts, on_step=on_step)
    for i in range(len(TEXTS)):
        np.testing.assert_array_equal(plain.deltas[i], watched.deltas[i])
        np.testing.assert_array_equal(plain.pen[i], watched.pen[i])
        got = np.array(seen[i]).reshape(-1, 4)
        np.testing.assert_array_equal(got[:, 0], plain.char_index[i])
        np.testing.assert_array_equal(got[:, 1:3], plain.deltas[i])
        np.testing.assert_array_equal(got[:, 3], plain.pen[i])

    class Stop(Exception):
        pass

    def stop(step):
        raise Stop

    with pytest.raises(Stop):
        sample(model, cps, mask, imgs, opts, on_step=stop)
