"""CASHG model modules: shapes, causality, RoPE, gating, mixture validity, checkpoints."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from cashg.core.config.model import ModelConfig
from cashg.model import CASHG, char_deltas, collate, count_parameters
from cashg.model.checkpoint import CheckpointError, load_model, save_model_checkpoint
from cashg.model.decoder import char_positions, count_feature, point_counts, stroke_indices
from cashg.model.gmm_head import RHO_LIMIT, mixture_from_raw
from cashg.model.presets import TINY, synthetic_sample, with_changes
from cashg.model.rope import RotaryEmbedding
from cashg.model.text_encoder import TextBackboneError, build_text_backbone

torch.set_num_threads(1)

make_sample = synthetic_sample


@pytest.fixture(scope="module")
def model() -> CASHG:
    torch.manual_seed(0)
    return CASHG(TINY).eval()


@pytest.fixture
def batch():
    rng = np.random.default_rng(0)
    return collate([make_sample("ab c", 1, rng), make_sample("xy", 2, rng)])


def test_forward_shapes(model, batch):
    out = model(batch, return_gates=True)
    b, s, t = batch.pen.shape
    k = TINY.n_mixtures
    assert out.params.log_pi.shape == (b, s, t, k)
    assert out.params.mu.shape == (b, s, t, k, 2)
    assert out.params.sigma.shape == (b, s, t, k, 2)
    assert out.params.rho.shape == (b, s, t, k)
    assert out.params.pen_logits.shape == (b, s, t, 4)
    assert out.gates.shape == (b, s, t, TINY.d_model)
    r, n = 3, 4  # 64x64 -> 2x2 tokens per reference
    assert out.style.writer_memory.shape == (b, r * n, TINY.d_model)
    assert out.style.glyph_memory.shape == (b, r * n, TINY.d_model)
    assert out.style.writer_embed.shape == (b, r, TINY.supcon_dim)
    assert out.style.glyph_embed.shape == (b, r, 2, TINY.supcon_dim)
    ident, ctx = model.text(batch.codepoints, batch.char_mask)
    assert ident.shape == ctx.shape == (b, s, TINY.d_model)


def test_gates_in_open_unit_interval(model, batch):
    gates = model(batch, return_gates=True).gates[batch.point_mask]
    assert gates.numel() and bool((gates > 0).all()) and bool((gates < 1).all())


def test_identity_is_context_free_and_alpha_positive(model):
    cps = torch.tensor([[ord(c) for c in "abca"], [ord(c) for c in "zzab"]])
    mask = torch.ones_like(cps, dtype=torch.bool)
    ident, ctx = model.text(cps, mask)
    torch.testing.assert_close(ident[0, 0], ident[0, 3])  # same code point, same embedding
    torch.testing.assert_close(ident[0, 0], ident[1, 2])
    assert not torch.allclose(ctx[0, 0], ctx[0, 3])  # context memory depends on position
    assert float(model.text.alpha) == pytest.approx(TINY.alpha_init, rel=1e-5)
    model.text.alpha_raw.data.fill_(-50.0)
    assert float(model.text.alpha) >= 0
    model.text.alpha_raw.data.fill_(float(np.log(np.expm1(TINY.alpha_init))))


def _codes(texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(t) for t in texts)
    cps = torch.tensor([[ord(c) for c in t] + [0] * (width - len(t)) for t in texts])
    return cps, cps != 0


def test_a_texts_context_memory_does_not_depend_on_its_batch(model):
    """CANINE's states near a text's end change with padding beyond its last molecule; each
    text is encoded with the padding it gets alone, whatever else its batch holds (the char
    and bigram texts come from the frozen backbone's cache, sentences in length groups)."""
    alone = {t: model.text(*_codes([t]))[1][0, :len(t)]
             for t in ("hello wor", "ab", "q", "a much longer sentence")}
    for batch in (["hello wor", "a much longer sentence"], ["q", "hello wor", "ab"],
                  ["a much longer sentence", "ab", "q", "hello wor"]):
        _, ctx = model.text(*_codes(batch))
        for i, t in enumerate(batch):
            torch.testing.assert_close(ctx[i, :len(t)], alone[t], rtol=1e-5, atol=1e-5)


def test_frozen_backbone_cache_follows_the_weights(model):
    """Cached states are dropped when the backbone's weights change (load_state_dict)."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    for k in state:
        if k.startswith("text.backbone.") and k.endswith("weight"):
            state[k] += 0.05  # another backbone than the one the cache was filled with
    cps, mask = _codes(["ab", "xyz"])
    warm = CASHG(TINY).eval()
    warm.load_state_dict(model.state_dict())
    warm.text(cps, mask)
    assert len(warm.text._cache_codes) > 0  # code points were cached
    warm.load_state_dict(state)
    cold = CASHG(TINY).eval()
    cold.load_state_dict(state)
    for a, w in zip(warm.text(cps, mask), cold.text(cps, mask)):
        torch.testing.assert_close(a, w)


def test_a_sentence_cache_gives_the_batched_states_and_encodes_each_text_once(model):
    """The sentence cache of a frozen backbone (used on a GPU, where the backbone's own mask
    building synchronises): the states of each text equal those encoded with its length
    group, and a batch of texts already seen runs no backbone at all."""
    from cashg.model.frozen_cache import TextStates

    enc = model.text
    cps, mask = _codes(["hello wor", "a much longer sentence", "hello wor", "abc"])
    lengths = mask.sum(1).tolist()
    batched = enc._batched_char_states(cps, mask, lengths, torch.device("cpu"))
    cache, calls = TextStates(), []
    backbone = enc._backbone

    def counted(ids, m):
        calls.append(ids.shape[0])
        return backbone(ids, m)

    enc._backbone = counted
    try:
        first = enc._long_text_states(cps, mask, lengths, torch.device("cpu"), cache)
        assert calls == [1, 1, 1] and len(cache) == 3  # one text at a time, each once
        again = enc._long_text_states(cps[[3, 0]], mask[[3, 0]], [lengths[3], lengths[0]],
                                      torch.device("cpu"), cache)
        assert calls == [1, 1, 1]  # all seen: no backbone
    finally:
        del enc._backbone
    assert first.shape == batched.shape
    torch.testing.assert_close(first, batched, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(again, first[[3, 0]])
    small = TextStates(max_bytes=2 * 36)  # room for two rows of 9 floats
    small.rows([("a",), ("b",)], lambda k: torch.zeros(9, 1))
    small.rows([("c",)], lambda k: torch.zeros(9, 1))  # over the budget: the old ones go
    assert list(small.states) == [("c",)] and small.nbytes == 36


def test_causality_later_points_never_change_earlier_outputs(model, batch):
    base = model(batch).params
    changed = dataclasses.replace(batch, deltas=batch.deltas.clone())
    t0 = 1
    changed.deltas[0, 1, t0] += 5.0  # second character of sample 0, its point t0
    out = model(changed).params
    # predictions of points 0..t0 of that character come from tokens before point t0
    torch.testing.assert_close(out.mu[0, 1, : t0 + 1], base.mu[0, 1, : t0 + 1])
    torch.testing.assert_close(out.mu[0, 0], base.mu[0, 0])  # the predecessor's own window
    torch.testing.assert_close(out.mu[1], base.mu[1])  # other samples
    assert not torch.allclose(out.mu[0, 2], base.mu[0, 2])  # next window sees it (Bi-SWT)


def test_decoder_causal_and_padding_invariant(model):
    dec = model.decoder
    torch.manual_seed(1)
    x = torch.randn(2, 7, TINY.d_model)
    pos = torch.arange(7)[None].expand(2, -1)
    valid = torch.ones(2, 7, dtype=torch.bool)
    mem = dec.memory_kv(torch.randn(2, 5, TINY.d_model), torch.randn(2, 5, TINY.d_model))
    ctx = torch.randn(2, 7, TINY.d_model)
    branch = dec.context_kv(torch.randn(2, 1, TINY.d_model))  # the context branch's memory
    h, _ = dec(x, pos, valid, mem, ctx, branch)
    x2 = x.clone()
    x2[:, 4:] = torch.randn(2, 3, TINY.d_model)
    h2, _ = dec(x2, pos, valid, mem, ctx, branch)
    torch.testing.assert_close(h2[:, :4], h[:, :4])
    valid2 = valid.clone()
    valid2[:, 5:] = False  # padding on the right never changes the valid outputs
    h3, _ = dec(x2, pos, valid2, mem, ctx, branch)
    torch.testing.assert_close(h3[:, :5], h2[:, :5])


def test_bi_swt_off_ignores_the_predecessor(batch):
    torch.manual_seed(0)
    m = CASHG(dataclasses.replace(TINY, bi_swt=False, gated_fusion=False)).eval()
    base = m(batch).params
    changed = dataclasses.replace(batch, deltas=batch.deltas.clone())
    changed.deltas[0, 0] += 1.0
    out = m(changed).params
    torch.testing.assert_close(out.mu[0, 1], base.mu[0, 1])
    assert m(batch, return_gates=True).gates is None


def test_rope_depends_on_relative_position_only():
    rope = RotaryEmbedding(8)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def dot(i, j):
        qi = rope(q, torch.tensor([[i]]))
        kj = rope(k, torch.tensor([[j]]))
        return float((qi * kj).sum())

    assert dot(3, 1) == pytest.approx(dot(10, 8), abs=1e-5)
    assert dot(3, 1) != pytest.approx(dot(3, 2), abs=1e-3)
    assert float(rope(q, torch.tensor([[0]])).sub(q).abs().max()) == 0.0


@pytest.mark.parametrize("scale", [1.0, 1e3, 1e4])
def test_mixture_parameters_valid_for_extreme_inputs(scale):
    from cashg.losses import gmm_nll

    torch.manual_seed(0)
    raw = torch.randn(64, 4 + 6 * 20) * scale
    p = mixture_from_raw(raw, 20, 1e-4)
    assert bool((p.sigma > 0).all())
    assert bool((p.rho.abs() < 1).all()) and float(p.rho.abs().max()) <= RHO_LIMIT
    torch.testing.assert_close(p.log_pi.exp().sum(-1), torch.ones(64))
    nll = gmm_nll(p, torch.randn(64, 2) * scale, torch.ones(64, dtype=torch.bool))
    assert torch.isfinite(nll)


def test_rho_uses_tanh_once():
    raw = torch.zeros(1, 4 + 6)
    raw[0, -1] = 2.0  # rho logit
    p = mixture_from_raw(raw, 1, 1e-4)
    assert float(p.rho) == pytest.approx(np.tanh(2.0), rel=1e-6)  # not tanh(tanh(2)) = 0.76


def test_char_deltas_round_trip():
    pts = np.array([[1, 1, 0], [2, 1, 3], [3, 2, 0], [4, 2, 2], [5, 0, 3]], np.float32)
    ci = np.array([0, 0, 1, 1, 2])
    chars = char_deltas(pts, ci, 3)
    allp = np.concatenate(chars)
    np.testing.assert_allclose(np.cumsum(allp[:, :2], 0), pts[:, :2])
    np.testing.assert_array_equal(allp[:, 2], pts[:, 2])
    with pytest.raises(ValueError, match="owns no points"):
        char_deltas(pts, ci, 4)


def test_from_pretrained_failure_names_the_offline_option():
    cfg = dataclasses.replace(TINY, text_backbone="/nonexistent/canine-dir")
    with pytest.raises(TextBackboneError, match="random-canine"):
        build_text_backbone(cfg)


def test_checkpoint_round_trip(tmp_path, model, batch):
    path = tmp_path / "m.pt"
    save_model_checkpoint(path, model, TINY, {"char_inventory": list("abcxy "), "iteration": 3})
    payload = torch.load(path, weights_only=True)  # no arbitrary pickles inside
    assert payload["format"] == "cashg-model"
    m2, cfg, extra = load_model(path)
    assert cfg == TINY and extra["iteration"] == 3
    torch.testing.assert_close(m2(batch).params.mu, model(batch).params.mu)
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="bad.pt"):
        load_model(tmp_path / "bad.pt")


def test_paper_size_parameter_count():
    """The paper configuration with a random CANINE of canine-c's real sizes (meta device)."""
    with torch.device("meta"):
        m = CASHG(ModelConfig(text_backbone="random-canine"))
    counts = count_parameters(m)
    per_module = {n: count_parameters(c)["total"] for n, c in m.named_children()}
    print(f"\nCASHG paper-size parameters: {counts} per module: {per_module}")
    assert 120e6 < counts["frozen"] < 140e6  # canine-c is ~132M, frozen
    assert counts["trainable"] > 10e6
    assert all(not p.requires_grad for p in m.text.backbone.parameters())


def test_stroke_indices_count_the_lifts_before_each_point():
    """The point after a pen lift opens the next stroke; a character ends its count (EOC and
    CURSIVE_EOC are not lifts inside it); the count is per character."""
    pen = torch.tensor([[[0, 0, 1, 0, 1, 1, 3], [0, 1, 0, 2, 0, 0, 0]]])  # (1, S=2, T=7)
    expected = torch.tensor([[[0, 0, 0, 1, 1, 2, 3], [0, 0, 1, 1, 1, 1, 1]]])
    assert torch.equal(stroke_indices(pen), expected)


def test_stroke_index_changes_the_tokens_only_where_on():
    """With ``model.stroke_index`` the tokens after a lift differ from the same model's
    without the embedding; off, no parameter and the same tokens as before the option."""
    torch.manual_seed(0)
    on = CASHG(with_changes(TINY, stroke_index=True)).decoder
    torch.manual_seed(0)
    off = CASHG(TINY).decoder
    assert off.point_stroke is None and on.point_stroke is not None
    deltas = torch.randn(1, 1, 5, 2)
    pen = torch.tensor([[[0, 1, 0, 1, 3]]])
    mask = torch.ones(1, 1, 5, dtype=torch.bool)
    with torch.no_grad():
        on.point_stroke.weight[0] = 0.0  # stroke 0 adds nothing: tokens before a lift agree
        a, b = on.embed_chars(deltas, pen, mask), off.embed_chars(deltas, pen, mask)
    torch.testing.assert_close(a[..., :2, :], b[..., :2, :])
    assert not torch.allclose(a[..., 2:, :], b[..., 2:, :])


def test_point_count_is_each_points_index_in_its_character_on_a_log_scale():
    """``model.point_count``: point t of every character reads log(1 + t) / log(101), the
    same in teacher forcing and in the sampler's one-point form, growing past the cap."""
    deltas = torch.randn(2, 3, 6, 2)  # (B, S, T, 2)
    counts = point_counts(deltas)  # (B, S, T, 1)
    want = torch.log1p(torch.arange(6.0)) / math.log1p(100.0)
    assert counts.shape == (2, 3, 6, 1)
    torch.testing.assert_close(counts[1, 2, :, 0], want)
    torch.testing.assert_close(count_feature(torch.tensor([0, 5, 100, 200]), torch.float32)[:, 0],
                               torch.log1p(torch.tensor([0.0, 5, 100, 200])) / math.log1p(100.0))
    torch.manual_seed(0)
    on = CASHG(with_changes(TINY, point_count=True)).decoder
    assert on.point_inputs[-1] and CASHG(TINY).decoder.point_count is None
    pen = torch.zeros(2, 3, 6, dtype=torch.long)
    mask = torch.ones(2, 3, 6, dtype=torch.bool)
    with torch.no_grad():
        a = on.embed_chars(deltas, pen, mask)
        on.point_count.weight.zero_()
        b = on.embed_chars(deltas, pen, mask)
    torch.testing.assert_close(a[..., 0, :], b[..., 0, :])  # the first point's count is 0
    assert not torch.allclose(a[..., 1:, :], b[..., 1:, :])


def test_char_positions_are_relative_to_the_first_point():
    d = torch.tensor([[[0.5, 0.2], [0.1, 0.0], [0.0, 0.3], [0.0, 0.0]]])  # (1, T=4, 2), 1 pad
    expected = torch.tensor([[[0.0, 0.0], [0.1, 0.0], [0.1, 0.3], [0.1, 0.3]]])
    torch.testing.assert_close(char_positions(d), expected)


def test_prefilled_text_states_are_the_states_a_batch_computes_on_first_sight(model):
    """``prefill`` (a training's texts before its loop) caches every code point and short
    text: a batch then runs no backbone, and its states are those of a cold cache."""
    texts = ["a", "ab", "Q", "hello wor"]
    warm = CASHG(TINY).eval()
    warm.load_state_dict(model.state_dict())
    with torch.no_grad():
        warm.text.prefill(texts, "cpu")
    assert len(warm.text._cache_codes) == len(set("".join(texts)))
    assert set(warm.text._cache_texts.index) == {(97,), (97, 98), (81,)}
    assert len(warm.text._cache_sentences) == 0  # a CPU encodes sentences in length groups
    calls = []
    backbone = warm.text._backbone
    warm.text._backbone = lambda ids, m: calls.append(ids.shape[0]) or backbone(ids, m)
    cps, mask = _codes(["ab", "Q", "a"])
    cold = CASHG(TINY).eval()
    cold.load_state_dict(model.state_dict())
    for a, w in zip(warm.text(cps, mask), cold.text(cps, mask)):
        torch.testing.assert_close(a, w, rtol=0, atol=0)
    assert calls == []
