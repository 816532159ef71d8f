"""Training subsets: split rules, char/bigram/sentence/style samples, HDF5 round trip, readers."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cashg.core.config.data import (
    BenchmarkConfig,
    BigramSubsetConfig,
    CharSubsetConfig,
    SourceSplitConfig,
    StyleConfig,
    SubsetsConfig,
)
from cashg.core.ink import make_sentence, read_ink, write_ink
from cashg.core.params import build
from cashg.core.records import CURSIVE_EOC, EOC, PM, PU
from cashg.core.style_render import render_glyph
from cashg.core.subsets.readers import (
    BigramReader,
    CharReader,
    SentenceReader,
    StyleReader,
    one_per_writer_batch,
    to_deltas,
)
from preprocessing.review import ReviewReport
from preprocessing.stages import build_subsets as stage
from preprocessing.subsets.bigram_subset import build_bigram_table
from preprocessing.subsets.build import build_benchmark
from preprocessing.subsets.char_subset import build_char_table
from preprocessing.subsets.inputs import to_source_sentence
from preprocessing.subsets.sentence_subset import window_bounds
from preprocessing.subsets.splits import SplitError, WriterOverlapError, assign_splits
from preprocessing.subsets.synthetic import synthetic_corpus

KINDS = ("char", "bigram", "sentence", "style")


def _sentence(sid, writer, text, points_per_char, cursive=(), form_id=None):
    """A hand-made sentence: character c gets ``points_per_char[c]`` points on a line;
    ``cursive`` lists the positions whose last point is CURSIVE_EOC."""
    xy, pen, ci = [], [], []
    for c, n in enumerate(points_per_char):
        pts = np.stack([c + np.linspace(0, 0.5, n), np.full(n, 0.1 * (c % 3))], axis=1)
        p = np.full(n, PM)
        p[-1] = CURSIVE_EOC if c in cursive else EOC
        xy.append(pts)
        pen.append(p)
        ci.append(np.full(n, c))
    attrs = {"dataset": "t"} if form_id is None else {"dataset": "t", "form_id": form_id}
    return make_sentence(sid, writer, text, np.concatenate(xy), np.concatenate(pen),
                         np.concatenate(ci), **attrs)


def _bench(train=(0, 3), test=(4, 5)):
    return BenchmarkConfig({"brush": SourceSplitConfig("writer_range", train, test)})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A small benchmark built from synthetic sentences: 6 writers x 3 sentences."""
    root = tmp_path_factory.mktemp("subsets")
    inp = root / "brush.h5"
    write_ink(inp, synthetic_corpus("brush", 6, 3, seed=3, words=(3, 14)))
    cfg = build(SubsetsConfig, {"sentence": {"max_chars": 20, "stride_chars": 10},
                                "style": {"per_writer": 4}})
    stats = build_benchmark("toy", _bench(), cfg, {"brush": inp}, {}, root / "out",
                            progress=False)
    return root, inp, stats


def test_splits_are_writer_disjoint_and_gt_round_trips(built):
    root, inp, stats = built
    src = read_ink(inp)
    gt = read_ink(root / "out/test/gt.h5")
    assert {s.writer_id for s in gt.values()} == {"brush:4", "brush:5"}
    assert len(gt) == 6
    for sid, s in gt.items():
        orig = src[sid.removeprefix("brush:")]
        np.testing.assert_array_equal(s.points, orig.points)
        assert s.text == orig.text and s.attrs["source_sentence_id"] == orig.sentence_id
    train = set(SentenceReader(root / "out/train/sentence.h5").writers())
    test = set(SentenceReader(root / "out/test/sentence.h5").writers())
    assert train == {f"brush:{w}" for w in range(4)} and not train & test
    assert stats["splits"]["train"]["data"]["sentences"] == 12


