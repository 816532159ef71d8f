"""Pictures of ink: cropped to the ink plus a margin, ``width`` pixels wide, smooth SVG paths."""

from __future__ import annotations

import re

import numpy as np
import pytest
from lxml import etree
from PIL import Image

from cashg.core.ink import InkSentence
from cashg.generation.curves import catmull_rom_beziers, dedupe
from cashg.generation.render import (
    MARGIN,
    STROKE_WIDTH,
    render_inkml,
    render_png,
    render_svg,
    stack_rows,
)

PM, PU, EOC = 0, 1, 3


def _sentence(text: str = "ab", shift=(3.0, -2.0)) -> InkSentence:
    """'a': a zigzag over the box (0, 0)-(2, 1), then a one-point 'b' at (1, 0.5); a space
    pseudo-point far outside the box must not count (``shift`` moves it all)."""
    pts = [[0, 0, PM], [0.5, 1, PM], [1, 0.2, PM], [1.5, 0.8, PM], [2, 0.4, EOC],
           [1, 0.5, EOC]]
    index = [0, 0, 0, 0, 0, 1]
    if text == "a b":
        pts.insert(5, [9.0, 9.0, PM])
        index = [0, 0, 0, 0, 0, 1, 2]
    points = np.array(pts, np.float32) + np.array([*shift, 0], np.float32)
    return InkSentence("s0", "w", text, points, np.array(index, np.int32))


def _dark(path) -> np.ndarray:
    """``(H, W)`` bool: the pixels that are ink (darker than mid grey)."""
    return np.asarray(Image.open(path).convert("L")) < 128


def test_png_is_cropped_to_the_ink_plus_the_margin_at_the_asked_width(tmp_path):
    # ink box 2 x 1 + 2 x 0.15 margin = 2.3 x 1.3 units; 460 px wide: 200 px / unit
    render_png([_sentence("a b")], tmp_path / "a.png", width=460)
    dark = _dark(tmp_path / "a.png")
    assert dark.shape == (260, 460)
    rows, cols = np.flatnonzero(dark.any(1)), np.flatnonzero(dark.any(0))
    edge = MARGIN * 200 - STROKE_WIDTH * 200 / 2  # the pen's edge at the ink box: 27.5 px
    for gap in (rows[0], cols[0], dark.shape[0] - 1 - rows[-1], dark.shape[1] - 1 - cols[-1]):
        assert edge - 2.5 <= gap <= edge + 1.5, gap
    assert dark[130, 230]  # the one-point 'b' is drawn as a dot


def test_png_height_follows_the_aspect_and_rows_share_one_scale(tmp_path):
    one = _sentence()
    two = InkSentence("s1", "w", "ab", one.points * np.float32([2, 2, 1]), one.char_index)
    render_png([one, two], tmp_path / "b.png", width=300)
    size = stack_rows([one, two]).size  # widest row 4.3, rows 1.3 + 2.3 high
    assert np.allclose(size, [4.3, 3.6], atol=1e-5)
    assert Image.open(tmp_path / "b.png").size == (300, round(300 * 3.6 / 4.3))
    render_png([one], tmp_path / "c.png", width=300, max_aspect=0.2)  # a runaway guard
    assert Image.open(tmp_path / "c.png").size == (300, 60)


def test_pictures_are_deterministic(tmp_path):
    for ext, render in ((".png", render_png), (".svg", render_svg)):
        render([_sentence()], tmp_path / f"x{ext}")
        render([_sentence()], tmp_path / f"y{ext}")
        assert (tmp_path / f"x{ext}").read_bytes() == (tmp_path / f"y{ext}").read_bytes()


def test_svg_is_smooth_paths_in_a_viewbox_cropped_to_the_ink(tmp_path):
    render_svg([_sentence("a b"), _sentence()], tmp_path / "a.svg", width=500)
    root = etree.parse(str(tmp_path / "a.svg"),
                       etree.XMLParser(resolve_entities=False, no_network=True)).getroot()
    ns = {"s": "http://www.w3.org/2000/svg"}
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    w, h = 2 + 2 * MARGIN, 2 * (1 + 2 * MARGIN)  # two rows of the 2 x 1 ink box
    assert [float(v) for v in root.get("viewBox").split()] == pytest.approx([0, 0, w, h])
    assert (root.get("width"), root.get("height")) == ("500", str(round(500 * h / w)))
    assert not root.findall(".//s:polyline", ns)
    paths = root.findall(".//s:path", ns)
    assert len(paths) == 2 and all(re.search(r"C[-\d]", p.get("d")) for p in paths)
    # 4 segments (5 points), the first point moved to the margin corner
    assert paths[0].get("d").startswith(f"M{MARGIN},{MARGIN} C")
    assert paths[0].get("d").count("C") == 4
    ends = [c.split()[-1] for c in paths[0].get("d").split("C")[1:]]
    assert ends[-1] == f"{2 + MARGIN},{0.4 + MARGIN}"  # the curve ends at the last point
    dots = root.findall(".//s:circle", ns)  # the one-point 'b'
    np.testing.assert_allclose([(float(d.get("cx")), float(d.get("cy"))) for d in dots],
                               [(1 + MARGIN, 0.5 + MARGIN), (1 + MARGIN, 1.5 + 3 * MARGIN)],
                               atol=1e-4)
    assert [t.text for t in root.findall(".//s:title", ns)] == ["a b", "ab"]


def test_catmull_rom_beziers_pass_through_the_points():
    line = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
    segments = catmull_rom_beziers(line)
    assert segments.shape == (3, 3, 2)
    np.testing.assert_allclose(segments[:, 2], line[1:])  # segment ends: the next points
    np.testing.assert_allclose(segments[1, :2, 0], [4 / 3, 5 / 3])  # evenly spaced: thirds
    corner = catmull_rom_beziers(np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]))
    assert corner[0, 1, 1] < 0  # smooth through the corner: the curve bends before it
    np.testing.assert_array_equal(dedupe(np.array([[0, 0], [0, 0], [1, 1], [1, 1]])),
                                  [[0, 0], [1, 1]])


def test_inkml_keeps_the_points_as_given(tmp_path):
    render_inkml([_sentence("a b")], tmp_path / "a.inkml")
    text = (tmp_path / "a.inkml").read_text()
    assert "<trace xml:id=\"t0\">3.00000 -2.00000, 3.50000 -1.00000," in text
    assert text.count("<trace ") == 2  # the zigzag and the dot; the space is no trace
