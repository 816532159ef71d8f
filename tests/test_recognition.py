"""The legibility recognizer: scoring, CTC decoding, normalisation, training, stage, evaluate."""

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from cashg.core.config.recognizer import (
    RecognizerConfig,
    RecognizerFeatureConfig,
    RecognizerModelConfig,
    RecognizerTrainConfig,
)
from cashg.core.ink import make_sentence
from cashg.recognition.ctc import Alphabet, collapse, greedy_decode
from cashg.recognition.data import hold_out_writers, normalise_all, read_sentence_subset
from cashg.recognition.features import char_height, normalise_line, point_features
from cashg.recognition.model import RecognizerNet
from cashg.recognition.recognizer import Recognizer
from cashg.recognition.scoring import (
    CHAR_CLASSES,
    ClassErrors,
    align,
    chance_pairs,
    char_class,
    char_class_errors,
    edit_distance,
    error_counts,
    format_class_errors,
)
from cashg.recognition.train import train_recognizer

REPO = Path(__file__).resolve().parents[1]
PM, PU, CE, EOC = 0, 1, 2, 3
TINY_MODEL = RecognizerModelConfig(conv_channels=32, hidden=48, layers=1, downsample=2)


# --------------------------------------------------------------------------- CER / WER
@pytest.mark.parametrize("ref, hyp, dist", [
    ("kitten", "sitting", 3), ("", "abc", 3), ("abc", "", 3), ("abc", "abc", 0),
    ("abc", "acb", 2), ("ab", "ba", 2), ("flaw", "lawn", 2),
    (["the", "cat"], ["the", "hat", "sat"], 2),
])
def test_edit_distance(ref, hyp, dist):
    assert edit_distance(ref, hyp) == dist
    assert edit_distance(hyp, ref) == dist


def test_error_rates_are_totals_over_the_set():
    # line 1: "ab" -> "a": 1 char edit, 1 word edit; line 2: "cd e" -> "cd": 2 / 1
    counts = error_counts(["ab", "cd e"], ["a", "cd"])
    assert (counts.char_edits, counts.chars, counts.word_edits, counts.words) == (3, 6, 2, 3)
    assert counts.cer == pytest.approx(0.5) and counts.wer == pytest.approx(2 / 3)
    # a mean of per-line rates would give (1/2 + 2/4) / 2 = 0.5 too; make them differ
    counts = error_counts(["a", "bcdefghij"], ["", "bcdefghij"])
    assert counts.cer == pytest.approx(1 / 10)
    assert error_counts([], []).cer is None
    over = error_counts(["ab"], ["xyzw"])  # more edits than reference characters
    assert over.cer == pytest.approx(2.0) and over.wer == pytest.approx(1.0)
    with pytest.raises(ValueError, match="2 references but 1"):
        error_counts(["a", "b"], ["a"])


# --------------------------------------------------------------------------- character classes
def _rates(ref: str, hyp: str) -> dict:
    return char_class_errors([ref], [hyp]).rates()


def _only(**rates) -> dict:
    """Every class None except those given."""
    return {**dict.fromkeys(CHAR_CLASSES), **rates}


def test_char_class_of_each_position():
    text = "Ta B7 ,é"
    assert [char_class(text, i) for i in range(len(text))] == [
        "initial", "lower", "space", "upper", "digit", "space", "punct", "lower"]
    assert char_class("7", 0) == char_class(" ", 0) == "initial"  # whatever the character
    assert char_class("a字", 1) == "punct"  # no case, no digit, no space: punct
    assert CHAR_CLASSES == ("lower", "upper", "digit", "punct", "space", "initial")