def test_every_character_reads_back_from_sentence_windows(built):
    root, inp, _ = built
    src = {f"brush:{k}": v for k, v in read_ink(inp).items()}
    reader = SentenceReader(root / "out/train/sentence.h5")
    covered: dict[str, set[int]] = {}
    for i in range(len(reader)):
        w = reader[i]
        s = src[w.sentence_id]
        assert w.text == s.text[w.char_offset:w.char_offset + len(w.text)]
        assert len(w.text) <= 20
        for c in np.unique(w.char_index):
            sel = s.char_index == c + w.char_offset
            np.testing.assert_array_equal(w.xy[w.char_index == c], s.points[sel, :2])
            np.testing.assert_array_equal(w.pen[w.char_index == c], s.points[sel, 2])
            covered.setdefault(w.sentence_id, set()).add(int(c) + w.char_offset)
    train_ids = [k for k, v in src.items() if int(v.writer_id) <= 3]
    for sid in train_ids:
        text = src[sid].text
        assert {c for c, ch in enumerate(text) if not ch.isspace()} <= covered[sid]


def test_char_subset_glyphs_match_their_source(built):
    root, inp, _ = built
    src = {f"brush:{k}": v for k, v in read_ink(inp).items()}
    reader = CharReader(root / "out/train/char.h5")
    seen = set()
    for i in range(len(reader)):
        g = reader[i]
        s = src[g.sentence_id]
        assert s.text[g.char_pos] == g.char and not g.char.isspace()
        sel = s.char_index == g.char_pos
        np.testing.assert_array_equal(g.xy, s.points[sel, :2])
        assert g.pen[-1] in (CURSIVE_EOC, EOC)
        assert (g.writer, g.char) not in seen  # one representative per writer and char
        seen.add((g.writer, g.char))
    expected = {(f"brush:{s.writer_id}", ch) for s in src.values() if int(s.writer_id) <= 3
                for ch in s.text if not ch.isspace()}
    assert seen == expected


def test_representative_preference_order():
    # "a" isolated (5 pts), in "ab" (4), in "bab" with cursive joins (6), isolated long (20)
    sents = [
        _sentence("s1", "w", "x a", [4, 2, 5]),
        _sentence("s2", "w", "ab", [4, 3], cursive=(0,)),
        _sentence("s3", "w", "bab", [3, 6, 3], cursive=(1,)),
        _sentence("s4", "w", "a", [20]),
    ]
    ss = [to_source_sentence("t", s) for s in sents]

    def best(items):
        table = build_char_table(items, CharSubsetConfig(), ReviewReport("t", "t"))
        i = list(table.columns["char"]).index("a")
        return table.columns["sentence_id"][i], int(table.columns["context"][i])

    # isolated ones: s1 (5 points) and s4 (20); median of all a's = 5.5 -> s1
    assert best(ss) == ("t:s1", 0)
    assert best([ss[1], ss[2], ss[3]]) == ("t:s4", 0)  # isolated beats nearer-median
    assert best([ss[1], ss[2]]) == ("t:s2", 1)  # one side beats both sides
    # same context: fewer cursive joins first
    table = build_char_table([ss[1], ss[2]], CharSubsetConfig(glyphs_per_char=2),
                             ReviewReport("t", "t"))
    b = [i for i, ch in enumerate(table.columns["char"]) if ch == "b"]
    assert [int(table.columns["cursive"][i]) for i in b] == [0, 1]
    assert [int(table.columns["rank"][i]) for i in b] == [0, 1]


def test_bigram_window_contents():
    s = _sentence("s", "w", "ab c", [3, 4, 2, 5], cursive=(0,))
    src = to_source_sentence("t", s)
    rep = ReviewReport("t", "t")
    table = build_bigram_table([src], BigramSubsetConfig(), rep)
    assert list(zip(table.columns["prev_char"], table.columns["char"])) == [
        ("a", "b"), ("b", " "), (" ", "c")]
    assert list(table.columns["prev_len"]) == [3, 4, 2]
    assert list(table.columns["boundary_pen"]) == [CURSIVE_EOC, EOC, EOC]
    o = table.offsets
    np.testing.assert_array_equal(table.points["xy"][o[0]:o[1]], s.points[:7, :2])
    np.testing.assert_array_equal(table.points["xy"][o[2]:o[3]], s.points[7:14, :2])
    assert rep.seen == 3 and rep.kept == 3
    rep2 = ReviewReport("t", "t")
    table2 = build_bigram_table([src], BigramSubsetConfig(include_spaces=False), rep2)
    assert len(table2) == 1 and rep2.reasons() == {"space_pair_excluded": 2}
    rep2.check()


