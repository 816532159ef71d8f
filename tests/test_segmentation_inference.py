"""Character segmentation inferred by CTC forced alignment (cashg.baselines.segmentation)."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from cashg.baselines.segmentation import (
    agreement_counts,
    cover_characters,
    forced_alignment,
    frame_characters,
    infer_segmentation,
    normalised_line,
    point_frames,
    point_positions,
    pooled_agreement,
    segmentation_agreement,
    snap_to_lifts,
    stroke_height,
)
from cashg.core.config.recognizer import RecognizerFeatureConfig, RecognizerModelConfig
from cashg.core.ink import make_sentence, write_ink
from cashg.recognition.ctc import Alphabet, collapse
from cashg.recognition.features import char_height, normalise_line, resample_strokes
from cashg.recognition.model import RecognizerNet
from cashg.recognition.recognizer import Recognizer

REPO = Path(__file__).resolve().parents[1]
PM, PU, CE, EOC = 0, 1, 2, 3
FEATURES = RecognizerFeatureConfig(point_spacing=0.15)


def _log_probs(rows) -> np.ndarray:
    """(T, C) log-softmax of hand-made scores."""
    x = np.asarray(rows, np.float64)
    return x - np.log(np.exp(x).sum(axis=1, keepdims=True))


def _labels(frame_targets: np.ndarray, targets) -> np.ndarray:
    """The class path of an alignment (blank 0 where the frame's target is -1)."""
    t = np.r_[np.asarray(targets, np.int64), 0]  # [-1] -> the blank
    return np.where(frame_targets >= 0, t[np.maximum(frame_targets, 0)], 0)


# --------------------------------------------------------------------------- forced alignment
def test_forced_alignment_follows_a_known_best_path():
    # classes: blank, a, b; the frames clearly read "- a a - b -"
    hi, lo = 5.0, 0.0
    lp = _log_probs([[hi, lo, lo], [lo, hi, lo], [lo, hi, lo], [hi, lo, lo], [lo, lo, hi],
                     [hi, lo, lo]])
    assert forced_alignment(lp, [1, 2]).tolist() == [-1, 0, 0, -1, 1, -1]
    # forced to read "b a": the path must emit b before a, whatever the frames prefer
    path = forced_alignment(lp, [2, 1])
    assert collapse(_labels(path, [2, 1])) == [2, 1]
    # forced to read "b" alone: the confident a-frames become blank or b
    path = forced_alignment(lp, [2])
    assert collapse(_labels(path, [2])) == [2] and set(path.tolist()) <= {-1, 0}


@pytest.mark.parametrize("targets", [[1, 2], [1, 1], [2, 1, 2], [1], []])
def test_forced_alignment_is_the_best_path_of_exactly_the_targets(targets):
    """Brute force over every class path of 5 frames: the alignment reads the targets and
    scores as well as the best path that does."""
    rng = np.random.default_rng(len(targets))
    lp = _log_probs(rng.normal(0, 2, (5, 3)))
    best = max(sum(lp[t, c] for t, c in enumerate(p))
               for p in itertools.product(range(3), repeat=5) if collapse(p) == targets)
    path = forced_alignment(lp, targets)
    labels = _labels(path, targets)
    assert collapse(labels) == list(targets)
    assert sum(lp[t, c] for t, c in enumerate(labels)) == pytest.approx(best)
    emitted = path[path >= 0]
    assert (np.diff(emitted) >= 0).all() and set(emitted.tolist()) == set(range(len(targets)))


def test_repeated_labels_need_a_blank_between_them():
    lp = _log_probs(np.zeros((3, 2)))  # every path equally likely
    assert forced_alignment(lp, [1, 1]).tolist() == [0, -1, 1]
    lp = _log_probs([[0.0, 9.0]] * 4)  # the frames all say "a"; "aa" still needs a blank
    path = forced_alignment(lp, [1, 1])
    assert (path == -1).sum() >= 1 and collapse(_labels(path, [1, 1])) == [1, 1]


def test_too_few_frames_is_a_clear_error():
    with pytest.raises(ValueError, match="2 frames cannot hold 2 CTC targets.*at least 3"):
        forced_alignment(_log_probs(np.zeros((2, 2))), [1, 1])
    with pytest.raises(ValueError, match="1 frames cannot hold 2 CTC targets"):
        forced_alignment(_log_probs(np.zeros((1, 3))), [1, 2])
    with pytest.raises(ValueError, match="targets must be classes 1..2"):
        forced_alignment(_log_probs(np.zeros((4, 3))), [0, 1])


def test_impossible_classes_do_not_break_the_path():
    with np.errstate(divide="ignore"):  # -inf entries
        lp = np.log(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))
    path = forced_alignment(lp, [2])  # "b" has probability 0 everywhere, but must be read
    assert collapse(_labels(path, [2])) == [2]


