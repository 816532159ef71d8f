"""Tests of the demo corpus generator: real on-disk formats, ground truth, styles, determinism."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from cashg.core.config.data import DemoConfig
from preprocessing.demo import brush_writer as bw
from preprocessing.demo.corpus import DEFECTS_FILE, SPLIT_FILES, generate_demo_corpus
from preprocessing.demo.glyphs import (
    CURSIVE_FAMILIES,
    PRINT_FAMILIES,
    load_family,
    load_font,
    retraced_share,
    retraces,
)
from preprocessing.demo.render import render_line
from preprocessing.demo.text import CORPUS_CHARACTERS, compose_sentence, glyph_lines
from preprocessing.demo.writers import sample_style

TINY = DemoConfig(seed=7, writers_per_layout=5, sentences_per_writer=8, lines_per_form_min=3,
                  lines_per_form_max=5, glyph_lines_per_writer=2, max_chars=40,
                  brush_resample_variants=True)
XML_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


class _RestrictedUnpickler(pickle.Unpickler):
    """Admits only numpy's array reconstruction machinery (the BRUSH files' contents)."""

    ALLOWED = {("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype")}

    def find_class(self, module: str, name: str):  # noqa: ANN201
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refused global {module}.{name}")
        return super().find_class(module, name)


def load_brush(path: Path) -> list:
    return _RestrictedUnpickler(io.BytesIO(path.read_bytes())).load()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    base = tmp_path_factory.mktemp("demo")
    summary = generate_demo_corpus(TINY, base / "iam", base / "brush")
    return base / "iam", base / "brush", summary


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def _strokes(path: Path) -> list[np.ndarray]:
    root = etree.parse(str(path), XML_PARSER).getroot()
    return [np.array([[int(p.get("x")), int(p.get("y")), float(p.get("time"))]
                      for p in s.iter("Point")]) for s in root.iter("Stroke")]


def test_iam_linestrokes_are_well_formed(corpus):
    iam, _, summary = corpus
    manifest = json.loads((iam / DEFECTS_FILE).read_text())
    truncated = {d["file"] for d in manifest["defects"] if d["kind"] == "truncated_xml"}
    files = sorted(iam.glob("lineStrokes/*/*/*.xml"))
    assert len(files) == summary["iam"]["lines"] and len(truncated) == 1
    for f in files:
        raw = f.read_bytes()
        rel = f.relative_to(iam).as_posix()
        assert raw.startswith(b'<?xml version="1.0" encoding="ISO-8859-1"?>\n')
        for line in raw.split(b"\n")[:-1]:
            assert line.endswith(b"\r") == (b"<Point " in line), (rel, line)
        if rel in truncated:
            with pytest.raises(etree.XMLSyntaxError):
                etree.parse(str(f), XML_PARSER)
            continue
        root = etree.parse(str(f), XML_PARSER).getroot()
        assert root.tag == "WhiteboardCaptureSession"
        desc = root.find("WhiteboardDescription")
        for tag in ("SensorLocation", "DiagonallyOppositeCoords", "VerticallyOppositeCoords",
                    "HorizontallyOppositeCoords"):
            assert desc.find(tag) is not None
        strokes = root.find("StrokeSet").findall("Stroke")
        assert strokes and all(s.get("colour") == "black" for s in strokes)
        times = []
        for s in strokes:
            pts = s.findall("Point")
            assert pts and s.get("start_time") == pts[0].get("time")
            assert s.get("end_time") == pts[-1].get("time")
            for p in pts:
                assert re.fullmatch(r"-?\d+", p.get("x")) and re.fullmatch(r"-?\d+", p.get("y"))
                assert re.fullmatch(r"\d+\.\d\d", p.get("time"))
                times.append(float(p.get("time")))
        assert np.all(np.diff(times) > 0)


def test_ascii_csr_counts_match_except_documented_defect(corpus):
    iam, _, _ = corpus
    manifest = json.loads((iam / DEFECTS_FILE).read_text())
    extra = {d["form"] for d in manifest["defects"] if d["kind"] == "extra_xml"}
    assert len(extra) == 1
    for txt in sorted(iam.glob("ascii/*/*/*.txt")):
        form = txt.stem
        raw = txt.read_bytes()
        crlf = b"\r\n" in raw
        assert crlf != (form in manifest["quirks"]["lf_ascii"])
        lines = raw.decode("iso-8859-1").splitlines()
        assert lines[0] == "OCR:" and "CSR:" in lines
        csr = lines[lines.index("CSR:") + 2:]
        assert lines[lines.index("CSR:") + 1] == ""
        n_xml = len(list(txt.parent.parent.parent.parent.glob(
            f"lineStrokes/{txt.parent.parent.name}/{txt.parent.name}/{form}-*.xml")))
        assert len(csr) == n_xml - (1 if form in extra else 0), form


def test_original_writer_ids_and_splits(corpus):
    iam, _, _ = corpus
    manifest = json.loads((iam / DEFECTS_FILE).read_text())
    missing = {d["file"] for d in manifest["defects"] if d["kind"] == "missing_general"}
    form_of_writer = {f: w for w, forms in manifest["writers"].items() for f in forms}
    for f in sorted(iam.glob("original/*/*/strokes*.xml")):
        rel = f.relative_to(iam).as_posix()
        form_node = etree.parse(str(f), XML_PARSER).getroot().find("General/Form")
        assert (form_node is None) == (rel in missing)
        if form_node is not None:
            letter = f.stem[len("strokes"):]
            assert form_of_writer[f"{f.parent.name}{letter}"] == form_node.get("writerID")
    splits = {}
    for name in SPLIT_FILES:
        lines = (iam / name).read_text().splitlines()
        assert all(ln.startswith(" ") and ln[1:] in form_of_writer for ln in lines)
        splits[name] = {form_of_writer[ln[1:]] for ln in lines}
    all_forms = [ln[1:] for n in SPLIT_FILES for ln in (iam / n).read_text().splitlines()]
    assert sorted(all_forms) == sorted(form_of_writer)
    for a in SPLIT_FILES:
        for b in SPLIT_FILES:
            assert a == b or not splits[a] & splits[b]


def test_segmentation_references_existing_points(corpus):
    iam, _, _ = corpus
    seg = json.loads((iam / "segmentation.json").read_text())
    manifest = json.loads((iam / DEFECTS_FILE).read_text())
    truncated = {Path(d["file"]).name for d in manifest["defects"] if d["kind"] == "truncated_xml"}
    assert seg
    for key, value in seg.items():
        segments = value["gt_segmentation"]["segments"]
        text = "".join(s["substring"] for s in segments)
        assert text == value["ctc_spike_symbols"]
        if key in truncated:
            continue
        form = key.rsplit("-", 1)[0]
        path = next(iam.glob(f"lineStrokes/*/*/{key}"))
        assert path.parent.name == re.sub(r"[a-z]$", "", form)
        strokes = _strokes(path)
        owner = [np.full(len(s), -1) for s in strokes]
        for c, s in enumerate(segments):
            if s["substring"] == " ":
                assert "inkRanges" not in s
                continue
            assert s["inkRanges"]
            for r in s["inkRanges"]:
                a, b = (r["startStroke"], r["startPoint"]), (r["endStroke"], r["endPoint"])
                assert a <= b and b[0] < len(strokes) and b[1] < len(strokes[b[0]])
                for k in range(a[0], b[0] + 1):
                    lo = a[1] if k == a[0] else 0
                    hi = b[1] if k == b[0] else len(strokes[k]) - 1
                    assert np.all(owner[k][lo:hi + 1] == -1)
                    owner[k][lo:hi + 1] = c
        assert all(np.all(o >= 0) for o in owner), key  # every point belongs to a character


def test_brush_pickles(corpus):
    _, brush, summary = corpus
    manifest = json.loads((brush / DEFECTS_FILE).read_text())
    assert len(manifest["known_bad"]) == 3
    writers = sorted(int(p.name) for p in brush.iterdir() if p.is_dir())
    assert writers == list(range(TINY.writers_per_layout))
    n = 0
    for f in sorted(brush.glob("*/*")):
        rel = f.relative_to(brush).as_posix()
        sentence, drawing, label = load_brush(f)
        assert isinstance(sentence, str) and drawing.ndim == 2 and drawing.shape[1] == 3
        assert label.shape[0] == len(drawing)
        n += "_resample" not in rel
        if rel in manifest["known_bad"]:
            assert label.shape[1] != len(sentence)
            continue
        assert label.shape[1] == len(sentence)
        assert np.all(label.sum(axis=1) == 1) and set(np.unique(label)) <= {0, 1}
        assert drawing[-1, 2] == 1 and set(np.unique(drawing[:, 2])) <= {0.0, 1.0}
        if "_resample" not in rel:
            assert drawing[:, 0].min() >= 0 and drawing[:, 0].max() <= bw.BOX_WIDTH
            assert drawing[:, 1].min() >= 0 and drawing[:, 1].max() <= bw.BOX_HEIGHT
            chars = label.argmax(axis=1)
            assert all(sentence[c] != " " for c in chars)
        else:
            gap = int(rel.rsplit("_resample", 1)[1])
            same = drawing[:-1, 2] == 0
            steps = np.hypot(*np.diff(drawing[:, :2], axis=0).T)[same]
            assert steps.max() <= gap + 1e-3
    assert n == summary["brush"]["drawings"]


def test_brush_has_isolated_glyph_lines(corpus):
    _, brush, _ = corpus
    per_writer = TINY.sentences_per_writer
    files = [load_brush(w / str(per_writer + k)) for w in sorted(brush.glob("[0-9]*"))
             for k in range(TINY.glyph_lines_per_writer)]
    assert [f[0] for f in files[:TINY.glyph_lines_per_writer]] == glyph_lines(
        TINY.glyph_lines_per_writer)
    for _, drawing, label in files:  # isolated: no stroke spans two characters
        stroke = np.concatenate([[0], np.cumsum(drawing[:-1, 2])])
        chars = label.argmax(axis=1)
        assert all(len(set(chars[stroke == k])) == 1 for k in np.unique(stroke))
    assert set("".join(glyph_lines(3)).replace(" ", "")) >= set("abcdefghijklmnopqrstuvwxyz")


def test_no_demo_glyph_retraces_itself():
    """Every family draws every character the corpus writes as a hand would: no stroke laid
    over another (a digit gone over four times has no natural end to learn)."""
    for family in CURSIVE_FAMILIES + PRINT_FAMILIES:
        font = load_family(family)
        retraced = {c: round(retraced_share(font[c].strokes + font[c].marks), 2)
                    for c in sorted(CORPUS_CHARACTERS) if retraces(font[c])}
        assert not retraced, (family, retraced)


def test_retrace_measure_finds_the_thickened_script_digits():
    raw = load_font("scripts")
    assert all(retraces(raw[d]) for d in "0123456789")
    assert len(raw["8"].strokes) > 3 and retraced_share(raw["8"].strokes) > 0.9
    kept = load_family("scripts")
    assert all(len(kept[d].strokes) <= 2 for d in "0123456789")
    assert kept["A"] is raw["A"] and kept["g"] is raw["g"]  # the family's own letters stay
    h = load_font("futural")["H"]  # strokes that only meet at a junction share little path
    assert retraced_share(h.strokes) < 0.15 and retraced_share(h.strokes[:1]) == 0.0


def test_refuses_foreign_pickles():
    with pytest.raises(pickle.UnpicklingError):
        _RestrictedUnpickler(io.BytesIO(pickle.dumps([print]))).load()


def test_joins_are_pen_down_boundaries():
    rng = np.random.default_rng(3)
    style = sample_style(rng, "iam")
    style = type(style)(**{**style.__dict__, "family": "scripts", "join_rate": 0.9,
                           "delay_rate": 0.5})
    line = render_line("Quite a little jumping fox, at night", style, rng, 1.5)
    assert line.joins
    for s in range(len(line.text) - 1):
        if line.text[s] == " " or line.text[s + 1] == " ":
            continue
        first = int(np.flatnonzero(line.char_index == s + 1)[0])
        prev = first - 1
        same_stroke = line.stroke_index[prev] == line.stroke_index[first]
        joined = s in line.joins
        assert joined == bool(same_stroke and line.char_index[prev] == s), (s, line.text[s:s + 2])
        if joined:
            assert line.text[s].isalpha() and line.text[s + 1].isalpha()
    # without delayed marks every character is one contiguous run ending at the join
    line = render_line("tiny little kittens", style, rng, 1.5, delayed_marks=False)
    for s in line.joins:
        idx = np.flatnonzero(line.char_index == s)
        nxt = np.flatnonzero(line.char_index == s + 1)[0]
        assert np.all(np.diff(idx) == 1) and idx[-1] + 1 == nxt
        assert line.stroke_index[idx[-1]] == line.stroke_index[nxt]


def _features(line) -> np.ndarray:
    """Mean character width and cursive join fraction of a rendered line."""
    letters = sum(c.isalpha() for c in line.text)
    pairs = sum(a.isalpha() and b.isalpha() for a, b in zip(line.text, line.text[1:]))
    width = np.ptp(line.points[:, 0]) / len(line.text)
    return np.array([width, len(line.joins) / max(pairs, 1), letters])


def test_writers_differ_and_are_consistent():
    styles = [sample_style(np.random.default_rng([1, w]), "iam") for w in range(12)]
    assert len({s.family for s in styles}) >= 2
    assert np.std([s.slant for s in styles]) > 0.03
    rng = np.random.default_rng(0)
    feats = []
    for s in styles[:4]:
        lines = [render_line(compose_sentence(rng, 30, 40), s, rng, 2.0) for _ in range(6)]
        feats.append(np.array([_features(ln) for ln in lines]))
    within = np.mean([f[:, 0].std() for f in feats])
    between = np.std([f[:, 0].mean() for f in feats])
    assert between > 1.5 * within  # widths: writers differ more than a writer's lines do
    for f, s in zip(feats, styles[:4]):  # each writer keeps its own join habit
        assert abs(f[:, 1].mean() - s.join_rate) < 0.2


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_sentences_in_range_and_rendered_completely(seed):
    rng = np.random.default_rng(seed)
    text = compose_sentence(rng, 20, 60)
    assert 20 <= len(text) <= 60 and text.isascii() and "%" not in text
    line = render_line(text, sample_style(rng, "brush"), rng, 3.0)
    inked = {i for i, c in enumerate(text) if c != " "}
    assert set(np.unique(line.char_index).tolist()) == inked
    assert np.all(np.diff(line.stroke_index) >= 0) and line.stroke_index[0] == 0


def test_text_covers_character_classes():
    rng = np.random.default_rng(11)
    chars = set("".join(compose_sentence(rng) for _ in range(400)))
    assert chars >= set("abcdefghijklmnopqrstuvwxyz")
    assert chars >= set("ABCDEFGHIJKLMNOPQRSTUVWXYZ") and chars >= set("0123456789")
    assert chars >= set(".,!?'\"():;-")


def test_deterministic_bytes(tmp_path):
    cfg = DemoConfig(seed=5, writers_per_layout=2, sentences_per_writer=3, lines_per_form_min=2,
                     lines_per_form_max=3, glyph_lines_per_writer=1)
    generate_demo_corpus(cfg, tmp_path / "a" / "iam", tmp_path / "a" / "brush")
    generate_demo_corpus(cfg, tmp_path / "b" / "iam", tmp_path / "b" / "brush", workers=2)
    for sub in ("iam", "brush"):
        assert _tree_hash(tmp_path / "a" / sub) == _tree_hash(tmp_path / "b" / sub)
    other = DemoConfig(**{**cfg.__dict__, "seed": 6})
    generate_demo_corpus(other, tmp_path / "c" / "iam", tmp_path / "c" / "brush")
    assert _tree_hash(tmp_path / "a" / "iam") != _tree_hash(tmp_path / "c" / "iam")