def test_window_bounds_fixed_example():
    text = "aaaa bbbb cccc dddd"
    n = np.ones(len(text), np.int64)
    starts = np.cumsum(np.concatenate([[0], n[:-1]]))
    ends = starts + n
    assert window_bounds(text, starts, ends, 40, 100, 5) == [(0, len(text))]
    assert window_bounds(text, starts, ends, 9, 100, 5) == [(0, 9), (5, 14), (10, 19)]
    # point limit: 7 points at most -> windows of one word (4 chars) with char cuts
    assert window_bounds(text, starts, ends, 40, 4, 5) == [(0, 4), (5, 9), (10, 14), (15, 19)]


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(st.text(alphabet="abcde", min_size=1, max_size=12), min_size=1, max_size=12),
    pts=st.integers(1, 6), max_chars=st.integers(3, 30), stride=st.integers(1, 20),
)
def test_sliding_windows_cover_every_character(words, pts, max_chars, stride):
    text = " ".join(words)
    counts = np.full(len(text), pts, np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    ends = starts + counts
    max_points = pts * max_chars
    bounds = window_bounds(text, starts, ends, max_chars, max_points, stride)
    covered = set()
    for a, b in bounds:
        assert 0 <= a < b <= len(text) and b - a <= max_chars
        assert ends[b - 1] - starts[a] <= max_points
        covered.update(range(a, b))
    assert {i for i, ch in enumerate(text) if ch != " "} <= covered
    assert [a for a, _ in bounds] == sorted({a for a, _ in bounds})


def test_style_images(built):
    root, _, _ = built
    r = StyleReader(root / "out/train/style.h5")
    assert len(r) == 4 * 4
    for w, idx in r.indices_by_writer().items():
        imgs = r.writer_images(w)
        assert imgs.shape == (4, 64, 64) and imgs.dtype == np.uint8 and len(idx) == 4
        assert (imgs.reshape(4, -1).max(axis=1) == 255).all()
    chars = CharReader(root / "out/train/char.h5")
    item = r[0]
    assert chars[item.glyph_index].char == item.char and chars[item.glyph_index].writer == item.writer


def test_render_respects_pen_up_and_aspect():
    cfg = StyleConfig()
    xy = np.array([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]])  # two vertical strokes
    img = render_glyph(xy, np.array([PM, PU, PM, EOC]), cfg)
    assert img.shape == (64, 64) and img[32, 4] > 200 and img[32, 59] > 200
    assert img[32, 32] == 0  # no line across the pen lift
    joined = render_glyph(xy, np.array([PM, PM, PM, EOC]), cfg)
    assert joined[32, 32] > 200  # the diagonal is drawn when the pen stays down
    flat = render_glyph(np.array([[0.0, 0.0], [1.0, 0.2]]), np.array([PM, EOC]), cfg)
    rows = np.nonzero(flat.max(axis=1))[0]
    assert rows.max() - rows.min() < 20  # aspect kept: a flat stroke stays flat
    dot = render_glyph(np.array([[0.3, 0.3]]), np.array([EOC]), cfg)
    assert dot.max() > 150 and (dot > 0).sum() < 20  # a small visible dot


def _iam_files(tmp_path, forms_by_split):
    root = tmp_path / "iam"
    root.mkdir()
    names = {"train": "trainset.txt", "validation": "testset_v.txt", "test": "testset_t.txt"}
    for split, forms in forms_by_split.items():
        (root / names[split]).write_text("".join(f" {f}\n" for f in forms))
    (root / "testset_f.txt").write_text("")
    return root