# --------------------------------------------------------------------------- frames -> points
def test_blank_and_space_frames_belong_to_the_character_before_them():
    text = "ab cd"
    frames = np.array([-1, -1, 0, -1, 1, 1, -1, 2, -1, 3, -1, 4, -1])
    assert frame_characters(frames, text).tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 1, 3, 3, 4, 4]
    # a leading space is read but owns nothing; the frames before the first drawn emission
    # belong to the first drawn character
    assert frame_characters(np.array([0, -1, 1, 2]), " ab").tolist() == [1, 1, 1, 2]
    with pytest.raises(ValueError, match="no drawn"):
        frame_characters(np.array([0]), " ")


def test_original_points_map_to_their_resampled_positions():
    xy = np.array([[0, 0], [0.5, 0], [2, 0],  # stroke of length 2: 3 points at spacing 1
                   [5, 5],  # a dot: one point
                   [6, 0], [6, 0]], float)  # zero length: its two ends
    lift = np.array([False, False, True, True, False, False])  # last lift flag not needed
    out, out_lift = resample_strokes(xy, lift, 1.0)
    assert len(out) == 6
    pos = point_positions(xy, lift, 1.0)
    assert pos.tolist() == pytest.approx([0, 0.5, 2, 3, 4, 5])
    np.testing.assert_allclose(out[np.round(pos).astype(int)][[0, 2, 3, 4, 5]],
                               xy[[0, 2, 3, 4, 5]])  # the points a position names
    # an arc-length resampling: a point a third of the way along sits a third of the way
    xy2 = np.array([[0, 0], [1, 0], [3, 0]], float)
    assert point_positions(xy2, np.array([0, 0, 1], bool), 1.0).tolist() == \
        pytest.approx([0, 1, 3])
    assert point_positions(xy2, np.array([0, 0, 1], bool), 0.0).tolist() == [0, 1, 2]


def test_points_fall_in_the_frame_centred_nearest_them():
    pos = np.array([0, 1.9, 2.0, 5.9, 6.0, 100.0])
    assert point_frames(pos, 3, 4).tolist() == [0, 0, 1, 1, 2, 2]
    assert point_frames(pos, 3, 1).tolist() == [0, 2, 2, 2, 2, 2]


def test_frame_centres_are_those_of_the_network():
    """The convolution blocks centre frame t on input point t * downsample: an impulse at
    point 4 * t0 (positive weights, untrained BatchNorm = identity in eval mode) spreads
    symmetrically around frame t0, the frame point_frames gives that point."""
    torch.manual_seed(0)
    net = RecognizerNet(RecognizerModelConfig(conv_channels=4, hidden=4, layers=1,
                                              downsample=4), 3).eval()
    with torch.no_grad():
        for block in net.convs:
            block[0].weight.fill_(0.1)
        x = torch.zeros(1, 4, 64)
        x[0, :, 40] = 1.0
        for block in net.convs:
            x = block(x)
    response = x[0].sum(0).numpy()
    hit = np.flatnonzero(response > 1e-9)
    assert len(response) == 16 and hit.min() + hit.max() == 2 * 10
    assert point_frames(np.array([40.0]), 16, 4).tolist() == [10]


# --------------------------------------------------------------------------- clean-up
def test_every_character_gets_a_point_by_the_least_change():
    text = "ab cd"  # drawn characters 0, 1, 3, 4
    ci = np.array([0, 0, 0, 0, 3, 3, 3, 4, 4, 4])  # "b" got no point
    assert cover_characters(ci, text).tolist() == [0, 0, 0, 1, 3, 3, 3, 4, 4, 4]
    ci = np.array([0, 0, 0, 0, 0, 0, 0, 0, 0, 0])  # only "a": the others take the tail
    assert cover_characters(ci, text).tolist() == [0, 0, 0, 0, 0, 0, 0, 1, 3, 4]
    covered = np.array([0, 1, 1, 3, 4])
    assert cover_characters(covered, text).tolist() == covered.tolist()  # unchanged


def test_cover_makes_labels_monotone_and_handles_too_few_points():
    text = "abc"
    assert cover_characters(np.array([0, 2, 1, 1, 2]), text).tolist() == [0, 1, 2, 2, 2]
    # two points for three characters: monotone, one character necessarily empty
    assert cover_characters(np.array([2, 0]), text).tolist() == [2, 2]
    rng = np.random.default_rng(0)
    for _ in range(200):
        text = "".join(rng.choice(list("ab "), rng.integers(1, 9)))
        if not text.strip():
            continue
        drawn = [k for k, ch in enumerate(text) if ch != " "]
        n = int(rng.integers(len(drawn), 20))
        ci = cover_characters(np.sort(rng.choice(drawn, n)), text)
        assert (np.diff(ci) >= 0).all() and set(ci.tolist()) == set(drawn)