@pytest.mark.parametrize("ref, hyp, rates", [
    # identical: every class present scores 0
    ("Hello World 42!", "Hello World 42!",
     dict(initial=0.0, lower=0.0, upper=0.0, space=0.0, digit=0.0, punct=0.0)),
    # one capital substituted by its lower case: upper 1/1, nothing else
    ("the Cat", "the cat", dict(initial=0.0, lower=0.0, space=0.0, upper=1.0)),
    # a deleted space (two words merged): space 1/1
    ("ab cd", "abcd", dict(initial=0.0, lower=0.0, space=1.0)),
    # a wrong first character counts only as initial (upper has no character at all)
    ("Tom", "tom", dict(initial=1.0, lower=0.0)),
    # inserted characters are no reference character's error
    ("ab", "aXYb", dict(initial=0.0, lower=0.0)),
    # one of two digits deleted
    ("a 12", "a 1", dict(initial=0.0, space=0.0, digit=0.5)),
    # empty reading: every reference character deleted
    ("Ab 1.", "", dict(initial=1.0, lower=1.0, space=1.0, digit=1.0, punct=1.0)),
    # a lower-case letter read as a digit, a comma lost
    ("x o,k", "x 0k", dict(initial=0.0, space=0.0, lower=0.5, punct=1.0)),
])
def test_class_error_shares_of_hand_made_pairs(ref, hyp, rates):
    assert _rates(ref, hyp) == _only(**rates)


def _fewest_wrong(ref: str, hyp: str) -> int:
    """Fewest substituted or deleted reference characters of a minimal alignment, by plain
    recursion over (edits, wrong) pairs: an oracle for :func:`align`."""
    from functools import cache

    @cache
    def best(i: int, j: int) -> tuple[int, int]:
        if not i and not j:
            return 0, 0
        steps = []
        if i and j:
            e, w = best(i - 1, j - 1)
            steps.append((e + (ref[i - 1] != hyp[j - 1]), w + (ref[i - 1] != hyp[j - 1])))
        if i:
            e, w = best(i - 1, j)
            steps.append((e + 1, w + 1))
        if j:
            e, w = best(i, j - 1)
            steps.append((e + 1, w))
        return min(steps)

    return best(len(ref), len(hyp))[1]


def test_insertions_are_counted_apart_and_close_the_edit_distance():
    counts = char_class_errors(["ab", "c d"], ["aXYb", "c dZ"])
    assert counts.wrong == (0,) * 6 and counts.insertions == 3
    assert error_counts(["ab", "c d"], ["aXYb", "c dZ"]).char_edits == 3
    rng = np.random.default_rng(0)
    for _ in range(200):  # S + D + I of the alignment is the edit distance; it rebuilds hyp
        ref, hyp = ("".join(rng.choice(list("ab c"), rng.integers(0, 7))) for _ in range(2))
        ops = align(ref, hyp)
        assert sum(op != "M" for op in ops) == edit_distance(ref, hyp)
        assert sum(op in "SD" for op in ops) == _fewest_wrong(ref, hyp)
        i = j = 0
        for op in ops:  # M pairs equal characters, S different ones
            if op in "MS":
                assert (ref[i] == hyp[j]) == (op == "M")
            i, j = i + (op != "I"), j + (op != "D")
        assert sum(op != "I" for op in ops) == len(ref)
        assert sum(op != "D" for op in ops) == len(hyp)
        counts = char_class_errors([ref], [hyp])
        assert sum(counts.wrong) + counts.insertions == edit_distance(ref, hyp)
        assert sum(counts.total) == len(ref)


def test_a_class_without_characters_is_none():
    assert _rates("abc", "abd") == _only(initial=0.0, lower=0.5)
    assert char_class_errors([], []).rates() == _only()
    assert char_class_errors([""], ["xyz"]).rates() == _only()
    assert char_class_errors([""], ["xyz"]).insertions == 3
    with pytest.raises(ValueError, match="2 references but 1"):
        char_class_errors(["a", "b"], ["a"])


def test_class_shares_are_totals_over_lines():
    refs, hyps = ["Xa", "Ybbbbbbbbb"], ["Xz", "Ybbbbbbbbb"]
    summed = ClassErrors()
    for ref, hyp in zip(refs, hyps):
        summed += char_class_errors([ref], [hyp])
    total = char_class_errors(refs, hyps)
    assert total == summed
    assert total.wrong[CHAR_CLASSES.index("lower")] == 1
    assert total.total[CHAR_CLASSES.index("lower")] == 10
    # totals: 1 wrong of 10 lower-case letters, not the mean of the lines' 1/1 and 0/9
    assert total.rates()["lower"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="one count per class"):
        ClassErrors((0,), (0,))