def test_iam_lists_split_and_overlap_is_reported(tmp_path):
    sents = [to_source_sentence("iam", _sentence(f"s{i}", w, "ab", [3, 3], form_id=f))
             for i, (w, f) in enumerate([("1", "a01-000u"), ("2", "a02-000"), ("3", "a03-001"),
                                         ("1", "a01-001"), ("4", "zzz")])]
    root = _iam_files(tmp_path, {"train": ["a01-000u", "a02-000"], "validation": ["a03-001"],
                                 "test": ["a01-001"]})
    rule = SourceSplitConfig(rule="iam_lists")
    with pytest.raises(WriterOverlapError, match="iam:1: train, test"):
        assign_splits({"iam": sents}, {"iam": rule}, {"iam": root}, ReviewReport("t", "iam"))
    rep = ReviewReport("t", "iam")
    rep.seen = len(sents)
    lenient = SourceSplitConfig(rule="iam_lists", on_writer_overlap="drop_from_eval")
    out = assign_splits({"iam": sents}, {"iam": lenient}, {"iam": root}, rep)
    assert [s.sentence_id for s in out["train"]] == ["iam:s0", "iam:s1"]
    assert [s.sentence_id for s in out["validation"]] == ["iam:s2"] and out["test"] == []
    assert rep.reasons() == {"form_not_in_split_lists": 1, "writer_in_train": 1}
    rep.check()


def test_split_definition_errors(tmp_path):
    sents = [to_source_sentence("b", _sentence("s", "7", "a", [2]))]
    with pytest.raises(WriterOverlapError, match="overlap"):
        assign_splits({"b": sents}, {"b": SourceSplitConfig(train_writers=(0, 10),
                                                            test_writers=(10, 20))},
                      {}, ReviewReport("t", "b"))
    with pytest.raises(SplitError, match="trainset.txt: IAM-OnDB split list not found"):
        assign_splits({"b": sents}, {"b": SourceSplitConfig(rule="iam_lists")},
                      {"b": tmp_path}, ReviewReport("t", "b"))
    root = _iam_files(tmp_path, {"train": ["x"], "validation": ["x"], "test": []})
    with pytest.raises(SplitError, match="form 'x' is in trainset.txt"):
        assign_splits({"b": sents}, {"b": SourceSplitConfig(rule="iam_lists")},
                      {"b": root}, ReviewReport("t", "b"))
    bad = [to_source_sentence("b", _sentence("s", "w7", "a", [2]))]
    with pytest.raises(SplitError, match="non-integer writer id 'w7'"):
        assign_splits({"b": bad}, {"b": SourceSplitConfig()}, {}, ReviewReport("t", "b"))


def test_source_files_split(tmp_path):
    def sent(i, writer, source_file):
        s = _sentence(f"s{i}", writer, "ab", [3, 3])
        s = make_sentence(s.sentence_id, s.writer_id, s.text, s.points[:, :2], s.points[:, 2],
                          s.char_index, dataset="t", source_file=source_file)
        return to_source_sentence("dw", s)

    sents = [sent(0, "1", "dw_training.npz"), sent(1, "2", "dw_training.npz"),
             sent(2, "1", "dw_validation.npz"), sent(3, "3", "dw_validation.npz"),
             sent(4, "4", "other.npz")]
    rule = SourceSplitConfig(rule="source_files", train_files=("*training*",),
                             test_files=("dw_validation.npz",))
    with pytest.raises(WriterOverlapError, match="dw:1: train, test"):
        assign_splits({"dw": sents}, {"dw": rule}, {}, ReviewReport("t", "dw"))
    rep = ReviewReport("t", "dw")
    rep.seen = len(sents)
    allow = SourceSplitConfig(rule="source_files", train_files=("*training*",),
                              test_files=("dw_validation.npz",), on_writer_overlap="allow")
    out = assign_splits({"dw": sents}, {"dw": allow}, {}, rep)
    assert [s.sentence_id for s in out["train"]] == ["dw:s0", "dw:s1"]
    assert [s.sentence_id for s in out["test"]] == ["dw:s2", "dw:s3"]
    assert rep.reasons() == {"file_not_in_split_patterns": 1}
    assert rep.reasons(("warning",)) == {"writer_in_several_splits": 1}
    rep.check()
    both = SourceSplitConfig(rule="source_files", train_files=("*",), test_files=("*.npz",))
    with pytest.raises(SplitError, match="matches the patterns of train and test"):
        assign_splits({"dw": sents}, {"dw": both}, {}, ReviewReport("t", "dw"))
    with pytest.raises(SplitError, match="needs train_files"):
        assign_splits({"dw": sents}, {"dw": SourceSplitConfig(rule="source_files")}, {},
                      ReviewReport("t", "dw"))


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_two_builds_are_byte_identical(built, tmp_path):
    root, inp, _ = built
    cfg = build(SubsetsConfig, {"sentence": {"max_chars": 20, "stride_chars": 10},
                                "style": {"per_writer": 4}})
    build_benchmark("toy", _bench(), cfg, {"brush": inp}, {}, tmp_path / "again", progress=False)
    first, second = _hashes(root / "out"), _hashes(tmp_path / "again")
    assert first == second and len(first) == 3 + 4 + 5


