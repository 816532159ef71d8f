"""Bootstrap intervals over sentences (the report's Table 3 spread): hand-made per-sentence
tables with known answers, and the full-sample recomputation against the evaluate stage."""

import numpy as np
import pandas as pd
import pytest

from cashg.evaluation.bootstrap import (
    Interval,
    bootstrap_ablation,
    metric_replicates,
    percentile_interval,
    read_sentences,
    resample_counts,
)

CELL_KEYS = ("F1_cursive", "CRE", "KGS", "SSS", "DTW_norm", "DTW_raw")


def _table(n_writers: int = 3, per_writer: int = 8, seed: int = 0, dtw: float | None = None,
           shift: float = 0.0) -> pd.DataFrame:
    """A sentences.csv-like table: random CSM ingredients and DTW per sentence (``dtw``: the
    same DTW everywhere), every DTW raised by ``shift``."""
    rng = np.random.default_rng(seed)
    rows = []
    for w in range(n_writers):
        for j in range(per_writer):
            nb = int(rng.integers(1, 12))
            tp, fp = int(rng.integers(0, nb + 1)), int(rng.integers(0, 3))
            fn = int(rng.integers(0, nb - tp + 1))
            runs = int(rng.integers(0, 4))
            norm = float(dtw if dtw is not None else rng.uniform(1.0, 5.0)) + shift
            rows.append({"sentence_id": f"s{w}-{j:02d}", "writer_id": f"w{w}", "text": "ab cd",
                         "n_gt": 100, "n_boundaries": nb, "tp": tp, "fp": fp, "fn": fn,
                         "rate_gt": (tp + fn) / (nb + 1e-6), "rate_pred": (tp + fp) / (nb + 1e-6),
                         "kgs_mean": float(rng.uniform()), "n_space_runs": runs,
                         "sss_mean": float(rng.uniform()) if runs else np.nan,
                         "dtw_raw": norm * 100, "dtw_norm": norm})
    return pd.DataFrame(rows)


def _headline(table: pd.DataFrame) -> dict[str, float]:
    return {k: float(v[0]) for k, v in
            metric_replicates(table, np.ones((1, len(table)))).items()}


def test_resampling_is_stratified_by_writer_and_seeded():
    writers = ["b", "a", "b", "c", "a", "b"]
    counts = resample_counts(writers, 200, seed=7)
    assert counts.shape == (200, 6)
    w = np.array(writers)
    for writer in "abc":  # each writer keeps its number of sentences in every resample
        assert (counts[:, w == writer].sum(axis=1) == (w == writer).sum()).all()
    assert np.array_equal(counts, resample_counts(writers, 200, seed=7))
    assert not np.array_equal(counts, resample_counts(writers, 200, seed=8))
    assert (counts[:, 3] == 1).all()  # a writer with one sentence: always that sentence


def test_constant_metric_gives_a_point_interval():
    table = _table(dtw=2.5)
    reps = metric_replicates(table, resample_counts(table["writer_id"], 300, seed=0))
    assert percentile_interval(reps["DTW_norm"]) == Interval(2.5, 2.5)
    assert percentile_interval(reps["DTW_raw"]) == Interval(250.0, 250.0)
    varying = percentile_interval(reps["KGS"])
    assert varying is not None and varying.low < varying.high  # the others do vary


def test_full_sample_recomputes_the_evaluate_stage_headline(tmp_path):
    """All ones (the full sample) gives exactly what `cashg evaluate` wrote to metrics.json,
    for every metric, read back from the sentences.csv it wrote (writer-macro CSM and DTW)."""
    from cashg.evaluation.evaluate import EvaluationOptions, evaluate
    from cashg.evaluation.outputs import write_outputs
    from cashg.evaluation.perturb import perturb_sentences
    from preprocessing.subsets.synthetic import synthetic_corpus

    corpus = synthetic_corpus("brush", 3, 4, seed=5, words=(2, 5))
    corpus = [s for s in corpus if s.sentence_id not in ("0000-001", "0000-002")]  # 2, 4, 4
    gt = {s.sentence_id: s for s in corpus}
    pred = {s.sentence_id: s for s in perturb_sentences(corpus, 1, 0.02, 0.5, 0.3)}
    result = evaluate(gt, pred, EvaluationOptions(protocol="merged"))
    write_outputs(result, tmp_path / "eval")
    table = read_sentences(tmp_path / "eval" / "sentences.csv")
    full = _headline(table)
    for key in CELL_KEYS:
        assert result.metrics[key] is not None
        assert full[key] == pytest.approx(result.metrics[key], rel=1e-9, abs=1e-12), key
    assert 0 < result.metrics["F1_cursive"] < 1 and result.metrics["DTW_norm"] > 0
    # the headline is writer-macro, not a mean over sentences: the two differ here
    assert full["DTW_norm"] != pytest.approx(table["dtw_norm"].mean(), rel=1e-9)