def test_tie_breaks_are_fixed():
    """Equally minimal alignments: the fewest wrong reference characters (most matches), then,
    backtracking from the ends, a diagonal step (match or substitution), a deletion, an
    insertion."""
    # "42!" read "4 2": an inserted space and a lost "!", not "2" -> " " and "!" -> "2"
    assert align("a 42!", "a 4 2") == ("M", "M", "M", "I", "M", "D")
    assert _rates("a 42!", "a 4 2") == _only(initial=0.0, space=0.0, digit=0.0, punct=1.0)
    # "ab" -> "ba": not two substitutions (no match); of the two one-match alignments the
    # backtracking deletes the last reference character (deletion before insertion)
    assert align("ab", "ba") == ("I", "M", "D")
    assert _rates("xab", "xba") == _only(initial=0.0, lower=0.5)
    # "aba" -> "bab": the deletion (of the last a) before the insertion, so the initial a is
    # matched (preferring insertions would delete it instead)
    assert align("aba", "bab") == ("I", "M", "M", "D")
    assert _rates("aba", "bab") == _only(initial=0.0, lower=0.5)
    assert all(align("aba", "bab") == ("I", "M", "M", "D") for _ in range(3))
    assert align("", "ab") == ("I", "I") and align("ab", "") == ("D", "D")


def test_format_class_errors_is_one_line_in_class_order():
    line = format_class_errors(_only(lower=0.1234, upper=1.0, initial=0.0))
    assert line == ("lower 0.123 | upper 1.000 | digit -- | punct -- | space -- |"
                    " initial 0.000")
    assert format_class_errors({}, digits=2).count("--") == 6


def test_chance_pairs_never_pair_a_line_with_itself():
    for n in (2, 3, 10):
        other = chance_pairs(n, seed=4)
        assert sorted(other) == list(range(n)) and all(other != np.arange(n))
    assert np.array_equal(chance_pairs(7, 1), chance_pairs(7, 1))


# --------------------------------------------------------------------------- CTC
def test_greedy_collapse_merges_runs_then_drops_blanks():
    assert collapse([1, 1, 0, 1, 2, 2, 0]) == [1, 1, 2]  # a blank separates the two 1s
    assert collapse([1, 1, 1]) == [1]
    assert collapse([0, 0, 0]) == []
    assert collapse([0, 3, 0, 0, 3, 3, 4]) == [3, 3, 4]
    assert collapse([]) == []
    scores = np.full((2, 5, 4), -9.0)
    for b, path in enumerate([[2, 2, 0, 3, 1], [1, 0, 1, 3, 3]]):
        scores[b, np.arange(5), path] = 0.0
    # the second line has 3 valid frames: its padding frames are ignored
    assert greedy_decode(scores, [5, 3]) == [[2, 3, 1], [1, 1]]
    alphabet = Alphabet.of_texts(["ba", "c a"])
    assert alphabet.chars == " abc" and alphabet.n_classes == 5
    assert alphabet.decode(alphabet.encode("cab a")) == "cab a"
    with pytest.raises(ValueError, match="'z'"):
        alphabet.encode("abz")


# --------------------------------------------------------------------------- features
def _line(text, seed=0, drift=0.0, size=1.0):
    """A synthetic line: each letter a loop of 8 points (one stroke), spaces as two-point
    pseudo-trajectories (PM, EOC); ``drift``: y rises by this much per unit of x."""
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
        t = np.linspace(0, 2 * np.pi, 8)
        h = 1.0 + 0.3 * (ord(ch) % 3) + 0.05 * rng.random()
        xs = x + 0.3 * (1 + np.cos(t + ord(ch)))
        ys = 1.0 - h * (0.5 + 0.5 * np.sin(t * (1 + ord(ch) % 2)))
        xy += np.stack([xs, ys], 1).tolist()
        pen += [PM] * 7 + [CE if s + 1 < len(text) and text[s + 1] != " " else EOC]
        ci += [s] * 8
        x += 0.7
    xy = np.array(xy)
    xy[:, 1] += drift * xy[:, 0]
    return make_sentence("l", "w", text, xy * size, np.array(pen), np.array(ci))


def test_char_height_is_the_median_character_extent():
    xy = np.array([[0, 0], [0, 1], [1, 0], [1, 3], [1, 1], [2, 5], [3, 0], [3, 2]], float)
    ci = np.array([0, 0, 1, 1, 1, 2, 3, 3])  # heights 1, 3, a one-point dot, 2
    assert char_height(xy, ci) == pytest.approx(2.0)
    assert char_height(np.array([[0, 0], [1, 0]], float), np.array([0, 1])) == 1.0  # no height


