"""Runaway ink (cashg.evaluation.runaway): lines whose drawn ink leaves the line."""

import numpy as np
import pytest

from cashg.core.ink import make_sentence
from cashg.evaluation.runaway import count_runaway, line_runaway
from preprocessing.subsets.synthetic import synthetic_corpus

PM, PU, EOC = 0, 1, 3


def _letter(x0):
    """A small letter as a dense loop (40 points, 0.2 to 0.8 high), starting at ``x0``."""
    t = np.linspace(0, 2 * np.pi, 40)
    return np.stack([x0 + 0.15 * (1 - np.cos(t)), 0.5 - 0.3 * np.sin(t)], 1).tolist()


def _line(sid, extra_xy=(), space_y=0.5):
    """'ab c': two letters, a space, one letter; ``extra_xy`` appended to c's stroke."""
    xy = [*_letter(0.0), *_letter(0.35), [0.7, space_y], [1.0, space_y], *_letter(1.0),
          *extra_xy]
    pen = [PM] * 39 + [EOC] + [PM] * 39 + [EOC] + [PM, EOC] + [PM] * (40 + len(extra_xy))
    pen[-1] = EOC
    ci = [0] * 40 + [1] * 40 + [2, 2] + [3] * (40 + len(extra_xy))
    return make_sentence(sid, "w", "ab c", np.array(xy), np.array(pen), np.array(ci))


def test_a_line_within_its_band_does_not_run_away():
    assert line_runaway(_line("ok")) is None


def test_ink_far_above_the_line_runs_away_and_says_how_far():
    why = line_runaway(_line("high", extra_xy=[[1.3, -2.8]]))
    assert why is not None and "line heights from the line's median height" in why
    assert line_runaway(_line("high"), band=2.0) is None


def test_a_very_long_stroke_runs_away():
    # a stroke sweeping right and back along the line: never off the band, 20 heights long
    sweep = [[1.0 + 10.0 * (k % 2), 0.5] for k in range(1, 3)]
    why = line_runaway(_line("long", extra_xy=sweep))
    assert why is not None and "stroke" in why and "long" in why
    assert line_runaway(_line("long", extra_xy=sweep), max_stroke=60.0) is None


def test_a_line_is_measured_in_its_own_heights_whatever_its_units():
    # an imported method's lines in pixels: the same verdicts as in height-1 units
    def scaled(s, k):
        return make_sentence(s.sentence_id, s.writer_id, s.text, s.xy * k, s.pen, s.char_index)

    for line in (_line("ok"), _line("high", extra_xy=[[1.3, -2.8]])):
        assert (line_runaway(scaled(line, 66.0)) is None) == (line_runaway(line) is None)
    assert line_runaway(scaled(_line("ok"), 66.0)) is None


def test_space_pseudo_points_are_not_ink():
    # the space's two points far below the line: not drawn, so not a runaway
    assert line_runaway(_line("space", space_y=-9.0)) is None


def test_count_reconciles_and_names_each_line():
    lines = [_line("a"), _line("b", extra_xy=[[1.3, 5.0]]), _line("c")]
    count = count_runaway(lines)
    assert (count.lines, count.runaway) == (3, 1)
    assert list(count.reasons) == ["b"]
    assert count.metrics() == {"RUNAWAY": 1, "RUNAWAY_share": pytest.approx(1 / 3)}
    assert count_runaway([]).share is None


def test_the_demo_generators_lines_never_run_away():
    # real-format synthetic lines, height-normalised as the subsets store them
    lines = synthetic_corpus("brush", 3, 4, seed=1)
    normalised = []
    for s in lines:
        xy = s.xy.astype(np.float64)
        xy = (xy - xy.min(0)) / np.ptp(xy[:, 1])
        normalised.append(make_sentence(s.sentence_id, s.writer_id, s.text, xy, s.pen,
                                        s.char_index))
    assert count_runaway(normalised).runaway == 0