class _Recorder:
    """Wraps an h5py dataset and records every index used; refuses whole-dataset reads."""

    def __init__(self, ds, log):
        self._ds, self._log = ds, log

    def __getitem__(self, key):
        if key is Ellipsis or key == () or (isinstance(key, slice) and key == slice(None)):
            raise AssertionError(f"whole read of {self._ds.name}")
        self._log.append((self._ds.name, key))
        return self._ds[key]


@pytest.mark.parametrize("kind, cls", [("char", CharReader), ("bigram", BigramReader),
                                       ("sentence", SentenceReader), ("style", StyleReader)])
def test_readers_only_slice(built, kind, cls, monkeypatch):
    root, _, _ = built
    reader = cls(root / f"out/train/{kind}.h5")
    assert reader._file is None  # nothing held open after construction
    log: list = []
    original = cls._ds
    monkeypatch.setattr(cls, "_ds", lambda self, name: _Recorder(original(self, name), log))
    i = len(reader) // 2
    reader[i]
    reader[-1]
    for name, key in log:
        if isinstance(key, slice):
            assert key.stop - key.start <= 4000, (name, key)
        else:
            assert isinstance(key, int), (name, key)
    clone = pickle.loads(pickle.dumps(reader))  # as a DataLoader worker would get it
    assert clone._file is None
    monkeypatch.undo()
    np.testing.assert_array_equal(getattr(clone[i], "image", None) if kind == "style"
                                  else clone[i].xy,
                                  getattr(reader[i], "image", None) if kind == "style"
                                  else reader[i].xy)


def test_reader_rejects_wrong_kind_and_version(built, tmp_path):
    root, _, _ = built
    from cashg.core.subsets.schema import SubsetFormatError
    with pytest.raises(SubsetFormatError, match="holds a 'char' subset"):
        SentenceReader(root / "out/train/char.h5")
    copy = tmp_path / "c.h5"
    copy.write_bytes((root / "out/train/char.h5").read_bytes())
    with h5py.File(copy, "a") as f:
        f.attrs["schema_version"] = 99
    with pytest.raises(SubsetFormatError, match="schema_version 99"):
        CharReader(copy)


def test_one_per_writer_batch_and_deltas(built):
    root, _, _ = built
    reader = BigramReader(root / "out/train/bigram.h5")
    by_writer = reader.indices_by_writer()
    batch = one_per_writer_batch(by_writer, 8, np.random.default_rng(0))
    writers = [reader[int(i)].writer for i in batch]
    assert len(batch) == 4 and len(set(writers)) == 4
    xy = reader[0].xy
    np.testing.assert_allclose(np.cumsum(to_deltas(xy), axis=0), xy, atol=1e-5)