def test_normalisation_is_invariant_to_translation_and_uniform_scale():
    line = _line("abc ab cab", seed=1, drift=0.2)
    moved = make_sentence("l", "w", line.text, line.xy * 37.5 + np.array([120.0, -40.0]),
                          line.pen, line.char_index)
    a, b = normalise_line(line, 2.0), normalise_line(moved, 2.0)
    assert np.allclose(a.xy, b.xy, atol=1e-4) and np.array_equal(a.lift, b.lift)
    assert np.allclose(point_features(a.xy, a.lift), point_features(b.xy, b.lift), atol=1e-4)


def test_spaces_are_dropped_and_pen_states_do_not_reveal_characters():
    line = _line("ab ba", seed=2)
    norm = normalise_line(line, 2.0)
    assert len(norm) == len(line.points) - 2  # the space's two pseudo-points
    assert norm.text == "ab ba"  # the space stays a target
    pen = line.pen[line.char_index != 2]
    # a lift after PU or EOC only: the cursive join (CURSIVE_EOC) looks like a pen-down point
    assert np.array_equal(norm.lift, np.isin(pen, (PU, EOC)))
    assert not norm.lift[pen == CE].any() and norm.lift[pen == EOC].all()


def _densified(line):
    """The same ink with a midpoint inserted between every two consecutive points of a
    pen-down run (the pen state of an inserted point is PM), as unsimplified ink is."""
    xy, pen, ci = [line.xy[0]], [line.pen[0]], [line.char_index[0]]
    for i in range(1, len(line.xy)):
        if line.pen[i - 1] not in (PU, EOC):  # pen down from i-1 to i: add a midpoint
            xy.append((line.xy[i - 1] + line.xy[i]) / 2)
            pen.append(PM)
            ci.append(line.char_index[i - 1])
        xy.append(line.xy[i])
        pen.append(line.pen[i])
        ci.append(line.char_index[i])
    return make_sentence("l", "w", line.text, np.array(xy), np.array(pen), np.array(ci))


def test_point_spacing_makes_the_input_independent_of_point_density():
    line = _line("abc ab cab", seed=4)
    dense = _densified(line)
    assert len(dense.points) > 1.5 * len(line.points)
    plain = [normalise_line(s, 2.0) for s in (line, dense)]
    assert len(plain[1]) > 1.5 * len(plain[0])  # without it the densities differ
    a, b = (normalise_line(s, 2.0, point_spacing=0.1) for s in (line, dense))
    assert len(a) == len(b) and np.array_equal(a.lift, b.lift)
    assert np.allclose(a.xy, b.xy, atol=1e-5)
    # every stroke keeps its end points and its lift; steps are about the spacing at most (the
    # chords are measured after the baseline subtraction, which bends the line slightly)
    assert a.lift.sum() == plain[0].lift.sum()
    steps = np.linalg.norm(np.diff(a.xy, axis=0), axis=1)[~a.lift[:-1]]
    assert steps.max() <= 0.105


def test_drifting_lines_keep_their_character_size():
    text = "abcab bca cabbac abc bacab"
    straight, drifting = _line(text, seed=3), _line(text, seed=3, drift=0.35)
    y_extent = [np.ptp(s.xy[:, 1]) for s in (straight, drifting)]
    assert y_extent[1] > 3 * y_extent[0]  # a line-extent normalisation would shrink it 3x
    a, b = normalise_line(straight, 2.0), normalise_line(drifting, 2.0)
    # after the character-height scale and the baseline correction both lines span about
    # the same heights (the line-extent ratio would be below 1/3), the drift is gone
    assert 0.7 < np.ptp(b.xy[:, 1]) / np.ptp(a.xy[:, 1]) < 1.4
    assert abs(np.polyfit(b.xy[:, 0], b.xy[:, 1], 1)[0]) < 0.05


def test_a_line_is_decoded_the_same_alone_and_in_a_batch(one_torch_thread):
    torch.manual_seed(0)
    net = RecognizerNet(RecognizerModelConfig(conv_channels=16, hidden=16, downsample=4), 5)
    net.eval()
    x = torch.randn(1, 90, 4)
    alone, n_alone = net(x, torch.tensor([90]))
    batch = torch.randn(2, 130, 4)
    batch[0, 90:] = 0
    batch[0, :90] = x[0]
    both, n_both = net(batch, torch.tensor([90, 130]))
    assert int(n_alone[0]) == int(n_both[0]) == 23
    assert torch.allclose(alone[0], both[0, :23], atol=1e-5)


