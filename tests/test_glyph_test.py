"""The glyph reader and the glyph test (``glyph_test@<experiment>``): pictures in the line's
frame, a reader that tells sizes apart, the per-class scores, the stage's outputs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from cashg.core.config.recognizer import GlyphReaderConfig
from cashg.evaluation.glyph_test import GlyphRow, glyph_metrics
from cashg.recognition.glyphs import (
    GlyphInk,
    GlyphReader,
    GlyphReaderError,
    _pad_points,
    glyph_points,
    point_step,
    rasterise_batch,
    train_glyph_reader,
)
from cashg.recognition.scoring import glyph_class

REPO = Path(__file__).resolve().parents[1]
CFG = GlyphReaderConfig()
PM, PU, EOC = 0, 1, 3


def _circle(radius: float, cx: float = 3.0, cy: float = 0.6, n: int = 24) -> GlyphInk:
    t = np.linspace(0, 2 * np.pi, n)
    xy = np.stack([cx + radius * np.cos(t), cy + radius * np.sin(t)], 1)
    return GlyphInk(xy, np.array([PM] * (n - 1) + [EOC]))


def _picture(glyph: GlyphInk, cfg: GlyphReaderConfig = CFG) -> np.ndarray:
    points = glyph_points(glyph.xy, glyph.pen, point_step(cfg))
    return rasterise_batch(*_pad_points([points]), cfg)[0, 0].numpy()


# --------------------------------------------------------------------------- pictures
def test_a_picture_keeps_the_line_frame_in_y_and_centres_x():
    """A horizontal stroke at y = 0.5 lights the row of y = 0.5 whatever its x in the line; a
    stroke lower in the line is lower in the picture; a pen lift draws no line."""
    def bar(x0: float, y: float) -> GlyphInk:
        xy = np.stack([np.linspace(x0, x0 + 0.4, 9), np.full(9, y)], 1)
        return GlyphInk(xy, np.array([PM] * 8 + [EOC]))

    a, b, low = _picture(bar(0.0, 0.5)), _picture(bar(7.3, 0.5)), _picture(bar(0.0, 0.9))
    np.testing.assert_allclose(a, b, atol=1e-5)  # x: centred on the glyph's box
    row = int((0.5 - CFG.top) / CFG.span * CFG.image_size)
    assert a[row].sum() > 5 and a[row - 4].sum() == 0 and a[row + 4].sum() == 0
    assert np.argmax(low.sum(1)) > np.argmax(a.sum(1)) + 5  # y down: lower in the line
    # two dots with a lift between them: no ink between them
    dots = GlyphInk(np.array([[0.0, 0.5], [0.6, 0.5]]), np.array([PU, EOC]))
    mid = _picture(dots)[row]
    assert mid[CFG.image_size // 2] == 0 and mid.sum() > 0


def test_a_picture_ignores_padding_and_ink_outside_the_window():
    far = GlyphInk(np.array([[0.0, 5.0], [0.1, 5.0]]), np.array([PM, EOC]))
    assert _picture(far).sum() == 0
    one = glyph_points(_circle(0.2).xy, _circle(0.2).pen, point_step(CFG))
    longer = np.concatenate([one, np.full((50, 2), 0.5, np.float32)])
    pts, valid = _pad_points([one, longer])
    pics = rasterise_batch(pts, valid, CFG)
    assert pics[0].sum() < pics[1].sum()  # the second's extra points are ink, padding is not
    np.testing.assert_allclose(pics[0, 0].numpy(), _picture(_circle(0.2)), atol=1e-6)


# --------------------------------------------------------------------------- the reader
@pytest.fixture(scope="module")
def reader():
    """A reader of three shapes that differ only in size or form: a small circle 'o', a large
    circle 'O' and a vertical bar 'l', each glyph at a random x in its line."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    glyphs = []
    for _ in range(60):
        x = float(rng.uniform(0, 20))
        glyphs.append(GlyphInk(_circle(0.15, x, 0.65).xy, _circle(0.15).pen, "o"))
        glyphs.append(GlyphInk(_circle(0.33, x, 0.5).xy, _circle(0.33).pen, "O"))
        ys = np.linspace(0.1, 0.85, 12)
        glyphs.append(GlyphInk(np.stack([np.full(12, x), ys], 1),
                               np.array([PM] * 11 + [EOC]), "l"))
    cfg = GlyphReaderConfig(iterations=120, batch_size=32, width=8)
    return train_glyph_reader(glyphs, cfg, progress=False)