def test_character_starts_move_to_the_pen_down_before_their_emission():
    text = "ab"
    lift = np.zeros(10, bool)
    lift[[4, 9]] = True  # strokes 0..4 and 5..9
    point_frame = np.repeat(np.arange(5), 2)  # two points per frame
    frame_targets = np.array([0, -1, -1, -1, 1])  # "a" at frame 0, "b" emitted at frame 4
    ci = cover_characters(frame_characters(frame_targets, text)[point_frame], text)
    assert ci.tolist() == [0] * 8 + [1] * 2
    # the pen came down at point 5 (frame 2), within 2 frames before b's emission
    snapped = snap_to_lifts(ci, lift, point_frame, frame_targets, text, window=2)
    assert snapped.tolist() == [0] * 5 + [1] * 5
    # outside a 1-frame window it stays; never before the previous character's emission
    assert snap_to_lifts(ci, lift, point_frame, frame_targets, text, 1).tolist() == ci.tolist()
    early = np.array([0, -1, -1, 0, 1])  # "a" still emitted at frame 3
    ci2 = cover_characters(frame_characters(early, text)[point_frame], text)
    assert snap_to_lifts(ci2, lift, point_frame, early, text, 2).tolist() == ci2.tolist()


# --------------------------------------------------------------------------- recognizer input
def _line(text: str, seed: int = 0):
    """A synthetic line: each letter a loop of 12 points (one stroke, lifted after, or
    cursive into the next letter), spaces as two-point pseudo-trajectories."""
    rng = np.random.default_rng(seed)
    xy, pen, ci = [], [], []
    x = 0.0
    for s, ch in enumerate(text):
        if ch == " ":
            xy += [[x, 0.5], [x + 0.4, 0.5]]
            pen += [PM, EOC]
            ci += [s, s]
            x += 0.5
            continue
        t = np.linspace(0, 2 * np.pi, 12)
        h = 1.0 + 0.3 * (ord(ch) % 3) + 0.05 * rng.random()
        xy += np.stack([x + 0.3 * (1 + np.cos(t + ord(ch))),
                        1.0 - h * (0.5 + 0.5 * np.sin(t * (1 + ord(ch) % 2)))], 1).tolist()
        nxt = text[s + 1] if s + 1 < len(text) else " "
        pen += [PM] * 11 + [CE if nxt != " " and ord(ch) % 2 else EOC]
        ci += [s] * 12
        x += 0.7
    return make_sentence(f"l{seed}", "w", text, np.array(xy) * 30, np.array(pen), np.array(ci))


def _strip(sentence):
    drawn = np.array([not sentence.text[c].isspace() for c in sentence.char_index])
    return (sentence.xy[drawn].astype(np.float64), np.isin(sentence.pen[drawn], (PU, EOC)),
            sentence.char_index[drawn].astype(np.int64))


def test_normalised_line_is_the_recognizers_at_the_true_height():
    s = _line("abc ab cab", seed=1)
    xy, lift, true = _strip(s)
    mine = normalised_line(xy, lift, s.text, char_height(xy, true), FEATURES)
    ref = normalise_line(s, FEATURES.baseline_window, FEATURES.point_spacing)
    np.testing.assert_array_equal(mine.xy, ref.xy)
    np.testing.assert_array_equal(mine.lift, ref.lift)
    assert stroke_height(xy, lift) > 0


def _tiny_recognizer(point_spacing: float = 0.15) -> Recognizer:
    torch.manual_seed(0)
    model = RecognizerModelConfig(conv_channels=16, hidden=16, layers=1, downsample=4)
    alphabet = Alphabet("abc ")
    return Recognizer(RecognizerNet(model, alphabet.n_classes), alphabet, model,
                      RecognizerFeatureConfig(point_spacing=point_spacing),
                      np.zeros(3), np.ones(3))


def test_infer_segmentation_end_to_end_with_a_tiny_recognizer():
    torch.set_num_threads(1)
    rec = _tiny_recognizer()
    for seed, text in enumerate(["abc ab cab", "aab  cc", "a"]):
        xy, lift, _ = _strip(_line(text, seed))
        ci = infer_segmentation(rec, xy, lift, text)
        drawn = [k for k, ch in enumerate(text) if ch != " "]
        assert ci.shape == (len(xy),) and ci.dtype == np.int64
        assert (np.diff(ci) >= 0).all()
        assert set(ci.tolist()) == set(drawn)  # every drawn character, no space
        assert (ci == infer_segmentation(rec, xy, lift, text)).all()  # deterministic
        without = infer_segmentation(rec, xy, lift, text, refine=0, lift_window=None)
        assert set(without.tolist()) == set(drawn)


