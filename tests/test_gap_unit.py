"""A writer's word gap, measured on its other lines: what the training samples, the split
folders and the sampler carry for a ``model.relative_gap`` model (tests/test_relative_gap.py:
what the model does with it)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cashg.core.config.train import TrainConfig
from cashg.core.ink import InkFile
from cashg.core.pen_states import insert_spaces, space_gaps, writer_word_gap
from cashg.generation.sampling import SamplingOptions, encode_texts, sample
from cashg.generation.split import writer_word_gaps
from cashg.losses import most_probable_mean, space_gap_points
from cashg.model import CASHG
from cashg.model.batch import SequenceSample, collate
from cashg.model.presets import TINY, with_changes
from cashg.training.cli import open_data
from cashg.training.data import BatchSource

torch.set_num_threads(1)
TEXTS = ["a b c", "xy  z", "a b c"]


def _line(text: str, lefts: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A line whose non-space characters are unit-wide boxes at ``lefts`` (in text order)."""
    xy, ci = [], []
    k = 0
    for s, ch in enumerate(text):
        if ch.isspace():
            continue
        x0 = lefts[k]
        k += 1
        xy += [[x0, 0.0], [x0 + 1.0, 1.0]]
        ci += [s, s]
    xy, ci = np.asarray(xy, np.float64), np.asarray(ci, np.int64)
    return insert_spaces(xy, np.zeros(len(ci), np.int8), ci, text)


def test_space_gaps_are_the_word_gaps_and_a_run_splits_its_gap():
    # "ab c": gap 0.5 after "ab"; "  " between c and d: gap 3.0 split in two spans of 1.5
    text = "ab c  d"
    xy, _, ci = _line(text, [0.0, 1.0, 2.5, 6.5])
    np.testing.assert_allclose(space_gaps(text, xy, ci), [0.5, 1.5, 1.5])
    # a leading space owns no points and gives no gap
    xy, _, ci = _line(" ab", [0.0, 1.0])
    assert len(space_gaps(" ab", xy, ci)) == 0


def test_a_writers_gap_leaves_the_described_line_out():
    gaps = [np.array([1.0, 2.0]), np.array([3.0]), np.zeros(0), np.array([10.0])]
    assert writer_word_gap(gaps) == pytest.approx(2.5)
    assert writer_word_gap(gaps, leave_out=3) == pytest.approx(2.0)
    assert writer_word_gap(gaps, leave_out=1) == pytest.approx(2.0)
    assert writer_word_gap([np.zeros(0)]) is None
    assert writer_word_gap([np.array([1.0])], leave_out=0) is None


def test_writer_word_gaps_of_a_split_are_each_writers_other_lines(subsets):
    with InkFile(subsets / "test" / "gt.h5") as f:
        lines = [f[s] for s in sorted(f.ids())]
    loo, whole = writer_word_gaps(lines, leave_out=True), writer_word_gaps(lines, leave_out=False)
    for k, line in enumerate(lines):
        mine = [j for j, o in enumerate(lines) if o.writer_id == line.writer_id]
        own = [space_gaps(lines[j].text, lines[j].xy, lines[j].char_index) for j in mine]
        others = np.concatenate([g for j, g in zip(mine, own) if j != k])
        assert loo[k] == pytest.approx(float(np.median(others)))
        assert whole[k] == pytest.approx(float(np.median(np.concatenate(own))))
    assert len(set(loo)) > len({s.writer_id for s in lines})  # the left-out line matters


def test_training_samples_carry_their_writers_gap_without_their_own(subsets):
    cfg = TrainConfig(seed=0, sentence_max_chars=12, val_writers=1)
    train, _, _, _ = open_data(subsets, cfg, cache=True)
    off = BatchSource(train, cfg, style_refs=2)
    on = BatchSource(train, cfg, style_refs=2, writer_word_gap=True)
    rows = train.readers["sentence"].texts()  # (line, offset, text) of every window
    windows = [r[0] for r in rows]
    assert len(set(windows)) < len(windows)  # some line is cut into overlapping windows
    for stream in ("char", "bigram", "sentence"):
        assert off.batch(3, stream, 0, 3).writer_word_gap is None
        batch = on.batch(3, stream, 0, 3)
        idx = on.indices(3, stream, 0, 3)
        names = {i: w for w, i in train.writer_int.items()}
        for k, (i, w) in enumerate(zip(idx, batch.writer_ids.tolist())):
            # the writer's lines, each space once (a window's gaps keyed by their position
            # in its line), the sample's own line left out
            gaps: dict[tuple[str, int], float] = {}
            for j in train.by_writer["sentence"][names[w]]:
                line, offset, text = rows[j]
                if stream == "sentence" and line == rows[i][0]:
                    continue
                spaces = [p for p, ch in enumerate(text) if ch == " "]
                for p, g in zip(spaces, train.word_gaps(j)):
                    gaps[line, offset + p] = g
            assert float(batch.writer_word_gap[k]) == pytest.approx(
                float(np.median(list(gaps.values()))), rel=1e-6)


def _model() -> CASHG:
    torch.manual_seed(0)
    m = CASHG(with_changes(TINY, relative_gap=True)).eval()
    with torch.no_grad():
        m.head.proj.bias[:4] = torch.tensor([3.0, 0.0, -1.5, -1.5])
        m.gap_unit.scale.fill_(0.4)
    return m