# --------------------------------------------------------------------------- training
def test_tiny_recognizer_overfits_a_handful_of_lines(subsets, one_torch_thread):
    lines = normalise_all(read_sentence_subset(subsets / "train" / "sentence.h5"), 2.0)[:8]
    cfg = RecognizerTrainConfig(iterations=300, batch_size=4, lr=1e-2, warmup_iters=20,
                                x_scale=0.0, shear=0.0)
    rec, log = train_recognizer(lines, TINY_MODEL, RecognizerFeatureConfig(), cfg,
                                log=lambda _: None)
    counts = error_counts([ln.text for ln in lines], rec.transcribe_lines(lines))
    assert log.epoch_losses[-1] < 0.3 * log.epoch_losses[0]
    assert counts.cer < 0.05, counts


def test_training_is_deterministic(subsets, one_torch_thread):
    lines = normalise_all(read_sentence_subset(subsets / "train" / "sentence.h5"), 2.0)
    cfg = RecognizerTrainConfig(iterations=6, batch_size=4, seed=3)
    runs = [train_recognizer(lines, TINY_MODEL, RecognizerFeatureConfig(), cfg,
                             log=lambda _: None)[0] for _ in range(2)]
    a, b = (r.net.state_dict() for r in runs)
    assert all(torch.equal(a[k], b[k]) for k in a)
    other = train_recognizer(lines, TINY_MODEL, RecognizerFeatureConfig(),
                             dataclasses.replace(cfg, seed=4), log=lambda _: None)[0]
    assert not torch.equal(other.net.state_dict()["head.weight"], a["head.weight"])


def test_held_out_writers_are_disjoint(subsets):
    sentences = read_sentence_subset(subsets / "train" / "sentence.h5")
    train, val = hold_out_writers(sentences, 1, seed=0)
    assert len(train) + len(val) == len(sentences) and val
    assert not {s.writer_id for s in train} & {s.writer_id for s in val}
    assert len({s.writer_id for s in val}) == 1


