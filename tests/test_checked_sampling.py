"""Writing that checks itself (``check = K``): K candidates per character from one line state,
the glyph reader's choice kept, the line going on from it; K = 1 is the unchecked sampler."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cashg.core.config.recognizer import GlyphReaderConfig
from cashg.core.ink import GlyphInk
from cashg.generation.check import CAPPED_PENALTY, CharacterCheck, CheckError
from cashg.generation.sampling import SamplingOptions, encode_texts, sample
from cashg.losses import most_probable_mean, space_gap_points
from cashg.model import CASHG
from cashg.model.batch import SequenceSample, collate
from cashg.model.presets import TINY, with_changes
from cashg.recognition.glyphs import (
    GlyphReader,
    GlyphReaderError,
    GlyphReaderNet,
    reader_for_check,
)

torch.set_num_threads(1)
TEXTS = ["Hello there 42", "hi", "a b"]
ALPHABET = "Habehilort24"  # no "3"; spaces are never read


def _model() -> CASHG:
    torch.manual_seed(0)
    cfg = with_changes(TINY, line_position=True, char_extent=True, stroke_index=True,
                       point_count=True)
    m = CASHG(cfg).eval()
    with torch.no_grad():  # characters of a few points, some lifts, varied lengths
        m.head.proj.bias[:4] = torch.tensor([2.0, 0.5, -0.5, -0.5])
    return m


class RecordingReader(GlyphReader):
    """A reader whose probability of the intended character grows with the glyph's width
    (a rule the test can check) and that remembers every candidate it was shown."""

    def __init__(self):
        cfg = GlyphReaderConfig()
        torch.manual_seed(0)
        super().__init__(GlyphReaderNet(len(ALPHABET), cfg.image_size, 4), ALPHABET, cfg)
        self.seen: list[GlyphInk] = []

    def probabilities(self, glyphs, batch_size=256):
        self.seen += list(glyphs)
        probs = np.full((len(glyphs), len(ALPHABET)), 1e-3, np.float32)
        for i, g in enumerate(glyphs):
            width = float(np.ptp(g.xy[:, 0])) if len(g.xy) else 0.0
            probs[i, ALPHABET.index(g.char)] = width / (1.0 + width)
        return probs, np.array([len(g.xy) > 0 for g in glyphs])


def _sample(model, opts, reader=None, texts=TEXTS):
    cps, mask = encode_texts(texts)
    imgs = torch.rand(len(texts), 3, 64, 64, generator=torch.Generator().manual_seed(1))
    check = None if reader is None else CharacterCheck(reader, opts.check or 1)
    return sample(model, cps, mask, imgs, opts, writer_word_gap=None, check=check)


OPTS = SamplingOptions(seed=3, temperature=0.9, max_char_points=10, space_mode=True,
                       lift_mode=True)


@pytest.mark.parametrize("use_cache", [True, False])
def test_one_candidate_is_the_unchecked_sampler_bit_for_bit(use_cache):
    model = _model()
    opts = SamplingOptions(**{**OPTS.__dict__, "use_cache": use_cache})
    plain = _sample(model, opts)
    one = _sample(model, SamplingOptions(**{**opts.__dict__, "check": 1}), RecordingReader())
    for i in range(len(TEXTS)):
        np.testing.assert_array_equal(plain.deltas[i], one.deltas[i])
        np.testing.assert_array_equal(plain.pen[i], one.pen[i])
        np.testing.assert_array_equal(plain.char_index[i], one.char_index[i])
    assert plain.truncated == one.truncated and plain.steps == one.steps and one.checked == 0


def test_the_kept_drawing_is_the_readers_choice_and_the_line_goes_on_from_it():
    model, reader, k = _model(), RecordingReader(), 4
    res = _sample(model, SamplingOptions(**{**OPTS.__dict__, "check": k}), reader)
    read = [(i, s) for i, t in enumerate(TEXTS) for s, c in enumerate(t) if c in ALPHABET]
    assert res.checked == len(read) and len(reader.seen) == k * len(read)
    groups = [reader.seen[j:j + k] for j in range(0, len(reader.seen), k)]
    differ = 0
    for i, text in enumerate(TEXTS):
        xy = np.cumsum(res.deltas[i].astype(np.float64), axis=0)  # the line's frame
        for s, c in enumerate(text):
            if c not in ALPHABET:
                continue
            mine = xy[res.char_index[i] == s]
            match = [g for g in groups if g[0].char == c and any(
                len(x.xy) == len(mine) and np.allclose(x.xy, mine, atol=1e-5) for x in g)]
            assert match, (text, s)  # the kept drawing is one of its candidates, in place
            group = match[0]
            widths = [float(np.ptp(x.xy[:, 0])) for x in group]
            kept = next(j for j, x in enumerate(group)
                        if len(x.xy) == len(mine) and np.allclose(x.xy, mine, atol=1e-5))
            capped = [len(x.xy) == 10 and x.pen[-1] == 3 for x in group]
            score = [w / (1 + w) - CAPPED_PENALTY * cap for w, cap in zip(widths, capped)]
            assert score[kept] == pytest.approx(max(score), abs=1e-6)
            differ += len({len(x.xy) for x in group}) > 1 or not all(
                np.allclose(x.xy, group[0].xy) for x in group if len(x.xy) == len(group[0].xy))
    assert differ > 3  # the candidates really differ: the choice mattered


@pytest.mark.parametrize("use_cache", [True, False])
def test_each_kept_character_continues_from_the_kept_line_state(use_cache):
    """Offsets at the mode (a huge sampling bias) and pen states drawn: candidates differ only
    in where they lift and end. Re-read with teacher forcing, every offset of the checked
    line is the mode given the points before it, so each character was drawn from the state
    of the candidates kept before it (their tokens, count, stroke and height in the line)."""
    m = _model()
    opts = SamplingOptions(seed=5, bias=60.0, max_char_points=10, min_char_points=2, check=4,
                           use_cache=use_cache)
    reader = RecordingReader()
    res = _sample(m, opts, reader)
    assert res.checked > 5 and len({len(g.xy) for g in reader.seen}) > 2
    imgs = torch.rand(len(TEXTS), 3, 64, 64, generator=torch.Generator().manual_seed(1))
    samples = []
    for i, text in enumerate(TEXTS):
        pts = np.concatenate([res.deltas[i], res.pen[i][:, None]], 1)
        samples.append(SequenceSample(text, [pts[res.char_index[i] == c]
                                             for c in range(len(text))], imgs[i].numpy(), i))
    batch = collate(samples)
    with torch.no_grad():
        mode = most_probable_mean(m(batch).params)  # (B, S, T, 2)
    sel = batch.point_mask
    on_line = space_gap_points(batch.codepoints, sel.shape[-1]) & sel  # dy = 0 there
    mode[..., 1] = torch.where(on_line, 0.0, mode[..., 1])
    torch.testing.assert_close(mode[sel], batch.deltas[sel], atol=1e-4, rtol=0)


def test_checked_cached_and_uncached_give_the_same_points():
    model = _model()
    runs = [_sample(model, SamplingOptions(**{**OPTS.__dict__, "check": 3,
                                              "use_cache": cache}), RecordingReader())
            for cache in (True, False)]
    for i in range(len(TEXTS)):
        np.testing.assert_array_equal(runs[0].pen[i], runs[1].pen[i])
        np.testing.assert_allclose(runs[0].deltas[i], runs[1].deltas[i], atol=1e-5, rtol=0)


def test_a_check_without_a_reader_is_a_clear_error():
    with pytest.raises(CheckError, match="glyph reader"):
        _sample(_model(), SamplingOptions(check=2))
    with pytest.raises(GlyphReaderError, match="no-such-reader.pt: .*recognizer stage"):
        reader_for_check("no-such-reader.pt", 2)
    with pytest.raises(ValueError, match="check must be >= 0"):
        _sample(_model(), SamplingOptions(check=-1))


def test_a_candidate_the_cap_ended_loses_to_one_that_ended_itself():
    check = CharacterCheck(RecordingReader(), 2)
    wide = GlyphInk(np.array([[0.0, 0.5], [2.0, 0.5]]), np.array([0, 3]), "a")
    narrow = GlyphInk(np.array([[0.0, 0.5], [0.1, 0.5]]), np.array([0, 3]), "a")
    assert check.choose([wide, narrow], np.array([False, False])).tolist() == [0]
    assert check.choose([wide, narrow], np.array([True, False])).tolist() == [1]
    assert check.choose([narrow, narrow], np.array([False, False])).tolist() == [0]


def test_the_checked_stage_never_lets_the_ranker_judge(tmp_path, capsys):
    """The checked stage ranks with the glyph reader and scores with the line recognizer:
    one file given as both is refused before anything is generated."""
    from cashg.evaluation.checked_stage import main

    same = tmp_path / "model.pt"
    same.write_bytes(b"")
    rc = main(["--checkpoint", str(tmp_path / "none.pt"), "--subsets", str(tmp_path),
               "--reader", str(same), "--recognizer", str(same), "--benchmark", "b",
               "--out", str(tmp_path / "out")])
    assert rc == 2 and "must be different models" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_candidate_far_longer_than_one_that_ended_is_given_up():
    """Candidates that run on do not hold their sentence to the cap: once a candidate has
    ended by itself, one still drawing at twice its points (and 16 more) is ended (and ranked
    last), so no candidate is ever longer than twice the longest of the others plus 17."""
    torch.manual_seed(0)
    m = CASHG(TINY).eval()
    with torch.no_grad():  # ends are rare: some characters run long
        m.head.proj.bias[:4] = torch.tensor([3.5, 0.0, -0.5, -0.5])
    cap = 120
    reader = RecordingReader()
    _sample(m, SamplingOptions(seed=1, max_char_points=cap, check=4), reader,
            ["hello", "there"])
    groups = [reader.seen[j:j + 4] for j in range(0, len(reader.seen), 4)]
    lengths = [sorted(len(g.xy) for g in group) for group in groups]
    assert any(ls[-1] > 20 for ls in lengths)  # some ran long
    for ls in lengths:
        assert ls[-1] <= 2 * ls[-2] + 17 or ls[-1] == cap, ls
