"""CSM (paper appendix E): worked examples and hand-computed boundary-set rules."""

import numpy as np
import pytest

from cashg.metrics.boundaries import (
    adjacent_boundaries,
    char_geometry,
    infer_cursive_labels,
    segmentation_errors,
    space_runs,
)
from cashg.metrics.csm import (
    SentenceCSM,
    cre_from_rates,
    f1_cursive,
    gap_similarity,
    macro_csm,
    sentence_csm,
    writer_csm,
)

PM, PU, CE, EOC = 0, 1, 2, 3


def test_paper_sss_example():
    assert float(gap_similarity(0.094, 0.222)) == pytest.approx(0.4234, abs=5e-5)


def test_paper_overlapped_kgs_example():
    assert float(gap_similarity(-0.03, -0.01)) == pytest.approx(0.5, abs=1e-12)
    # one side overlapping: penalty times a tiny ratio
    assert float(gap_similarity(-0.03, 0.1)) == pytest.approx(0.5 * 1e-6 / (0.1 + 1e-6))
    assert float(gap_similarity(0.1, 0.1)) == 1.0


def test_paper_cre_example():
    # 10 writers, one sentence of 10 boundaries each; |rate differences| average 0.0656
    rng = np.random.default_rng(0)
    diffs_in_tenths = [1, 0, 1, 0, 0, 1, 0, 1, 1, 0]  # mean 0.05 -> add a 0.0156 writer share
    sentences = []
    for k in diffs_in_tenths:
        gt_pos = int(rng.integers(2, 6))
        sentences.append([_rate_sentence(gt_pos, gt_pos + k, 10)])
    # writer 0 uses 250 boundaries so that its difference is 0.2 + 0.1*(...) giving 0.0656 total
    sentences[0] = [_rate_sentence(50, 50 + 64, 250)]  # |diff| = 64/250 = 0.256
    writers = [writer_csm(s) for s in sentences]
    mean_diff = (0.256 + 0.1 * sum(diffs_in_tenths[1:])) / 10
    assert mean_diff == pytest.approx(0.0656)
    assert macro_csm(writers)["CRE"] == pytest.approx(0.9344, abs=1e-5)


def _rate_sentence(pos_gt, pos_pred, n):
    """SentenceCSM with n boundaries, pos_gt GT positives, pos_pred predicted positives."""
    tp = min(pos_gt, pos_pred)
    return SentenceCSM(n, tp, pos_pred - tp, pos_gt - tp, pos_gt / (n + 1e-6),
                       pos_pred / (n + 1e-6), 0.0, 0, 0.0, 0)


def test_f1_from_confusion_counts():
    # TP 6, FP 2, FN 4: P = 0.75, R = 0.6, F1 = 2/3
    assert f1_cursive(6, 2, 4) == pytest.approx(2 / 3, abs=1e-6)
    assert f1_cursive(0, 0, 0) == 1.0  # no positives either side
    assert f1_cursive(0, 3, 0) == pytest.approx(0.0, abs=1e-6)


def test_boundary_sets():
    text = "ab  c d"
    assert adjacent_boundaries(text).tolist() == [0]
    assert space_runs(text) == [(1, 4), (4, 6)]  # the double space counts once
    assert space_runs(" ab ") == []
    assert adjacent_boundaries("a") .tolist() == []


def _sentence(text, chars):
    """chars: list per character of (list of (x, y), last pen state); spaces may be empty."""
    xy, pen, ci = [], [], []
    for s, (pts, last) in enumerate(chars):
        for k, p in enumerate(pts):
            xy.append(p)
            pen.append(last if k == len(pts) - 1 else PM)
            ci.append(s)
    xy = np.array(xy, float).reshape(-1, 2)
    return text, xy, np.array(pen), np.array(ci)


def _geom(text, chars):
    t, xy, pen, ci = _sentence(text, chars)
    return char_geometry(t, xy, pen, ci), xy


def test_sentence_csm_hand_computed():
    # "ab c": boundary (a,b); space run (b,c). GT: a ends CURSIVE_EOC, gap a->b 0.1, word gap 0.3
    gt, _ = _geom("ab c", [([(0, 0), (0.2, 1)], CE), ([(0.3, 0), (0.5, 1)], EOC), ([], PM),
                            ([(0.8, 0), (1.0, 1)], EOC)])
    pr, _ = _geom("ab c", [([(0, 0), (0.2, 1)], EOC), ([(0.4, 0), (0.5, 1)], EOC), ([], PM),
                            ([(0.65, 0), (1.0, 1)], EOC)])
    sc = sentence_csm(gt, pr, gt.labels, pr.labels)
    assert (sc.n_boundaries, sc.tp, sc.fp, sc.fn) == (1, 0, 0, 1)
    assert sc.rate_gt == pytest.approx(1.0, abs=1e-5) and sc.rate_pred == 0.0
    assert sc.kgs_sum == pytest.approx((0.1 + 1e-6) / (0.2 + 1e-6))
    assert sc.sss_sum == pytest.approx((0.15 + 1e-6) / (0.3 + 1e-6))
    w = writer_csm([sc])
    assert w.f1_cursive == pytest.approx(0.0, abs=1e-6)
    assert w.cre == pytest.approx(0.0, abs=1e-5)