def test_the_reader_tells_glyphs_apart_by_size_and_form(reader):
    tests = [GlyphInk(_circle(0.16, 11.0, 0.64).xy, _circle(0.16).pen, "o"),
             GlyphInk(_circle(0.31, -4.0, 0.52).xy, _circle(0.31).pen, "O"),
             GlyphInk(np.array([[2.0, 0.12], [2.03, 0.5], [2.05, 0.83]]),
                      np.array([PM, PM, EOC]), "l")]
    assert reader.read(tests) == ["o", "O", "l"]
    assert reader.read([GlyphInk(np.zeros((0, 2)), np.zeros(0, int))]) == [""]


def test_the_reader_round_trips_and_refuses_other_files(reader, tmp_path):
    path = tmp_path / "glyph_reader.pt"
    reader.save(path)
    again = GlyphReader.load(path)
    glyph = _circle(0.2)
    assert again.alphabet == reader.alphabet == "Olo"
    assert again.read([glyph]) == reader.read([glyph])
    torch.save({"format": "something-else"}, tmp_path / "other.pt")
    with pytest.raises(GlyphReaderError, match="other.pt: not a cashg-glyph-reader"):
        GlyphReader.load(tmp_path / "other.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a torch file")
    with pytest.raises(GlyphReaderError, match="junk.pt"):
        GlyphReader.load(tmp_path / "junk.pt")
    with pytest.raises(GlyphReaderError, match="none.pt: glyph reader file not found"):
        GlyphReader.load(tmp_path / "none.pt")


def test_training_is_deterministic_to_the_byte(tmp_path, monkeypatch):
    """The same training writes the same file, however long it took (no wall time in it: a
    rerun after a kill must leave the outputs as an uninterrupted run does)."""
    import itertools
    import time

    glyphs = [GlyphInk(_circle(r).xy, _circle(r).pen, c) for r, c in ((0.1, "a"), (0.3, "b"))]
    cfg = GlyphReaderConfig(iterations=5, batch_size=4, width=4)
    readers = []
    for tick in (1.0, 7.0):  # a slow machine and a slower one
        clock = itertools.count(0.0, tick)
        monkeypatch.setattr(time, "perf_counter", lambda clock=clock: next(clock))
        readers.append(train_glyph_reader(glyphs, cfg, progress=False))
    monkeypatch.undo()
    one, two = readers
    for a, b in zip(one.net.state_dict().values(), two.net.state_dict().values()):
        assert torch.equal(a, b)
    for name, reader in (("one", one), ("two", two)):  # torch names the archive after the file
        (tmp_path / name).mkdir()
        reader.save(tmp_path / name / "glyph_reader.pt")
    assert (tmp_path / "one/glyph_reader.pt").read_bytes() == \
        (tmp_path / "two/glyph_reader.pt").read_bytes()


# --------------------------------------------------------------------------- scores
@pytest.mark.parametrize("char, name", [("a", "lower"), ("Q", "upper"), ("7", "digit"),
                                        (":", "punct"), ("'", "punct")])
def test_glyph_class(char, name):
    assert glyph_class(char) == name


def test_glyph_metrics_are_shares_per_class_and_setting():
    rows = [GlyphRow("w", "A", "alone", "A", 30, False),
            GlyphRow("w", "B", "alone", "R", 100, True),
            GlyphRow("w", "A", "word", "A", 28, False),
            GlyphRow("w", "B", "word", "B", 40, False),
            GlyphRow("w", "A", "own", "A", 30, False),
            GlyphRow("w", "B", "own", "B", 31, False),
            GlyphRow("w", "a", "alone", "a", 20, False),
            GlyphRow("w", "a", "own", "o", 20, False)]
    m = glyph_metrics(rows)
    assert m["GLYPH_upper"] == 0.5 and m["GLYPH_upper_word"] == 1.0
    assert m["GLYPH_upper_own"] == 1.0 and m["GLYPH_upper_ratio"] == 0.5
    assert m["GLYPH_CAP_upper"] == 0.25  # one of the four generated capitals
    assert m["GLYPH_lower"] == 1.0 and m["GLYPH_lower_own"] == 0.0
    assert m["GLYPH_lower_ratio"] is None  # no ratio to a ceiling of 0
    assert m["GLYPH_digit"] is None and m["GLYPH_CAP_digit"] is None
    assert m["GLYPH_all"] == round(2 / 3, 4) and m["GLYPH_all_own"] == round(2 / 3, 4)


