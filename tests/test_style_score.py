"""Style Score (cashg.evaluation.style_score): a writer classifier on text-independent
features of real lines, fitted on half of the sentences and scored on the other half."""

import json

import numpy as np
import pytest

from cashg.core.ink import make_sentence, write_ink
from cashg.evaluation.style_score import (
    FEATURE_NAMES,
    StyleScoreError,
    StyleScorer,
    fit_scorer,
    line_features,
    scored_text,
    split_lines,
)

PM, CE, EOC = 0, 2, 3
WORDS = ["cat", "tree", "moon", "lamp", "river", "stone", "bird", "gold", "sand", "wind"]


def _writer_line(sid, writer, text, rng, style):
    """A line in a writer's hand: ``style`` = (slant, width, loop height, word gap, joined
    share); letters are loops of 8 points, each line jittered a little."""
    slant, width, height, gap, joined = style
    xy, pen, ci = [], [], []
    x = 0.0
    for s, ch in enumerate(text):
        if ch == " ":
            g = gap * (1 + 0.1 * rng.standard_normal())
            xy += [[x, 0.5], [x + g, 0.5]]
            pen += [PM, EOC]
            ci += [s, s]
            x += g
            continue
        t = np.linspace(0, 2 * np.pi, 8)
        h = height * (1 + 0.05 * rng.standard_normal())
        ys = 0.5 - 0.5 * h * np.sin(t)
        xs = x + 0.5 * width * (1 - np.cos(t / 2)) + slant * (0.5 - ys)
        nxt = text[s + 1] if s + 1 < len(text) else " "
        last = CE if nxt != " " and rng.random() < joined else EOC
        xy += np.stack([xs, ys], 1).tolist()
        pen += [PM] * 7 + [last]
        ci += [s] * 8
        x += width * (1 + 0.05 * rng.standard_normal())
    xy = np.array(xy)
    xy = (xy - xy.min(0)) / np.ptp(xy[:, 1])  # 1.0 high, as the subsets store lines
    return make_sentence(sid, writer, text, xy, np.array(pen), np.array(ci))


STYLES = {"w0": (0.6, 0.5, 1.0, 0.6, 0.9), "w1": (-0.2, 0.9, 0.6, 0.3, 0.1),
          "w2": (0.1, 0.3, 0.9, 1.2, 0.5), "w3": (0.3, 0.7, 0.4, 0.8, 0.0),
          "w4": (-0.5, 0.4, 0.7, 0.5, 1.0), "w5": (0.0, 1.2, 1.0, 0.2, 0.3)}


def _corpus(lines_per_writer=16, seed=0):
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, 3)) + f" {k}" for k in range(lines_per_writer)]
    return [_writer_line(f"{w}_{k}", w, texts[k], rng, style)
            for w, style in STYLES.items() for k in range(lines_per_writer)]


def test_the_split_keeps_every_scored_text_out_of_the_fitting_half():
    fitted, scored = split_lines(_corpus())
    assert fitted and scored
    assert not {s.text for s in fitted} & {s.text for s in scored}
    assert all(scored_text(s.text) for s in scored)
    assert scored_text("a text") == scored_text("a text")  # the same every run


def test_features_are_finite_where_defined_and_named():
    line = _corpus(2)[0]
    f = line_features(line)
    assert f.shape == (len(FEATURE_NAMES),) and np.isfinite(f).all()


def test_lines_of_one_writer_go_to_that_writer():
    fitted, scored = split_lines(_corpus())
    scorer = fit_scorer(fitted)
    result = scorer.score(scored, {s.sentence_id: s.writer_id for s in scored})
    assert result.lines == len(scored)
    assert result.top1 >= 0.9 and result.top5 == 1.0
    assert set(result.per_writer) == set(STYLES)


def test_shuffled_writer_labels_drop_to_chance():
    fitted, scored = split_lines(_corpus(24))
    rng = np.random.default_rng(1)
    labels = rng.permutation([s.writer_id for s in fitted])
    shuffled = [make_sentence(s.sentence_id, w, s.text, s.xy, s.pen, s.char_index)
                for s, w in zip(fitted, labels)]
    scorer = fit_scorer(shuffled)
    result = scorer.score(scored, {s.sentence_id: s.writer_id for s in scored})
    assert result.top1 < 0.4  # chance is 1/6; the true labels give >= 0.9


def test_the_scorer_round_trips_through_its_file(tmp_path):
    fitted, scored = split_lines(_corpus())
    scorer = fit_scorer(fitted)
    back = StyleScorer.load(scorer.save(tmp_path / "scorer.json"))
    np.testing.assert_allclose(back.scores(np.stack([line_features(s) for s in scored])),
                               scorer.scores(np.stack([line_features(s) for s in scored])))
    assert back.writers == scorer.writers and back.shrinkage == scorer.shrinkage