def test_sentences_without_boundaries_count_in_cre():
    with_b = _rate_sentence(1, 1, 2)  # |diff| 0
    no_b = SentenceCSM(0, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0.0, 0)
    wrong = _rate_sentence(2, 0, 2)  # |diff| 1
    w = writer_csm([wrong, no_b, with_b, no_b])
    assert w.cre == pytest.approx(1 - 1 / 4, abs=1e-5)  # the two empty sentences are in |D_w|
    assert cre_from_rates([0.5, 0.0], [0.0, 0.0]) == pytest.approx(0.75)


_EMPTY = SentenceCSM(0, 0, 0, 0, 0.0, 0.0, 0.0, 0, 0.0, 0)  # a sentence with no boundary


def test_writer_without_boundaries_gets_f1_and_cre_one():
    """Item 12a: no cursive boundary on either side -> F1_w = 1 (appendix E convention), and
    CRE_w = 1 (sentences with |B_i| = 0 count with r_i = 0); such a writer is in the macro."""
    no_pos = writer_csm([_rate_sentence(0, 0, 4)])
    assert no_pos.f1_cursive == 1.0 and no_pos.cre == pytest.approx(1.0)
    empty = writer_csm([_EMPTY, _EMPTY])
    assert empty.f1_cursive == 1.0 and empty.cre == pytest.approx(1.0)
    assert empty.kgs is None and empty.sss is None  # nothing to average over: left out
    pos = writer_csm([_rate_sentence(2, 1, 4)])
    macro = macro_csm([no_pos, empty, pos])
    assert macro["F1_cursive"] == pytest.approx((1.0 + 1.0 + pos.f1_cursive) / 3)
    assert macro["CRE"] == pytest.approx((1.0 + 1.0 + pos.cre) / 3)
    assert macro["KGS"] == pytest.approx(np.mean([no_pos.kgs, pos.kgs]))
    assert macro["SSS"] is None  # no space run anywhere -> missing, not zero


def test_writer_with_only_predicted_positives_gets_f1_zero():
    """Item 12b: in a set with GT positives, a writer with none in GT but some predicted
    gets F1_w = 0 by Eq. (f1_cursive), and counts in the macro mean."""
    spurious = writer_csm([_rate_sentence(0, 3, 4)])
    assert spurious.f1_cursive == pytest.approx(0.0, abs=1e-6)
    assert spurious.cre == pytest.approx(1 - 3 / 4, abs=1e-5)
    perfect = writer_csm([_rate_sentence(2, 2, 4)])
    macro = macro_csm([spurious, perfect])
    assert macro["F1_cursive"] == pytest.approx(perfect.f1_cursive / 2)


def test_set_without_gt_positive_reports_missing_not_zero():
    """Item 12c: no positive CursiveEOC boundary in the evaluated ground truth -> F1_cursive
    and CRE are missing (paper Sec. 4.1: ``--``), even when the prediction has positives."""
    spurious = writer_csm([_rate_sentence(0, 3, 4)])
    negative = writer_csm([_rate_sentence(0, 0, 4), _EMPTY])
    macro = macro_csm([spurious, negative])
    assert macro["F1_cursive"] is None and macro["CRE"] is None
    assert macro["KGS"] is not None  # boundaries exist: KGS stays defined
    assert macro_csm([negative])["F1_cursive"] is None
    assert macro_csm([writer_csm([_EMPTY])]) == dict.fromkeys(
        ("F1_cursive", "CRE", "KGS", "SSS"))


def test_missing_characters():
    full = [([(0, 0), (0.2, 1)], EOC), ([(0.3, 0), (0.5, 1)], EOC)]
    gt, _ = _geom("ab", full)
    pr_missing, _ = _geom("ab", [full[0], ([], PM)])
    sc = sentence_csm(gt, pr_missing, gt.labels, pr_missing.labels)
    assert sc.n_boundaries == 1 and sc.kgs_sum == 0.0  # prediction lacks b: scores 0
    sc2 = sentence_csm(pr_missing, gt, pr_missing.labels, gt.labels)
    assert sc2.n_boundaries == 0 and sc2.dropped == 1  # GT lacks b: boundary not eligible


def test_infer_cursive_heuristic():
    geo, xy = _geom("abc", [([(0, 0), (0.2, 1)], PU), ([(0.203, 1), (0.4, 0)], PU),
                            ([(0.5, 0), (0.6, 1)], PU)])
    labels = infer_cursive_labels(geo, xy, 0.005)
    assert labels.tolist() == [CE, EOC, EOC]  # 0.003 < tau; 0.1+ > tau


def test_segmentation_errors():
    assert segmentation_errors("ab c", np.array([0, 0, 1, 2, 3])) == {}
    errs = segmentation_errors("abcd", np.array([0, 2, 1, 0, 2]))
    assert errs == {0: "not contiguous", 1: "out of order", 2: "not contiguous", 3: "no points"}
