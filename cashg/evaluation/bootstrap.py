"""Bootstrap intervals over sentences for the ablation (Table 3): how far each value would move
if other sentences of the same writers had been scored, and whether a cell differs from the
full model by more than that.

The evaluate stage writes one row per scored sentence (``results/evaluate/<cell>/
sentences.csv``) holding every ingredient of the headline metrics. A resample draws, for each
writer, as many of that writer's sentences as it has, with replacement (a percentile bootstrap
stratified by writer, so every writer stays in every resample as in the writer-macro headline),
and recomputes each metric exactly the way ``metrics.json`` aggregates it
(:func:`cashg.evaluation.evaluate._aggregate`, :mod:`cashg.metrics.csm`,
:mod:`cashg.evaluation.legibility`):

- ``F1_cursive``: per writer from the summed TP / FP / FN (``eps`` as in the paper, 1 when the
  writer has no positive on either side), mean over writers; undefined when the resample's
  ground truth has no positive;
- ``CRE``: per writer ``max(0, 1 - mean |r_hat_i - r_i|)`` over its sentences, mean over
  writers; undefined as F1_cursive;
- ``KGS`` / ``SSS``: per writer the summed gap scores over its summed boundaries / space runs
  (``+ eps``), mean over the writers that have any;
- ``DTW_raw`` / ``DTW_norm``: per writer the mean over its sentences, mean over writers
  (protocols with writer-macro DTW; glyph-level protocols have no per-sentence DTW);
- ``CER`` / ``WER``: total edits / total reference characters or words (edits recovered from
  the per-sentence rate and the reference text).

Paired comparison: the cells are scored on the same sentences, so one resample of the common
sentences is applied to both, and the interval of ``cell - reference`` is read from the same
resamples. A difference whose interval contains 0 is *within the spread*. The intervals cover
the sampling of sentences only: not the writers (a writer-level bootstrap), not training-seed
variation.

Every function here is pure; :func:`read_sentences` is the one reader. The resampling is
seeded (:data:`SEED`, :data:`RESAMPLES`), so a report built twice shows the same intervals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = [
    "EPS",
    "KEYS",
    "LEVEL",
    "RESAMPLES",
    "SEED",
    "AblationSpread",
    "Interval",
    "PairedDifference",
    "bootstrap_ablation",
    "metric_replicates",
    "percentile_interval",
    "read_sentences",
    "resample_counts",
]

RESAMPLES = 1000  # bootstrap resamples of the report's Table 3
SEED = 0  # numpy Generator seed of those resamples
LEVEL = 0.95  # two-sided percentile interval
EPS = 1e-6  # the paper's eps (appendix E) when details.json does not record it
KEYS = ("F1_cursive", "CRE", "KGS", "SSS", "DTW_norm", "DTW_raw", "CER", "WER")
_RTOL = 1e-6  # full-sample recomputation vs metrics.json: beyond this, no interval is shown
_MIN_DEFINED = 0.5  # share of resamples in which a metric must be defined to get an interval


@dataclass(frozen=True)
class Interval:
    """A two-sided percentile interval ``[low, high]``."""

    low: float
    high: float

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


@dataclass(frozen=True)
class PairedDifference:
    """``cell - reference`` on their common sentences, and its paired bootstrap interval."""

    value: float
    interval: Interval
    n_sentences: int  # the common sentences both were recomputed on

    @property
    def within(self) -> bool:
        """Whether the difference is within the bootstrap spread (its interval holds 0)."""
        return self.interval.contains(0.0)


@dataclass(frozen=True)
class AblationSpread:
    """Bootstrap intervals of the ablation cells and their paired differences to the
    reference (the full model), as :func:`bootstrap_ablation` computes them."""

    reference: str
    n_resamples: int
    seed: int
    level: float
    intervals: dict[str, dict[str, Interval]]  # cell -> metric -> interval of its value
    differences: dict[str, dict[str, PairedDifference]]  # cell -> metric -> vs reference
    n_sentences: dict[str, int]  # cell -> sentences its intervals resample
    unavailable: dict[str, str] = field(default_factory=dict)  # cell -> why no spread at all
    mismatched: dict[str, tuple[str, ...]] = field(default_factory=dict)  # cell -> metrics
    # whose recomputation from sentences.csv does not give metrics.json's value (no interval)


def read_sentences(path: str | Path) -> pd.DataFrame:
    """``sentences.csv`` of an evaluate output, texts and ids as written (no NA guessing:
    a text ``NA`` stays a text), every other column a float (blank = NaN)."""
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    for col in table.columns:
        if col not in ("sentence_id", "writer_id", "text", "decoded", "decoded_gt"):
            table[col] = pd.to_numeric(table[col].replace("", np.nan), errors="coerce")
    return table


def resample_counts(writer_ids: Sequence[str], n_resamples: int = RESAMPLES,
                    seed: int = SEED) -> np.ndarray:
    """``(n_resamples, n)`` float: how often each of ``n`` sentences is drawn in each resample,
    drawing for every writer as many of its sentences as it has, with replacement. Writers are
    drawn in sorted order from one ``numpy.random.default_rng(seed)``: the same ids give the
    same counts."""
    writers = np.asarray(writer_ids, dtype=object)
    counts = np.zeros((n_resamples, len(writers)))
    rng = np.random.default_rng(seed)
    rows = np.arange(n_resamples)[:, None]
    for writer in sorted(set(writers.tolist())):
        own = np.flatnonzero(writers == writer)
        draws = own[rng.integers(0, len(own), size=(n_resamples, len(own)))]
        np.add.at(counts, (np.broadcast_to(rows, draws.shape), draws), 1.0)
    return counts


def _writer_sums(weights: np.ndarray, values: np.ndarray, onehot: np.ndarray) -> np.ndarray:
    """``(B, K)``: per resample and writer, the weighted sum of ``values`` (NaN counts 0)."""
    return (weights * np.nan_to_num(values)) @ onehot


def _macro(per_writer: np.ndarray, defined: np.ndarray) -> np.ndarray:
    """``(B,)``: mean over the writers where ``defined``, NaN where none is."""
    n = defined.sum(axis=1)
    total = np.where(defined, per_writer, 0.0).sum(axis=1)
    return np.divide(total, n, out=np.full(len(n), np.nan), where=n > 0)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.full(np.shape(num), np.nan), where=den > 0)


def metric_replicates(table: pd.DataFrame, counts: np.ndarray,
                      eps: float = EPS) -> dict[str, np.ndarray]:
    """Each metric of :data:`KEYS` that ``table`` (one row per scored sentence, the columns of
    ``sentences.csv``) has the ingredients of, recomputed on every resample: ``counts[b, i]``
    is the weight of row ``i`` in resample ``b`` (all ones: the full sample, the headline
    value). Returns metric -> ``(B,)`` float, NaN where undefined in a resample."""
    weights = np.asarray(counts, dtype=np.float64)
    writers = table["writer_id"].astype(str).to_numpy()
    names = sorted(set(writers.tolist()))
    onehot = (writers[:, None] == np.asarray(names, dtype=object)[None, :]).astype(np.float64)
    n_w = weights @ onehot  # (B, K) sentences of each writer in each resample
    present = n_w > 0
    cols = set(table.columns)
    col = {c: table[c].to_numpy(dtype=np.float64) for c in cols
           if c not in ("sentence_id", "writer_id", "text", "decoded", "decoded_gt")}
    out: dict[str, np.ndarray] = {}

    if {"tp", "fp", "fn", "rate_gt", "rate_pred"} <= cols:
        tp, fp, fn = (_writer_sums(weights, col[c], onehot) for c in ("tp", "fp", "fn"))
        prec = tp / (tp + fp + eps)
        rec = tp / (tp + fn + eps)
        f1 = np.where((tp + fn == 0) & (tp + fp == 0), 1.0, 2.0 * prec * rec / (prec + rec + eps))
        gap = _writer_sums(weights, np.abs(col["rate_pred"] - col["rate_gt"]), onehot)
        cre = np.maximum(0.0, 1.0 - _ratio(gap, n_w))
        any_positive = (tp + fn).sum(axis=1) > 0  # the ground truth decides (macro_csm)
        out["F1_cursive"] = np.where(any_positive, _macro(f1, present), np.nan)
        out["CRE"] = np.where(any_positive, _macro(cre, present), np.nan)
    for key, mean_col, n_col in (("KGS", "kgs_mean", "n_boundaries"),
                                 ("SSS", "sss_mean", "n_space_runs")):
        if {mean_col, n_col} <= cols:
            n = _writer_sums(weights, col[n_col], onehot)
            total = _writer_sums(weights, col[mean_col] * col[n_col], onehot)
            out[key] = _macro(total / (n + eps), n > 0)
    for key, c in (("DTW_norm", "dtw_norm"), ("DTW_raw", "dtw_raw")):
        if c in cols:
            valid = np.isfinite(col[c]).astype(np.float64)
            per_writer = _ratio(_writer_sums(weights, col[c], onehot),
                                _writer_sums(weights, valid, onehot))
            out[key] = _macro(per_writer, np.isfinite(per_writer))
    if "text" in cols:
        texts = table["text"].astype(str).tolist()
        for key, c, length in (("CER", "cer", [len(t) for t in texts]),
                               ("WER", "wer", [len(t.split()) for t in texts])):
            if c in cols:
                size = np.asarray(length, dtype=np.float64)
                edits = np.rint(np.nan_to_num(col[c]) * size)  # a line's rate = edits / size
                out[key] = _ratio(weights @ edits, weights @ size)
    return out


def percentile_interval(values: np.ndarray, level: float = LEVEL) -> Interval | None:
    """The two-sided percentile interval of the defined (finite) ``values``; ``None`` when
    fewer than half of them are defined."""
    values = np.asarray(values, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if len(finite) == 0 or len(finite) < _MIN_DEFINED * len(values):
        return None
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(finite, [tail, 100.0 - tail])
    return Interval(float(low), float(high))


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    return table.sort_values("sentence_id", kind="mergesort").reset_index(drop=True)


def _matches(recomputed: float, headline: float | None) -> bool:
    return (headline is not None and np.isfinite(recomputed)
            and abs(recomputed - headline) <= _RTOL * max(1.0, abs(headline)))


def bootstrap_ablation(
    tables: Mapping[str, pd.DataFrame | None],
    metrics: Mapping[str, Mapping[str, float | None]],
    reference: str | None,
    keys: Sequence[str] = KEYS,
    eps: float | Mapping[str, float] = EPS,
    n_resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> AblationSpread:
    """Bootstrap intervals of every cell's ``keys`` and paired differences to ``reference``.

    ``tables``: cell -> its per-sentence table (:func:`read_sentences`; ``None`` when it has
    none); ``metrics``: cell -> its ``metrics.json``; ``eps``: the CSM ``eps`` (one, or per
    cell). A metric gets an interval only where ``metrics.json`` has a value and the
    recomputation on the full sample gives that value (else the cell is listed in
    ``mismatched``: its table does not hold what the headline was computed from).
    Differences use the sentences both cells scored, one set of resamples for both.
    """
    def eps_of(cell: str) -> float:
        return float(eps[cell]) if isinstance(eps, Mapping) else float(eps)

    intervals: dict[str, dict[str, Interval]] = {}
    n_sentences: dict[str, int] = {}
    unavailable: dict[str, str] = {}
    mismatched: dict[str, tuple[str, ...]] = {}
    usable: dict[str, tuple[str, ...]] = {}  # cell -> keys whose headline the table reproduces
    prepared: dict[str, pd.DataFrame] = {}
    for cell, table in tables.items():
        if table is None or len(table) == 0 or not {"sentence_id", "writer_id"} <= set(table):
            unavailable[cell] = ("no per-sentence scores" if table is None or len(table) == 0
                                 else "its per-sentence table has no sentence or writer ids")
            continue
        table = _sorted(table)
        prepared[cell] = table
        headline = metrics.get(cell) or {}
        full = metric_replicates(table, np.ones((1, len(table))), eps_of(cell))
        wanted = [k for k in keys if headline.get(k) is not None]
        usable[cell] = tuple(k for k in wanted if k in full and _matches(full[k][0], headline[k]))
        bad = tuple(k for k in wanted if k not in usable[cell])
        if bad:
            mismatched[cell] = bad
        reps = metric_replicates(table, resample_counts(table["writer_id"].astype(str).tolist(),
                                                        n_resamples, seed), eps_of(cell))
        intervals[cell] = {k: iv for k in usable[cell]
                           if (iv := percentile_interval(reps[k], level)) is not None}
        n_sentences[cell] = len(table)

    differences: dict[str, dict[str, PairedDifference]] = {}
    if reference in prepared:
        ref = prepared[reference]
        for cell, table in prepared.items():
            if cell == reference:
                continue
            common = sorted(set(ref["sentence_id"]) & set(table["sentence_id"]))
            both = [k for k in usable[cell] if k in usable[reference]]
            if not common or not both:
                continue
            a = ref[ref["sentence_id"].isin(common)].reset_index(drop=True)
            b = table[table["sentence_id"].isin(common)].reset_index(drop=True)
            counts = resample_counts(a["writer_id"].astype(str).tolist(), n_resamples, seed)
            b = b.assign(writer_id=a["writer_id"])  # the ground truth's writers, one grouping
            ones = np.ones((1, len(common)))
            point_a = metric_replicates(a, ones, eps_of(reference))
            point_b = metric_replicates(b, ones, eps_of(cell))
            reps_a = metric_replicates(a, counts, eps_of(reference))
            reps_b = metric_replicates(b, counts, eps_of(cell))
            found = {}
            for k in both:
                iv = percentile_interval(reps_b[k] - reps_a[k], level)
                value = float(point_b[k][0] - point_a[k][0])
                if iv is not None and np.isfinite(value):
                    found[k] = PairedDifference(value, iv, len(common))
            differences[cell] = found
    return AblationSpread(reference or "", n_resamples, seed, level, intervals, differences,
                          n_sentences, unavailable, mismatched)