def test_infer_segmentation_errors_name_the_problem():
    rec = _tiny_recognizer()
    xy, lift, _ = _strip(_line("abc", 0))
    with pytest.raises(ValueError, match="'z'.*not in the recognizer's alphabet"):
        infer_segmentation(rec, xy, lift, "abz")
    with pytest.raises(ValueError, match="no drawn"):
        infer_segmentation(rec, xy, lift, "  ")
    with pytest.raises(ValueError, match="cannot align 'abcabcabc' to a line of 2 points"):
        infer_segmentation(rec, xy[:2], np.array([False, True]), "abcabcabc")
    with pytest.raises(ValueError, match="lift flags"):
        infer_segmentation(rec, xy, lift[:-1], "abc")
    bad = xy.copy()
    bad[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        infer_segmentation(rec, bad, lift, "abc")


# --------------------------------------------------------------------------- agreement
def test_agreement_figures_on_a_hand_made_line():
    text = "ab c"
    true = np.array([0, 0, 0, 1, 1, 3, 3])
    inferred = np.array([0, 0, 1, 1, 1, 1, 3])
    lift = np.array([0, 0, 1, 0, 1, 0, 1], bool)  # "a" ends with a lift, the truth says
    got = segmentation_agreement(true, inferred, text, (0, 1), lift)
    assert got["point_accuracy"] == pytest.approx(5 / 7)
    assert got["boundaries"] == 2  # the starts of "b" and "c" (3 vs 2, 5 vs 6)
    assert got["boundary_accuracy"] == {"0": 0.0, "1": 1.0}
    assert got["mean_boundary_offset"] == pytest.approx(1.0)
    assert got["mean_boundary_offset_chars"] == pytest.approx(1 / (7 / 3))
    # the one adjacent boundary a|b: a lift in truth, pen-down (cursive) as inferred
    assert got["cursive_boundaries"] == 1 and got["cursive_label_accuracy"] == 0.0
    assert (got["cursive_rate_true"], got["cursive_rate_inferred"]) == (0.0, 1.0)
    assert got["cursive_f1"] == 0.0
    perfect = segmentation_agreement(true, true, text, (0,), lift)
    assert perfect["point_accuracy"] == 1.0 and perfect["boundary_accuracy"] == {"0": 1.0}
    assert perfect["cursive_label_accuracy"] == 1.0 and perfect["cursive_f1"] is None
    assert segmentation_agreement(true, inferred, text)["cursive_label_accuracy"] is None


def test_agreement_skips_space_points_and_pools_lines():
    text = "a b"
    true = np.array([0, 0, 1, 1, 2, 2])  # two space pseudo-points
    inferred = np.array([0, 0, 0, 2, 2, 2])
    one = agreement_counts(true, inferred, text)
    assert (one.points, one.correct, one.boundaries) == (4, 4, 1)
    pooled = pooled_agreement([(true, inferred, text), (np.array([0, 2]), np.array([0, 0]),
                                                        text)])
    assert pooled["lines"] == 2 and pooled["points"] == 6
    assert pooled["point_accuracy"] == pytest.approx(5 / 6)
    assert pooled["boundary_accuracy"]["1"] == pytest.approx(1.0)  # 0 and 1 point off
    with pytest.raises(ValueError, match="different shapes"):
        agreement_counts(true, inferred[:-1], text)


# --------------------------------------------------------------------------- script
def test_script_reports_the_agreement_of_ground_truth_lines(tmp_path, capsys):
    gt = tmp_path / "gt.h5"
    write_ink(gt, [_line("abc ab", 1), _line("ca bb", 2), _line("cab", 3)])
    rec = tmp_path / "recognizer.pt"
    _tiny_recognizer().save(rec)
    spec = importlib.util.spec_from_file_location(
        "segmentation_agreement", REPO / "scripts" / "measure" / "segmentation_agreement.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "agreement.json"
    assert script.main(["--gt", str(gt), "--recognizer", str(rec), "--limit", "2",
                        "--out", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["lines"] == 2 and figures["failed"] == {}
    assert figures["points"] == 12 * (5 + 4)  # drawn points only, no space pseudo-points
    assert 0.0 <= figures["point_accuracy"] <= 1.0 and set(figures["boundary_accuracy"]) == \
        {"1", "5", "10"}
    assert "point accuracy:" in capsys.readouterr().out