def test_bad_input_gets_a_clear_error(tmp_path):
    lines = _corpus(4)
    empty = make_sentence("w0_blank", "w0", "  ", np.zeros((0, 2)), np.zeros(0), np.zeros(0))
    with pytest.raises(StyleScoreError, match="w0_blank: no drawn ink"):
        line_features(empty)
    scorer = fit_scorer(lines)
    stranger = _writer_line("x_0", "stranger", "cat tree", np.random.default_rng(0),
                            STYLES["w0"])
    with pytest.raises(StyleScoreError, match="stranger"):
        scorer.score([stranger], {"x_0": "stranger"})
    bad = tmp_path / "scorer.json"
    bad.write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(StyleScoreError, match=f"{bad}: not a cashg-style-scorer file"):
        StyleScorer.load(bad)
    bad.write_text("{not json")
    with pytest.raises(StyleScoreError, match="not a readable style scorer"):
        StyleScorer.load(bad)


def test_writers_with_too_few_lines_are_left_out_not_an_error(tmp_path):
    """Real data (DeepWriting: one to three test lines per writer): a writer with fewer than
    two fitting lines, or none, is left out with the reason and its lines are skipped and
    counted when scored; with fewer than two writers left every score is None with the
    reason, through the file too."""
    lines = _corpus(4)
    one_line = [s for s in lines if s.writer_id != "w1"] + [
        next(s for s in lines if s.writer_id == "w1")]
    scorer = fit_scorer(one_line, writers={"w1", "w9"})
    assert "w1" not in scorer.writers and scorer.left_out["w1"].startswith("1 line(s)")
    assert scorer.left_out["w9"].startswith("0 line(s)") and scorer.unavailable is None
    w1 = [s for s in lines if s.writer_id == "w1"]
    mixed = w1 + [s for s in lines if s.writer_id == "w0"]
    result = scorer.score(mixed, {s.sentence_id: s.writer_id for s in mixed})
    assert result.lines == len(mixed) - len(w1) and result.skipped == len(w1)
    assert "w1: 1 line(s) in the fitting half" in result.note and result.top1 is not None
    only = fit_scorer([s for s in lines if s.writer_id == "w0"])
    assert only.unavailable is not None and "got 1 (of 1 writers)" in only.unavailable
    back = StyleScorer.load(only.save(tmp_path / "none.json"))
    scored = back.score(w1, {s.sentence_id: "w1" for s in w1})
    assert (scored.lines, scored.top1, scored.skipped) == (0, None, len(w1))
    assert scored.note == only.unavailable
    again = StyleScorer.load(scorer.save(tmp_path / "left.json"))
    assert dict(again.left_out) == dict(scorer.left_out)


def test_the_stage_writes_the_scorer_its_ceiling_and_the_split(tmp_path):
    from cashg.evaluation.style_score_stage import main

    write_ink(tmp_path / "gt.h5", _corpus())
    assert main(["--gt", str(tmp_path / "gt.h5"), "--out", str(tmp_path / "out")]) == 0
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["STYLE_top1_gt"] >= 0.9 and metrics["chance_top1"] == pytest.approx(1 / 6)
    assert metrics["lines_fitted"] + metrics["lines_scored"] == 6 * 16
    split = (tmp_path / "out" / "split.csv").read_text().splitlines()
    assert len(split) == 1 + 6 * 16
    StyleScorer.load(tmp_path / "out" / "scorer.json")
    # one writer: no classifier; the stage says why and succeeds, every score is --
    write_ink(tmp_path / "one.h5", [s for s in _corpus() if s.writer_id == "w0"])
    assert main(["--gt", str(tmp_path / "one.h5"), "--out", str(tmp_path / "one")]) == 0
    metrics = json.loads((tmp_path / "one" / "metrics.json").read_text())
    assert metrics["STYLE_top1_gt"] is None and "2 writers" in metrics["unavailable"]
    assert StyleScorer.load(tmp_path / "one" / "scorer.json").unavailable
    # an unreadable ground truth is still an error
    (tmp_path / "bad.h5").write_text("not hdf5")
    assert main(["--gt", str(tmp_path / "bad.h5"), "--out", str(tmp_path / "bad")]) == 2


def test_evaluate_scores_the_scored_half_against_its_ground_truth(tmp_path):
    from cashg.evaluation.evaluate import EvaluationOptions, evaluate
    from cashg.evaluation.style_score import score_style

    lines = _corpus()
    fitted, scored = split_lines(lines)
    path = fit_scorer(fitted).save(tmp_path / "scorer.json")
    gt = {s.sentence_id: s for s in lines}
    # the "generated" lines: each scored line written in the next writer's hand
    writers = sorted(STYLES)
    rng = np.random.default_rng(5)
    pred = {}
    for s in lines:
        other = writers[(writers.index(s.writer_id) + 1) % len(writers)]
        pred[s.sentence_id] = _writer_line(s.sentence_id, s.writer_id, s.text, rng,
                                           STYLES[other])
    result = evaluate(gt, pred, EvaluationOptions(protocol="none"))
    score_style(result, gt, pred, path)
    assert result.metrics["STYLE_lines"] == len(scored)
    assert result.metrics["STYLE_top1_gt"] >= 0.9
    assert result.metrics["STYLE_top1"] <= 0.2  # they look like another writer
    # the fitting lines may never be scored
    with pytest.raises(StyleScoreError, match="fitted on and would be scored"):
        leaky = fit_scorer(lines).save(tmp_path / "leaky.json")
        score_style(result, gt, pred, leaky)