def test_cer_wer_are_totals_over_sentences():
    """CER / WER: total edits / total reference characters (words), as the recognizer's
    headline; edits recovered from the per-line rate and the reference text."""
    from cashg.recognition.scoring import error_counts

    refs = ["abc de", "a", "hello world here", "xy"]
    hyps = ["abd de", "", "hello wrld her", "xy"]
    per_line = [error_counts([r], [h]) for r, h in zip(refs, hyps)]
    table = pd.DataFrame({"sentence_id": list("abcd"), "writer_id": ["w0", "w0", "w1", "w1"],
                          "text": refs, "cer": [c.cer for c in per_line],
                          "wer": [c.wer for c in per_line]})
    total = error_counts(refs, hyps)
    full = _headline(table)
    assert full["CER"] == pytest.approx(total.cer) and full["WER"] == pytest.approx(total.wer)
    assert full["CER"] != pytest.approx(np.mean(table["cer"]))  # not a mean of line rates


def test_identical_cells_differ_by_exactly_zero():
    table = _table()
    metrics = _headline(table)
    spread = bootstrap_ablation({"full": table, "copy": table.iloc[::-1].copy()},
                                {"full": metrics, "copy": metrics}, "full", keys=CELL_KEYS,
                                n_resamples=200)
    diffs = spread.differences["copy"]
    assert set(diffs) == set(CELL_KEYS)
    for key, d in diffs.items():
        assert d.value == 0.0 and d.interval == Interval(0.0, 0.0), key
        assert d.within and d.n_sentences == len(table)
    assert spread.intervals["copy"] == spread.intervals["full"]  # row order does not matter
    assert spread.unavailable == {} and spread.mismatched == {}


def test_a_cell_worse_on_every_sentence_differs():
    """DTW half a unit worse on every sentence, the same elsewhere: that difference (and only
    that) is beyond the spread, in the worse direction; unpaired intervals would overlap."""
    base = _table(per_writer=10)
    worse = _table(per_writer=10, shift=0.5)
    spread = bootstrap_ablation({"full": base, "worse": worse},
                                {"full": _headline(base), "worse": _headline(worse)}, "full",
                                keys=CELL_KEYS, n_resamples=300)
    d = spread.differences["worse"]
    assert d["DTW_norm"].value == pytest.approx(0.5) and not d["DTW_norm"].within
    assert d["DTW_norm"].interval.low == pytest.approx(0.5)  # paired: the shift is exact
    assert d["DTW_raw"].value == pytest.approx(50.0) and not d["DTW_raw"].within
    assert all(d[k].within for k in ("F1_cursive", "CRE", "KGS", "SSS"))
    a, b = spread.intervals["full"]["DTW_norm"], spread.intervals["worse"]["DTW_norm"]
    assert b.low < a.high  # the cells' own intervals overlap; the paired one does not


def test_bootstrap_is_deterministic_with_its_seed():
    tables = {"full": _table(seed=1), "other": _table(seed=2)}
    metrics = {c: _headline(t) for c, t in tables.items()}
    runs = [bootstrap_ablation(tables, metrics, "full", keys=CELL_KEYS, n_resamples=200,
                               seed=s) for s in (3, 3, 4)]
    assert runs[0] == runs[1]
    assert runs[0].intervals != runs[2].intervals


def test_missing_or_mismatched_inputs_give_no_interval():
    """A cell without per-sentence scores, or whose scores do not reproduce its metrics.json
    (outputs of another run), gets no interval; a metric null in metrics.json gets none."""
    table = _table()
    metrics = _headline(table)
    spread = bootstrap_ablation(
        {"full": table, "old": None, "stale": table, "partial": table},
        {"full": metrics, "old": metrics, "stale": {**metrics, "KGS": metrics["KGS"] + 0.01},
         "partial": {**metrics, "SSS": None}}, "full", keys=CELL_KEYS, n_resamples=100)
    assert "old" in spread.unavailable and "old" not in spread.intervals
    assert spread.mismatched == {"stale": ("KGS",)}
    assert "KGS" not in spread.intervals["stale"] and "KGS" not in spread.differences["stale"]
    assert "SSS" not in spread.intervals["partial"] and "DTW_norm" in spread.intervals["partial"]
    none = bootstrap_ablation({"full": None}, {"full": metrics}, "full", keys=CELL_KEYS)
    assert none.intervals == {} and none.differences == {}


def test_paired_difference_uses_the_common_sentences():
    full = _table()
    fewer = full.iloc[3:].copy()
    fewer["dtw_norm"] += 0.5
    spread = bootstrap_ablation({"full": full, "fewer": fewer},
                                {"full": _headline(full), "fewer": _headline(fewer)}, "full",
                                keys=("DTW_norm",), n_resamples=100)
    d = spread.differences["fewer"]["DTW_norm"]
    assert d.n_sentences == len(fewer) and d.value == pytest.approx(0.5)
    assert spread.n_sentences == {"full": len(full), "fewer": len(fewer)}