def _sample(m, gaps, use_cache=True, greedy=True):
    cps, mask = encode_texts(TEXTS)
    imgs = torch.rand(2, 3, 64, 64, generator=torch.Generator().manual_seed(1))[[0, 1, 1]]
    return sample(m, cps, mask, imgs, SamplingOptions(seed=3, max_char_points=6,
                                                      min_char_points=3, use_cache=use_cache,
                                                      greedy=greedy), writer_word_gap=gaps), imgs


@pytest.mark.parametrize("greedy", [True, False])
def test_sampling_reads_each_sentences_gap_cached_or_not(greedy):
    """Each sentence's gap reaches the sampler alike with and without the cache; rows 1 and 2
    share their references and differ by their gaps only, and so do their points."""
    m = _model()
    gaps = torch.tensor([0.3, 0.8, 0.3])
    (a, _), (b, _) = _sample(m, gaps, True, greedy), _sample(m, gaps, False, greedy)
    for i in range(len(TEXTS)):
        np.testing.assert_array_equal(a.char_index[i], b.char_index[i])
        np.testing.assert_allclose(a.deltas[i], b.deltas[i], atol=1e-5, rtol=0)
    other, _ = _sample(m, torch.tensor([0.3, 0.8, 0.8]), True, greedy)
    np.testing.assert_allclose(a.deltas[0], other.deltas[0], atol=1e-6, rtol=0)
    n = min(len(a.deltas[2]), len(other.deltas[2]))
    assert not np.allclose(a.deltas[2][:n], other.deltas[2][:n])


def test_a_model_without_the_option_ignores_the_gaps():
    torch.manual_seed(0)
    m = CASHG(TINY).eval()
    (a, _), (b, _) = _sample(m, torch.tensor([0.3, 0.8, 0.3])), _sample(m, None)
    for i in range(len(TEXTS)):
        np.testing.assert_array_equal(a.deltas[i], b.deltas[i])


def reread_batch(res, imgs: torch.Tensor, texts: list[str], gaps: list[float | None]):
    """The batch that teacher-forces sampled sentences ``res`` (their references ``imgs``
    (B, R, H, W) and writer gaps ``gaps``, None = unknown) again."""
    samples = []
    for i, text in enumerate(texts):
        pts = np.concatenate([res.deltas[i], res.pen[i][:, None]], 1)
        chars = [pts[res.char_index[i] == c] for c in range(len(text))]
        samples.append(SequenceSample(text, chars, imgs[i].numpy(), i, writer_word_gap=gaps[i]))
    return collate(samples)


def reread_modes(m, batch) -> torch.Tensor:
    """(B, S, T, 2) the modes ``m`` predicts teacher-forced on ``batch``, a space's later dy
    set to 0 as the sampler writes it (its pseudo-points lie at one height)."""
    with torch.no_grad():
        mode = most_probable_mean(m(batch).params)
    on_line = space_gap_points(batch.codepoints, batch.pen.shape[-1]) & batch.point_mask
    mode[..., 1] = torch.where(on_line, 0.0, mode[..., 1])
    return mode


def test_a_split_folders_writer_word_gap_is_the_median_of_all_its_lines(subsets):
    """``cashg generate --writer`` and the studio read a writer's gap from the lines beside
    its references: a test split's gt.h5, or a train split's windows (each space once, the
    training samples' figure without a line left out)."""
    from cashg.generation.split import folder_writer_word_gap

    with InkFile(subsets / "test" / "gt.h5") as f:
        lines = list(f)
    for writer in sorted({s.writer_id for s in lines}):
        mine = [s for s in lines if s.writer_id == writer]
        assert folder_writer_word_gap(subsets / "test", writer) == pytest.approx(float(np.median(
            np.concatenate([space_gaps(s.text, s.xy, s.char_index) for s in mine]))))
    train, _, _, _ = open_data(subsets, TrainConfig(seed=0, val_writers=1), cache=True)
    for writer in train.writers:
        assert folder_writer_word_gap(subsets / "train", writer) == pytest.approx(
            train.writer_word_gap(writer), rel=1e-5)
    assert folder_writer_word_gap(subsets / "test", "nobody") is None


def test_generate_sentences_passes_one_writers_gap_to_every_line():
    from cashg.generation.sampling import generate_sentences

    m = _model()
    imgs = torch.rand(3, 64, 64, generator=torch.Generator().manual_seed(1))
    opts = SamplingOptions(seed=3, max_char_points=6, min_char_points=3, greedy=True)
    lines = {g: generate_sentences(m, TEXTS[:2], imgs, opts, writer_word_gap=g) for g in (0.3, 0.9)}
    cps, mask = encode_texts(TEXTS[:2])
    want = sample(m, cps, mask, imgs[None].expand(2, -1, -1, -1), opts,
                  writer_word_gap=torch.full((2,), 0.3))
    for i in range(2):
        np.testing.assert_allclose(np.diff(lines[0.3][i].xy, axis=0),
                                   want.deltas[i][1:], atol=1e-5, rtol=0)
    assert not np.allclose(lines[0.3][0].xy, lines[0.9][0].xy)