def _run_dsd_stage(tmp_path, repo_root, writer_split: str) -> int:
    """The subsets stage on a 6-writer synthetic BRUSH corpus, dsd's writer split replaced."""
    pre = tmp_path / "pre"
    write_ink(pre / "brush/sentences.h5", synthetic_corpus("brush", 6, 2, seed=5))
    ReviewReport("preprocess", "brush").write(pre / "brush/review.csv")  # nothing dropped
    params = (repo_root / "params.yaml").read_text()
    params = params.replace("train_writers: [0, 49], test_writers: [50, 59]", writer_split)
    (tmp_path / "params.yaml").write_text(params)
    return stage.main(["--benchmark", "dsd", "--out", str(tmp_path / "out"), "--params",
                       str(tmp_path / "params.yaml"), "--preprocess-dir", str(pre),
                       "--no-progress"])


def test_stage_command(tmp_path, repo_root):
    rc = _run_dsd_stage(tmp_path, repo_root, "train_writers: [0, 3], test_writers: [4, 5]")
    assert rc == 0
    for kind in KINDS:
        assert (tmp_path / f"out/train/{kind}.h5").is_file()
    assert (tmp_path / "out/test/gt.h5").is_file() and (tmp_path / "out/stats.md").is_file()
    missing = stage.main(["--benchmark", "dsd", "--out", str(tmp_path / "o2"), "--params",
                          str(tmp_path / "params.yaml"), "--preprocess-dir",
                          str(tmp_path / "none"), "--no-progress"])
    assert missing == 1
    with pytest.raises(SystemExit):
        stage.main(["--benchmark", "nope", "--out", str(tmp_path / "o"), "--params",
                    str(tmp_path / "params.yaml")])


def test_drops_are_reported_with_reasons():
    from cashg.core.config.data import SentenceSubsetConfig
    from preprocessing.subsets.sentence_subset import build_sentence_table

    # "b" owns no points: the sentence is dropped from the sentence subset, the glyph and the
    # two bigrams touching it are reported; counts reconcile
    s = make_sentence("s", "1", "abc", np.zeros((4, 2)), [PM, EOC, PM, EOC], [0, 0, 2, 2])
    src = [to_source_sentence("t", s)]
    reps = [ReviewReport("t", k) for k in ("c", "b", "s")]
    assert len(build_char_table(src, CharSubsetConfig(), reps[0])) == 2
    assert len(build_bigram_table(src, BigramSubsetConfig(), reps[1])) == 0
    assert len(build_sentence_table(src, SentenceSubsetConfig(), reps[2])) == 0
    for rep in reps:
        rep.check()
        assert rep.reasons() == {"char_without_points": {"c": 1, "b": 2, "s": 1}[rep.dataset]}


@pytest.mark.parametrize("train, test, split", [((0, 5), (90, 99), "test"),
                                                ((90, 99), (0, 5), "train")])
def test_empty_split_is_an_error_naming_benchmark_split_and_rule(tmp_path, train, test, split):
    """A split with 0 sentences is an error, never exit 0 with metrics that are all None."""
    inp = tmp_path / "brush.h5"
    write_ink(inp, synthetic_corpus("brush", 6, 2, seed=5))
    cfg = build(SubsetsConfig, {})
    with pytest.raises(SplitError, match=(
            rf"benchmark 'toy': split '{split}' has 0 sentences \(brush: rule writer_range,"
            rf" {split}_writers \[90, 99\]\)")):
        build_benchmark("toy", _bench(train, test), cfg, {"brush": inp}, {}, tmp_path / "out",
                        progress=False)
    assert not (tmp_path / "out" / "train").exists()  # nothing half-written


def test_empty_split_stage_exits_1(tmp_path, repo_root, capsys):
    rc = _run_dsd_stage(tmp_path, repo_root, "train_writers: [0, 5], test_writers: [150, 169]")
    assert rc == 1
    err = capsys.readouterr().err
    assert "benchmark 'dsd': split 'test' has 0 sentences (brush: rule writer_range," in err
    assert "writer_outside_split" not in err  # every writer landed in train