# --------------------------------------------------------------------------- stage, evaluate
def _params(tmp_path, benchmarks=()):
    """The repository's params with a tiny recognizer listed for ``benchmarks``."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["recognizer"] = {"benchmarks": list(benchmarks),
                            "model": dataclasses.asdict(TINY_MODEL),
                            "train": {"iterations": 8, "batch_size": 4, "val_writers": 1}}
    # new_text reads with the recognizer: keep only the entries whose benchmark has one
    params["new_text"]["experiments"] = {k: v for k, v in params["new_text"]["experiments"].items()
                                         if v["benchmark"] in benchmarks}
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    return path


def test_stage_writes_outputs_and_evaluate_adds_cer(subsets, tmp_path, one_torch_thread, capsys):
    from cashg.evaluation.cli import add_arguments, run
    from cashg.recognition.stage import main

    params = _params(tmp_path)
    out = tmp_path / "recognizer"
    assert main(["--benchmark", "toy", "--data", str(subsets), "--out", str(out),
                 "--params", str(params), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    for key in ("CER_val", "WER_val", "CER_gt", "WER_gt", "CER_chance", "WER_chance",
                "train_seconds", "cpu_seconds"):
        assert summary[key] is not None, key
    assert summary["iterations"] == 8 and summary["lines_val"] > 0
    state = torch.load(out / "recognizer.pt", weights_only=True)
    assert state["format"] == "cashg-recognizer" and state["meta"]["benchmark"] == "toy"
    assert "epoch 1/" in capsys.readouterr().err

    gt = subsets / "test" / "gt.h5"

    def evaluate(*extra):
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        dest = tmp_path / f"eval{len(extra)}"
        args = parser.parse_args(["--gt", str(gt), "--pred", str(gt), "--out", str(dest),
                                  "--protocol", "dsd", "--no-progress", "--params", str(params),
                                  *extra])
        return run(args), dest

    rc, dest = evaluate("--recognizer", str(out / "recognizer.pt"))
    assert rc == 0
    metrics = json.loads((dest / "metrics.json").read_text())
    # the same recognizer and normalisation on both sides: identical ink, identical rates
    assert metrics["CER"] is not None and metrics["CER"] == metrics["CER_gt"]
    assert metrics["WER"] == metrics["WER_gt"]
    assert metrics["ERR_lower"] is not None
    assert all(metrics[f"ERR_{c}"] == metrics[f"ERR_{c}_gt"] for c in CHAR_CLASSES)
    sentences = pd.read_csv(dest / "sentences.csv", keep_default_na=False)
    assert {"cer", "cer_gt", "decoded", "decoded_gt"} <= set(sentences.columns)
    # the file alone rebuilds the recognizer: same transcriptions as in the evaluation
    from cashg.recognition.data import read_ink_lines

    loaded = Recognizer.load(out / "recognizer.pt")
    lines = {s.sentence_id: s for s in read_ink_lines(gt)}
    assert loaded.transcribe([lines[i] for i in sentences["sentence_id"]]) == \
        list(sentences["decoded_gt"].astype(str))
    assert "CER" in (dest / "table.md").read_text()
    # the pipeline's switch: toy is not listed in recognizer.benchmarks -> null
    rc, dest = evaluate("--recognizer", str(out / "recognizer.pt"), "--recognizer-if-listed",
                        "toy")
    metrics = json.loads((dest / "metrics.json").read_text())
    assert rc == 0 and metrics["CER"] is None and metrics["CER_gt"] is None
    assert all(metrics[f"ERR_{c}{side}"] is None for c in CHAR_CLASSES for side in ("", "_gt"))
    assert "toy is not in recognizer.benchmarks" in capsys.readouterr().out
    # listed but missing: an error naming the file
    rc, _ = evaluate("--recognizer", str(tmp_path / "none.pt"))
    assert rc == 2 and "none.pt: recognizer file not found" in capsys.readouterr().err


class _ReadingRecognizer:
    """Stands in for a :class:`Recognizer`: returns a fixed reading for each line object."""

    meta = {"benchmark": "fake"}

    def __init__(self, readings: dict[int, str]):
        self.readings = readings

    def transcribe(self, lines) -> list[str]:
        return [self.readings[id(line)] for line in lines]


def test_score_legibility_fills_the_class_error_keys():
    from cashg.evaluation.evaluate import EvaluationResult
    from cashg.evaluation.legibility import score_legibility
    from cashg.evaluation.protocols import METRIC_KEYS, RECOGNITION_KEYS

    texts = {"s0": "Ab 1.", "s1": "Cd"}
    gt = {sid: _line(text, seed=k) for k, (sid, text) in enumerate(texts.items())}
    pred = {sid: _line(text, seed=k + 5) for k, (sid, text) in enumerate(texts.items())}
    # generated: the initial A read as a, the full stop lost; d read as x. Ground truth exact.
    readings = {id(pred["s0"]): "ab 1", id(pred["s1"]): "Cx",
                id(gt["s0"]): "Ab 1.", id(gt["s1"]): "Cd"}
    empty = pd.DataFrame()
    result = EvaluationResult(dict.fromkeys(METRIC_KEYS + RECOGNITION_KEYS),
                              pd.DataFrame({"sentence_id": list(texts)}), empty, empty, empty,
                              empty)
    assert all(result.metrics[k] is None for k in RECOGNITION_KEYS)
    score_legibility(result, gt, pred, _ReadingRecognizer(readings), "fake.pt")
    assert list(result.metrics) == [*METRIC_KEYS, *RECOGNITION_KEYS]  # no key added or moved
    assert RECOGNITION_KEYS[4:] == (
        "ERR_lower", "ERR_upper", "ERR_digit", "ERR_punct", "ERR_space", "ERR_initial",
        "ERR_lower_gt", "ERR_upper_gt", "ERR_digit_gt", "ERR_punct_gt", "ERR_space_gt",
        "ERR_initial_gt")
    generated = {k: result.metrics[f"ERR_{k}"] for k in CHAR_CLASSES}
    assert generated == {"lower": 0.5, "upper": None, "digit": 0.0, "punct": 1.0,
                         "space": 0.0, "initial": 0.5}
    truth = {k: result.metrics[f"ERR_{k}_gt"] for k in CHAR_CLASSES}
    assert truth == {**dict.fromkeys(CHAR_CLASSES, 0.0), "upper": None}
    assert result.metrics["CER"] == pytest.approx(3 / 7) and result.metrics["CER_gt"] == 0.0
    counts = result.details["class_errors"]
    assert counts["generated"]["wrong"] == {"lower": 1, "upper": 0, "digit": 0, "punct": 1,
                                            "space": 0, "initial": 1}
    assert counts["gt"]["total"] == {"lower": 2, "upper": 0, "digit": 1, "punct": 1,
                                     "space": 1, "initial": 2}
    assert counts["generated"]["insertions"] == 0


def test_stage_names_a_missing_sentence_subset(tmp_path, capsys):
    from cashg.recognition.stage import main

    assert main(["--benchmark", "x", "--data", str(tmp_path), "--out", str(tmp_path / "o"),
                 "--params", str(_params(tmp_path))]) == 2
    assert "train/sentence.h5: not found" in capsys.readouterr().err


@pytest.mark.parametrize("benchmarks, message", [
    (["dsd", "nope"], "recognizer.benchmarks: 'nope' is not under subsets.benchmarks"),
    (["dsd", "dsd"], "recognizer.benchmarks: a benchmark is listed twice"),
])
def test_params_errors_name_the_recognizer_key(repo_root, tmp_path, benchmarks, message):
    from cashg.core.params import ParamsError, load_params

    params = yaml.safe_load((repo_root / "params.yaml").read_text())
    params["recognizer"]["benchmarks"] = benchmarks
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ParamsError, match=message):
        load_params(path)
    assert RecognizerConfig().benchmarks == ()


# --------------------------------------------------------------------------- the DAG
@pytest.mark.parametrize("listed", [["merged", "deepwriting"], []])
def test_dag_has_recognizer_stages_for_the_listed_benchmarks_only(tmp_path, listed):
    """Both views agree; recognizer@<b> exists exactly for the listed benchmarks; every
    evaluation runs after them (the results/recognizer folder, expanded for Snakemake) and
    uses a recognizer only when its benchmark is listed. The new-text stages follow the
    listed benchmarks (new_text.experiments must name benchmarks with a recognizer) and read
    their recognizer."""
    import shlex
    import shutil

    from dvc.repo import Repo

    from workflow.check_views import diff_views, dvc_view, snakemake_view

    root = tmp_path / "repo"
    root.mkdir()
    for name in ("Snakefile", "dvc.yaml"):
        shutil.copy(REPO / name, root / name)
    shutil.copytree(REPO / "workflow", root / "workflow",
                    ignore=shutil.ignore_patterns("__pycache__", "profiles"))
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["recognizer"]["benchmarks"] = listed
    params["new_text"]["experiments"] = {b: {"benchmark": b} for b in listed}
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    Repo.init(str(root), no_scm=True).close()
    dvc, snake = dvc_view(root), snakemake_view(root)
    assert diff_views(snake, dvc) == []
    assert {n for n in dvc if n.startswith("recognizer__")} == {f"recognizer__{b}"
                                                                for b in listed}
    assert "results/recognizer/benchmarks.json" in dvc["recognizer_list"].outputs
    assert {n for n in dvc if n.startswith("new_text__")} == {f"new_text__{b}" for b in listed}
    for bench in listed:
        assert f"results/recognizer/{bench}/recognizer.pt" in snake[f"new_text__{bench}"].inputs
    for bench in listed:
        stage = dvc[f"recognizer__{bench}"]
        assert f"results/subsets/{bench}" in stage.inputs
        assert {f"results/recognizer/{bench}/recognizer.pt",
                f"results/recognizer/{bench}/summary.json"} <= stage.outputs
    for name in ("evaluate__dsd", "evaluate__merged", "evaluate__merged_neither",
                 "report"):
        inputs = snake[name].inputs
        assert "results/recognizer/benchmarks.json" in inputs, name
        assert {f"results/recognizer/{b}/recognizer.pt" for b in listed} <= inputs, name
    for name, bench in (("evaluate__dsd", "dsd"), ("evaluate__merged_neither",
                                                   "merged")):
        argv = shlex.split(dvc[name].cmd)
        assert argv[argv.index("--recognizer") + 1] == f"results/recognizer/{bench}/recognizer.pt"
        assert argv[argv.index("--recognizer-if-listed") + 1] == bench
        assert f'"recognizer.benchmarks": {json.dumps(listed)}' in dvc[name].params
