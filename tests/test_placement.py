"""Placement metrics (cashg/metrics/placement.py): baseline drift and word gaps of known size."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cashg.core.ink import make_sentence
from cashg.evaluation.evaluate import EvaluationOptions, evaluate
from cashg.metrics.placement import (
    MIN_DRIFT_CHARS,
    letter_size_ratio,
    line_placement,
    summarize_placement,
    summarize_sets,
)

PM, PU, EOC = 0, 1, 3


def _line(text, slope=0.0, gap=0.6, char_w=0.4, height=0.5, walk=None, seed=0):
    """A line of letters drawn as small boxes ``height`` tall and ``char_w`` wide, 0.1 apart
    inside a word and ``gap`` apart between words (ink edge to ink edge), their centres on
    ``y = 0.5 + slope * x`` (plus ``walk[k]`` for the k-th letter). Spaces are two
    pseudo-points. Returns (xy (N, 2), pen (N,), char_index (N,))."""
    rng = np.random.default_rng(seed)
    xy, pen, ci = [], [], []
    x = 0.0
    k = 0
    for s, ch in enumerate(text):
        if ch == " ":
            xy += [[x, 0.5], [x + gap, 0.5]]
            pen += [PM, PU]
            ci += [s, s]
            x += gap
            continue
        if s > 0 and text[s - 1] != " ":
            x += 0.1
        cy = 0.5 + slope * (x + char_w / 2) + (0.0 if walk is None else walk[k])
        box = np.array([[0, -0.5], [1, -0.5], [1, 0.5], [0, 0.5], [0.5, 0.0]])
        pts = np.column_stack([x + char_w * box[:, 0], cy + height * box[:, 1]])
        pts += rng.normal(0, 1e-3, pts.shape) * [0, 1]
        xy += pts.tolist()
        pen += [PM] * (len(pts) - 1) + [EOC]
        ci += [s] * len(pts)
        x += char_w
        k += 1
    return np.array(xy), np.array(pen), np.array(ci)


def test_a_straight_line_has_no_drift_and_its_gaps_are_measured():
    xy, _, ci = _line("abc defg hi", gap=0.6, height=0.5)
    place = line_placement("abc defg hi", xy, ci)
    assert place.char_height == pytest.approx(0.5, abs=0.01)
    assert place.drift == pytest.approx(0.0, abs=0.01)
    assert place.wander == pytest.approx(0.0, abs=0.01)
    # two gaps of 0.6 ink units = 1.2 character heights
    np.testing.assert_allclose(place.gaps, [1.2, 1.2], atol=0.02)
    assert place.median_gap == pytest.approx(1.2, abs=0.02)
    assert place.n_chars == 9


def test_letters_drawn_taller_shrink_the_gap_ratio_and_the_size_ratio_says_so():
    """The same gaps in ink units, letters 1.25 times as tall: the gaps, in each line's own
    character heights, read as 0.8 of the truth, and the letter-size ratio is 1.25 (the median
    over the lines that have letters on both sides)."""
    lines = []
    for i, text in enumerate(["abc defg hi", "ab cd", "xy zw v"]):
        truth = line_placement(text, *_line(text, gap=0.6, height=0.4, seed=i)[::2])
        tall = line_placement(text, *_line(text, gap=0.6, height=0.5, seed=i)[::2])
        lines.append((f"l{i}", tall, truth))
    assert summarize_placement(lines).gap_ratio == pytest.approx(0.8, abs=0.01)
    assert letter_size_ratio(lines) == pytest.approx(1.25, abs=0.01)
    no_ink = line_placement("a b", np.zeros((0, 2)), np.zeros(0, np.int64))
    assert letter_size_ratio(lines + [("empty", no_ink, lines[0][2])]) == \
        pytest.approx(1.25, abs=0.01)
    assert letter_size_ratio([]) is None


def test_a_sloping_line_drifts_by_its_rise_in_character_heights():
    text = "abcdefghijklmnop"
    xy, _, ci = _line(text, slope=0.05, height=0.5)
    place = line_placement(text, xy, ci)
    centres_x = 0.2 + 0.5 * np.arange(len(text))  # a letter every 0.5 units
    rise = 0.05 * (centres_x[-1] - centres_x[0])
    assert place.drift == pytest.approx(rise / 0.5, rel=0.02)
    assert place.wander == pytest.approx(0.0, abs=0.01)
    # the sign does not matter: a line that climbs drifts as much
    up = line_placement(text, *_line(text, slope=-0.05, height=0.5)[::2])
    assert up.drift == pytest.approx(place.drift, rel=0.01)


def test_a_line_that_wanders_and_returns_has_small_drift_but_wander():
    text = "abcdefghijkl"
    walk = 0.6 * np.sin(np.linspace(0, np.pi, len(text)))  # down by 0.6 and back up
    place = line_placement(text, *_line(text, walk=walk)[::2])
    assert place.drift < 0.05
    assert place.wander > 0.3


def test_drift_and_gaps_do_not_depend_on_the_ink_units():
    text = "ab cd efg"
    xy, _, ci = _line(text, slope=0.1, gap=0.8)
    a = line_placement(text, xy, ci)
    b = line_placement(text, xy * 37.5 + [100.0, -20.0], ci)
    assert b.drift == pytest.approx(a.drift, rel=1e-9)
    np.testing.assert_allclose(b.gaps, a.gaps, rtol=1e-9)


@settings(max_examples=40, deadline=None)
@given(scale=st.floats(0.01, 1e3), dx=st.floats(-1e3, 1e3), dy=st.floats(-1e3, 1e3),
       slope=st.floats(-0.3, 0.3))
def test_placement_is_invariant_to_translation_and_scale(scale, dx, dy, slope):
    text = "abc de"
    xy, _, ci = _line(text, slope=slope)
    a = line_placement(text, xy, ci)
    b = line_placement(text, xy * scale + [dx, dy], ci)
    assert b.drift == pytest.approx(a.drift, rel=1e-6, abs=1e-9)
    np.testing.assert_allclose(b.gaps, a.gaps, rtol=1e-6, atol=1e-9)


def test_words_that_overlap_give_negative_gaps():
    text = "ab cd"
    xy, _, ci = _line(text, gap=0.6)
    second = ci >= 3
    xy[second, 0] -= 1.0  # the second word starts 0.4 left of the first word's right edge
    place = line_placement(text, xy, ci)
    assert place.gaps[0] == pytest.approx(-0.4 / 0.5, abs=0.02)


def test_too_few_characters_give_no_drift_and_one_word_no_gap():
    text = "ab"
    assert len(text) < MIN_DRIFT_CHARS
    place = line_placement(text, *_line(text)[::2])
    assert place.drift is None and place.wander is None
    assert len(place.gaps) == 0 and place.median_gap is None


def test_summary_compares_the_same_lines_and_names_the_lines_left_out():
    text = "abcdef ghij"
    straight = line_placement(text, *_line(text, gap=0.5)[::2])
    drifting = line_placement(text, *_line(text, slope=0.1, gap=0.25)[::2])
    short = line_placement("ab", *_line("ab")[::2])
    summary = summarize_placement([("s1", drifting, straight), ("s2", drifting, straight),
                                   ("s3", short, straight)])
    assert summary.lines == 3 and summary.drift_lines == 2 and summary.gap_lines == 2
    assert summary.drift == pytest.approx(drifting.drift)
    assert summary.drift_gt == pytest.approx(straight.drift)
    assert summary.gap_ratio == pytest.approx(0.5, abs=0.02)
    assert set(summary.skipped) == {"s3"}
    assert "generated side" in summary.skipped["s3"]
    m = summary.metrics()
    assert m["DRIFT_ratio"] == pytest.approx(drifting.drift / straight.drift)
    assert list(m) == ["DRIFT", "DRIFT_gt", "DRIFT_ratio", "GAP", "GAP_gt", "GAP_ratio"]


def test_new_text_compares_with_other_real_lines():
    text = "abcdef ghij"
    gen = line_placement(text, *_line(text, gap=0.3)[::2])
    ref = line_placement("klm nop qrs", *_line("klm nop qrs", gap=0.6)[::2])
    summary = summarize_sets([("n1", gen)], [ref, ref])
    assert summary.gap_ratio == pytest.approx(0.5, abs=0.02)
    assert summary.drift_lines == 1 and summary.skipped == {}


def test_evaluate_reports_placement_per_line_and_overall():
    """evaluate: a generated line twice as far apart between words as its ground truth and
    sloping where the ground truth is straight."""
    text = "abcdefgh ijklm nopq"
    xy_g, pen_g, ci_g = _line(text, gap=0.5)
    xy_p, pen_p, ci_p = _line(text, gap=1.0, slope=0.08)
    gt = {"s0": make_sentence("s0", "w0", text, xy_g, pen_g, ci_g)}
    pred = {"s0": make_sentence("s0", "w0", text, xy_p, pen_p, ci_p)}
    r = evaluate(gt, pred, EvaluationOptions(protocol="dsd"))
    assert r.metrics["GAP_ratio"] == pytest.approx(2.0, rel=0.03)
    assert r.metrics["DRIFT_gt"] == pytest.approx(0.0, abs=0.01)
    assert r.metrics["DRIFT"] > 1.0
    row = r.sentences.iloc[0]
    assert row["gap_ratio"] == pytest.approx(2.0, rel=0.03)
    assert row["drift"] == pytest.approx(r.metrics["DRIFT"])
    assert r.details["placement"]["drift_lines"] == 1
    assert "character height" in r.details["placement"]["definition"]