# --------------------------------------------------------------------------- the stage
@pytest.fixture(scope="module")
def glyph_run(tiny_train_subsets, tmp_path_factory):
    """A random tiny checkpoint over the tiny benchmark's characters that never ends a
    character, and a tiny reader trained on its train glyphs."""
    from cashg.core.subsets.readers import CharReader
    from cashg.model import CASHG
    from cashg.model.checkpoint import save_model_checkpoint
    from cashg.model.presets import TINY
    from cashg.training.data import char_inventory

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("glyph_test")
    inventory = char_inventory(tiny_train_subsets / "train")
    torch.manual_seed(0)
    model = CASHG(TINY)
    with torch.no_grad():  # pen down at every point: no character ends before the cap
        model.head.proj.bias[:4] = torch.tensor([8.0, 0.0, -8.0, -8.0])
    save_model_checkpoint(root / "model.pt", model, TINY, {"char_inventory": inventory})
    with CharReader(tiny_train_subsets / "train" / "char.h5") as r:
        glyphs = [GlyphInk(g.xy, g.pen, g.char) for g in (r[i] for i in range(len(r)))]
    train_glyph_reader(glyphs, GlyphReaderConfig(iterations=3, batch_size=8, width=4),
                       progress=False).save(root / "glyph_reader.pt")
    return {"root": root, "subsets": tiny_train_subsets}


def _params(tmp_path: Path, word: str = "n {}n") -> Path:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["generate"]["max_char_points"] = 6  # a random model rarely ends a character
    params["train"]["val_writers"] = 1
    params["glyph_test"] = {"word": word}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    return path


@pytest.mark.parametrize("writers", ["test", "held-out"])
def test_stage_writes_scores_rows_and_a_picture_per_writer(glyph_run, tmp_path, capsys,
                                                           writers):
    from cashg.core.subsets.readers import CharReader, StyleReader
    from cashg.evaluation.glyph_test import main

    out = tmp_path / "out"
    rc = main(["--checkpoint", str(glyph_run["root"] / "model.pt"),
               "--subsets", str(glyph_run["subsets"]),
               "--reader", str(glyph_run["root"] / "glyph_reader.pt"), "--out", str(out),
               "--params", str(_params(tmp_path)), "--writers", writers, "--threads", "1",
               "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "glyph test: class  alone" in err
    details = json.loads((out / "details.json").read_text())
    split = "test" if writers == "test" else "train"
    with StyleReader(glyph_run["subsets"] / split / "style.h5") as s:
        split_writers = [w for w, r in s.indices_by_writer().items() if len(r)]
    expected = split_writers if writers == "test" else split_writers[-1:]
    assert details["writers"] == expected
    with CharReader(glyph_run["subsets"] / split / "char.h5") as r:
        own = {(r[i].writer, r[i].char) for i in range(len(r)) if r[i].writer in expected}
    with open(out / "glyphs.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    alphabet = details["alphabet"]
    n_gen = len(expected) * len(alphabet)
    assert sum(r["setting"] == "alone" for r in rows) == n_gen
    assert sum(r["setting"] == "word" for r in rows) == n_gen
    assert {(r["writer"], r["char"]) for r in rows if r["setting"] == "own"} == own
    # the model never ends a character before the cap of 6 points
    assert all(r["capped"] == "1" for r in rows if r["setting"] != "own")
    assert all(int(r["points"]) == 6 for r in rows if r["setting"] != "own")
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["GLYPH_CAP_all"] == 1.0
    assert 0 <= metrics["GLYPH_all_own"] <= 1
    for w in expected:
        assert (out / "writers" / f"{w.replace(':', '_')}.png").stat().st_size > 1000


def test_a_word_template_needs_one_slot(tmp_path):
    from cashg.core.params import load_params

    for word in ("nn", "n{}{}n", "n{}}"):
        with pytest.raises(ValueError, match="glyph_test.word"):
            load_params(_params(tmp_path, word))
