"""Score a prediction ink file against a ground-truth ink file (paper Sec. 4.1, appendix E).

Pipeline per matched sentence id (ids matched exactly; one-sided ids are reported in
``missing``, never dropped silently):

1. apply the protocol's exclusion rule (``excluded``): for ``deepwriting`` the sentences of the
   exclusion record, decided once from the ground truth for every method
   (:mod:`cashg.evaluation.exclusions`, paper Sec. 4.4); check the pair (same text, both sides
   have points) and count segmentation errors of both sides (reported, not a reason to drop);
2. normalise prediction and GT independently (bounding-box origin, divide by height);
3. DTW on *all* points of the sentence, space pseudo-points included (the paper scores the
   whole (x, y) trajectory; spaces carry the word spacing the metric should see), or per glyph
   for the ``sdt_glyph`` protocol; ``DTW_norm = DTW_raw / number of GT points``. The DTW
   definition is the protocol's (exact on the step-2 normalisation; SDT's for ``sdt_glyph``,
   paper Sec. 4.3) unless ``dtw_variant`` names one;
4. CSM on the same normalised coordinates (``cashg.metrics.csm``);
5. (``cashg evaluate --recognizer``) CER / WER and the error share of each character class of
   both sides of the scored pairs, by a benchmark's recognizer
   (:mod:`cashg.evaluation.legibility`); ``None`` until then.

Aggregation is writer-macro: DTW_raw and DTW_norm are averaged per writer (over sentences, or
glyphs) and then over writers; DTW_std is the population std of a writer's DTW_norm values,
averaged over writers. Writers are the ground truth's ``writer_id``. A protocol with
``dtw_aggregation = "unit"`` (``sdt_glyph``: SDT averages over all generated glyphs) reports
the mean of DTW_raw / DTW_norm and the population std of DTW_norm over all units instead.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pandas as pd
from tqdm import tqdm

from cashg.core.config.evaluate import EvaluateConfig
from cashg.core.geometry.normalize import normalize_height_lenient
from cashg.core.ink import InkFile, InkSentence
from cashg.evaluation.exclusions import (
    ExclusionRecord,
    ExclusionRecordError,
    check_record,
    read_exclusions,
)
from cashg.evaluation.protocols import (
    DTW_VARIANTS,
    METRIC_KEYS,
    RECOGNITION_KEYS,
    STYLE_KEYS,
    Protocol,
    get_protocol,
)
from cashg.evaluation.runaway import RUNAWAY_DEFINITION, count_runaway
from cashg.metrics.boundaries import (
    char_geometry,
    infer_cursive_labels,
    is_space,
    segmentation_errors,
)
from cashg.metrics.csm import CSM_KEYS, SentenceCSM, macro_csm, sentence_csm, writer_csm
from cashg.metrics.dtw import dtw_batch
from cashg.metrics.placement import (
    PLACEMENT_DEFINITION,
    line_placement,
    summarize_placement,
)
from cashg.metrics.variants import dtw_olhwg, dtw_sdt

__all__ = [
    "EvaluationOptions",
    "EvaluationResult",
    "evaluate",
    "evaluate_files",
    "load_pair",
]

_DTW_CHUNK = 64  # pairs per parallel DTW call (progress granularity)
_DTW_DEFINITIONS = {  # details.json states which definition a number uses (docs/metrics.md)
    "exact": "exact DTW, Euclidean step cost summed along the path, each side translated to its"
             " bounding-box origin and divided by its height (paper Sec. 4.1); / GT points",
    "sdt": "SDT's DTW: each side moment-normalised as in SDT and started at the origin, FastDTW"
           " radius 1 with Euclidean step cost; / GT points (cashg.metrics.variants.dtw_sdt)",
    "olhwg": "OLHWG's DTW: centroid and height normalisation, RDP, FastDTW radius 1 with L1"
             " step cost; / GT path length (cashg.metrics.variants.dtw_olhwg)",
}


@dataclass(frozen=True)
class EvaluationOptions(EvaluateConfig):
    """What to score and how: the ``evaluate`` params section plus the runtime ``workers``."""

    workers: int = 2  # DTW threads (a runtime knob, not a param)

    @classmethod
    def from_config(cls, cfg: EvaluateConfig, **overrides: Any) -> EvaluationOptions:
        """From an ``EvaluateConfig``; ``overrides`` that are ``None`` are ignored."""
        fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(EvaluateConfig)}
        fields.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**fields)


@dataclass
class EvaluationResult:
    """Metrics (exactly :data:`~cashg.evaluation.protocols.ALL_KEYS`, ``None`` = undefined)
    and the tables behind them."""

    metrics: dict[str, float | None]
    sentences: pd.DataFrame  # one row per scored sentence
    units: pd.DataFrame  # one row per DTW unit (sentence, or glyph for sdt_glyph)
    writers: pd.DataFrame  # one row per writer
    missing: pd.DataFrame  # sentence_id, side, reason
    excluded: pd.DataFrame  # sentence_id, reason
    details: dict[str, Any] = field(default_factory=dict)


_MISSING_COLS = ["sentence_id", "side", "reason"]
_EXCLUDED_COLS = ["sentence_id", "writer_id", "reason"]


class EmptyGroundTruthError(ValueError):
    """A ground-truth ink file holds no sentence: every metric would be None."""


def load_pair(gt_path: str | Path, pred_path: str | Path) -> tuple[dict, dict]:
    """Read both ink files fully (malformed files raise ``InkFormatError`` naming the problem).

    Raises :class:`EmptyGroundTruthError` when the ground truth holds no sentence (naming the
    file and, when recorded, its benchmark and split).
    """
    out = []
    for k, path in enumerate((gt_path, pred_path)):
        with InkFile(path) as f:
            out.append({s.sentence_id: s for s in f})
            if k == 0 and not out[0]:
                where = ", ".join(f"{a} {f.attrs[a]!s}" for a in ("benchmark", "split")
                                  if a in f.attrs)
                raise EmptyGroundTruthError(
                    f"{path}: ground truth has 0 sentences{f' ({where})' if where else ''};"
                    " nothing to evaluate (rebuild the subsets: an empty split is an error there)")
    return out[0], out[1]


def evaluate_files(
    gt_path: str | Path, pred_path: str | Path, options: EvaluationOptions, progress: bool = True,
    exclusions_path: str | Path | None = None,
) -> EvaluationResult:
    """Read two cashg-ink files (and the exclusion record, if given) and :func:`evaluate`."""
    gt, pred = load_pair(gt_path, pred_path)
    record = read_exclusions(exclusions_path) if exclusions_path is not None else None
    result = evaluate(gt, pred, options, progress=progress, exclusions=record)
    result.details.update({"gt": str(gt_path), "pred": str(pred_path)})
    return result


def evaluate(
    gt: Mapping[str, InkSentence],
    pred: Mapping[str, InkSentence],
    options: EvaluationOptions,
    progress: bool = False,
    exclusions: ExclusionRecord | None = None,
) -> EvaluationResult:
    """Score ``pred`` against ``gt`` (both keyed by sentence id) under ``options.protocol``.

    A protocol that excludes sentences (``deepwriting``) needs ``exclusions``, the record of
    :func:`cashg.evaluation.exclusions.exclusion_record` for this ``gt``; without it this
    raises :class:`ExclusionRecordError`. Other protocols exclude nothing, but a record given
    to them must still be this ``gt``'s (else :class:`ExclusionRecordError`).
    """
    protocol = get_protocol(options.protocol)
    excluded_ids = _excluded_ids(protocol, gt, exclusions, options.seg_error_threshold)
    requested = options.dtw_variant
    if requested not in ("protocol", *DTW_VARIANTS):
        raise ValueError(f"unknown dtw variant {requested!r} (protocol, {', '.join(DTW_VARIANTS)})")
    options = dataclasses.replace(
        options, dtw_variant=protocol.dtw_variant if requested == "protocol" else requested
    )
    missing: list[tuple[str, str, str]] = []
    excluded: list[tuple[str, str, str]] = []
    for sid in sorted(set(pred) - set(gt)):
        missing.append((sid, "gt", "sentence in prediction but not in ground truth"))
    csm_wanted = bool(set(CSM_KEYS) & protocol.metrics) and not protocol.glyph_level

    units_a: list[np.ndarray] = []  # GT trajectories of DTW units (normalised for exact)
    units_b: list[np.ndarray] = []
    unit_rows: list[dict[str, Any]] = []
    sentence_rows: list[dict[str, Any]] = []
    csm_by_writer: dict[str, list[SentenceCSM]] = {}
    placements = []  # (sentence id, generated, ground truth) LinePlacement
    ids = sorted(gt)
    bar = tqdm(ids, desc="evaluate: prepare", unit="sent", disable=not progress, file=sys.stderr)
    for sid in bar:
        g = gt[sid]
        if sid in excluded_ids:
            excluded.append((sid, g.writer_id, excluded_ids[sid]))
            continue
        p = pred.get(sid)
        if p is None:
            missing.append((sid, "pred", "sentence in ground truth but not in prediction"))
            continue
        if g.text != p.text:
            missing.append((sid, "pair", f"texts differ: GT {g.text!r} vs prediction {p.text!r}"))
            continue
        if len(g.points) == 0 or len(p.points) == 0:
            side = "gt" if len(g.points) == 0 else "pred"
            missing.append((sid, side, f"{'ground truth' if side == 'gt' else 'prediction'} has no points"))
            continue
        err_g = segmentation_errors(g.text, g.char_index)
        err_p = segmentation_errors(p.text, p.char_index)
        xy_g = normalize_height_lenient(g.xy)  # (N, 2) float64
        xy_p = normalize_height_lenient(p.xy)  # (M, 2) float64
        row: dict[str, Any] = {
            "sentence_id": sid, "writer_id": g.writer_id, "text": g.text,
            "n_gt": len(g.points), "n_pred": len(p.points),
            "seg_errors_gt": len(err_g), "seg_errors_pred": len(err_p),
        }
        if protocol.glyph_level:
            _glyph_units(g, p, sid, options, units_a, units_b, unit_rows, missing)
        else:
            _add_unit(g.xy, g.pen, p.xy, p.pen, xy_g, xy_p, sid, g.writer_id, options,
                      units_a, units_b, unit_rows)
        if not protocol.glyph_level:
            place_g = line_placement(g.text, g.xy, g.char_index)
            place_p = line_placement(p.text, p.xy, p.char_index)
            placements.append((sid, place_p, place_g))
            row.update({"drift": place_p.drift, "drift_gt": place_g.drift,
                        "wander": place_p.wander, "wander_gt": place_g.wander,
                        "gap": place_p.median_gap, "gap_gt": place_g.median_gap,
                        "gap_ratio": _ratio(place_p.median_gap, place_g.median_gap)})
        if csm_wanted:
            geo_g = char_geometry(g.text, xy_g, g.pen, g.char_index)
            geo_p = char_geometry(p.text, xy_p, p.pen, p.char_index)
            lab_p = (infer_cursive_labels(geo_p, xy_p, options.tau_conn)
                     if options.infer_cursive else geo_p.labels)
            sc = sentence_csm(geo_g, geo_p, geo_g.labels, lab_p, options.rho, options.eps)
            csm_by_writer.setdefault(g.writer_id, []).append(sc)
            row.update({
                "n_boundaries": sc.n_boundaries, "tp": sc.tp, "fp": sc.fp, "fn": sc.fn,
                "rate_gt": sc.rate_gt, "rate_pred": sc.rate_pred,
                "kgs_mean": sc.kgs_sum / sc.n_boundaries if sc.n_boundaries else None,
                "n_space_runs": sc.n_space_runs,
                "sss_mean": sc.sss_sum / sc.n_space_runs if sc.n_space_runs else None,
                "dropped_boundaries": sc.dropped,
            })
        sentence_rows.append(row)

    _run_exact_dtw(units_a, units_b, unit_rows, options, progress)
    units = pd.DataFrame(unit_rows, columns=["unit_id", "sentence_id", "writer_id", "n_gt",
                                             "n_pred", "dtw_raw", "dtw_norm"])
    sentences = pd.DataFrame(sentence_rows)
    if not protocol.glyph_level and len(sentences):
        sentences = sentences.merge(units[["sentence_id", "dtw_raw", "dtw_norm"]],
                                    on="sentence_id", how="left")
    writers, metrics = _aggregate(units, csm_by_writer, protocol.metrics, options.eps,
                                  protocol.dtw_aggregation)
    scored = [r["sentence_id"] for r in sentence_rows]
    runaway = count_runaway(pred[i] for i in scored)
    metrics.update(runaway.metrics())
    metrics["RUNAWAY_gt"] = count_runaway(gt[i] for i in scored).runaway
    placement = summarize_placement(placements)
    metrics.update(placement.metrics())
    metrics.update(dict.fromkeys(STYLE_KEYS))  # filled with a style scorer (cashg evaluate)
    missing_df = pd.DataFrame(missing, columns=_MISSING_COLS)
    details = {
        "protocol": protocol.name,
        "protocol_description": protocol.description,
        "dtw_variant": options.dtw_variant,
        "dtw_variant_requested": requested,
        "dtw_definition": _DTW_DEFINITIONS[options.dtw_variant],
        "dtw_aggregation": ("mean over all units" if protocol.dtw_aggregation == "unit"
                            else "writer-macro mean"),
        "options": asdict(options),
        "n_gt": len(gt), "n_pred": len(pred),
        "n_scored": len(sentence_rows), "n_units": len(unit_rows),
        "n_missing": len(missing), "n_excluded": len(excluded),
        "exclusions": _exclusions_detail(protocol, exclusions),
        "n_writers": int(len(writers)),
        "runaway": {"definition": RUNAWAY_DEFINITION, "lines": runaway.reasons},
        "placement": {"definition": PLACEMENT_DEFINITION, "lines": placement.lines,
                      "drift_lines": placement.drift_lines, "gap_lines": placement.gap_lines,
                      "left_out": placement.skipped,
                      **({"not_measured": "glyph-level protocol: glyphs, not lines"}
                         if protocol.glyph_level else {})},
        "dtw_points": ("all points of each glyph" if protocol.glyph_level
                       else "all points of the sentence, space pseudo-points included"),
        "normalisation": ("CSM (and exact DTW): each side on its own, translated to its"
                          " bounding-box origin and divided by its height"),
    }
    return EvaluationResult(metrics, sentences, units, writers, missing_df,
                            pd.DataFrame(excluded, columns=_EXCLUDED_COLS), details)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else a / b


def _excluded_ids(
    protocol: Protocol, gt: Mapping[str, InkSentence], record: ExclusionRecord | None,
    threshold: int,
) -> dict[str, str]:
    """``{sentence_id: reason}`` the protocol excludes, from the checked ``record``. A given
    record is checked against ``gt`` under every protocol: a record of another ground truth
    (another benchmark or split) or threshold is refused even where nothing is excluded."""
    if record is not None:
        check_record(record, gt, threshold)
    if not protocol.exclude_segmentation_errors:
        return {}
    if record is None:
        raise ExclusionRecordError(
            f"protocol {protocol.name!r} excludes the sentences whose ground truth has"
            f" segmentation errors in >= {threshold} characters, decided once from the ground"
            " truth for every method (paper Sec. 4.4); no exclusion record was given. Pass the"
            " evaluate_gt stage's results/evaluate_gt/<benchmark>/exclusions.json"
            " (cashg evaluate --exclusions FILE), or make one with"
            " python -m cashg.evaluation.stage --gt GT.h5 --out DIR")
    return {sid: f"{reason} [{record.source or 'exclusion record'}]"
            for sid, (_, reason) in record.excluded.items()}


def _exclusions_detail(protocol: Protocol, record: ExclusionRecord | None) -> dict[str, Any]:
    if not protocol.exclude_segmentation_errors:
        detail = {"applied": False, "reason": f"protocol {protocol.name!r} excludes nothing"}
        if record is not None:  # checked against the ground truth all the same
            detail["record"] = record.source or "in memory"
        return detail
    assert record is not None  # _excluded_ids refused a missing record
    return {"applied": True, "record": record.source or "in memory",
            "threshold": record.threshold, "gt_sha256": record.gt_digest,
            "n_excluded": len(record.excluded), "decided_from": "ground truth only"}


def _add_unit(
    raw_g: np.ndarray, pen_g: np.ndarray, raw_p: np.ndarray, pen_p: np.ndarray,
    xy_g: np.ndarray, xy_p: np.ndarray, unit_id: str, writer: str,
    options: EvaluationOptions, units_a: list, units_b: list, rows: list,
) -> None:
    """Queue one DTW unit (exact: batched later) or score it now (peer variants)."""
    sid = unit_id.split("#", 1)[0]
    row = {"unit_id": unit_id, "sentence_id": sid, "writer_id": writer,
           "n_gt": len(raw_g), "n_pred": len(raw_p), "dtw_raw": np.nan, "dtw_norm": np.nan}
    if options.dtw_variant == "exact":
        units_a.append(xy_g)
        units_b.append(xy_p)
    elif options.dtw_variant == "sdt":
        row["dtw_raw"], row["dtw_norm"] = dtw_sdt(raw_g, pen_g, raw_p, pen_p, options.sdt_radius)
    else:
        row["dtw_raw"], row["dtw_norm"] = dtw_olhwg(
            raw_g, pen_g, raw_p, pen_p, options.olhwg_rdp_epsilon, options.olhwg_radius
        )
    rows.append(row)


def _glyph_units(
    g: InkSentence, p: InkSentence, sid: str, options: EvaluationOptions,
    units_a: list, units_b: list, rows: list, missing: list,
) -> None:
    """SDT glyph protocol: one DTW unit per non-space character, each normalised on its own."""
    for s, ch in enumerate(g.text):
        if is_space(ch):
            continue
        mg = g.char_index == s
        mp = p.char_index == s
        uid = f"{sid}#{s}"
        if not mg.any() or not mp.any():
            side = "gt" if not mg.any() else "pred"
            missing.append((uid, side, f"glyph {ch!r} (position {s}) has no points"))
            continue
        _add_unit(g.xy[mg], g.pen[mg], p.xy[mp], p.pen[mp],
                  normalize_height_lenient(g.xy[mg]), normalize_height_lenient(p.xy[mp]), uid, g.writer_id, options, units_a, units_b, rows)


def _run_exact_dtw(
    units_a: list, units_b: list, rows: list, options: EvaluationOptions, progress: bool
) -> None:
    """Exact DTW of the queued units in parallel chunks; fills dtw_raw / dtw_norm in ``rows``."""
    if options.dtw_variant != "exact" or not units_a:
        return
    numba.set_num_threads(max(1, min(options.workers, numba.config.NUMBA_NUM_THREADS)))
    raw = np.empty(len(units_a))
    with tqdm(total=len(units_a), desc="evaluate: DTW", unit="pair", disable=not progress,
              file=sys.stderr) as bar:
        for start in range(0, len(units_a), _DTW_CHUNK):
            stop = min(start + _DTW_CHUNK, len(units_a))
            raw[start:stop] = dtw_batch(units_a[start:stop], units_b[start:stop])
            bar.update(stop - start)
    for row, value in zip(rows, raw):
        row["dtw_raw"] = float(value)
        row["dtw_norm"] = float(value) / row["n_gt"]


def _aggregate(
    units: pd.DataFrame, csm_by_writer: dict[str, list[SentenceCSM]], wanted: frozenset[str],
    eps: float, dtw_aggregation: str = "writer",
) -> tuple[pd.DataFrame, dict[str, float | None]]:
    """Per-writer table and the writer-macro metrics (``None`` where undefined or not reported)."""
    writer_ids = sorted(set(units["writer_id"]) | set(csm_by_writer))
    rows = []
    for w in writer_ids:
        row: dict[str, Any] = {"writer_id": w}
        u = units[units["writer_id"] == w]
        if len(u):
            norm = u["dtw_norm"].to_numpy(dtype=np.float64)
            row.update({"n_units": len(u), "DTW_raw": float(u["dtw_raw"].mean()),
                        "DTW_norm": float(norm.mean()), "DTW_std": float(norm.std(ddof=0))})
        if w in csm_by_writer:
            wc = writer_csm(csm_by_writer[w], eps)
            row.update({"n_sentences": wc.n_sentences, "n_boundaries": wc.n_boundaries,
                        "n_space_runs": wc.n_space_runs, "TP": wc.tp, "FP": wc.fp, "FN": wc.fn,
                        "F1_cursive": wc.f1_cursive, "CRE": wc.cre, "KGS": wc.kgs,
                        "SSS": wc.sss})
            row["_csm"] = wc
        rows.append(row)
    metrics: dict[str, float | None] = dict.fromkeys(METRIC_KEYS)
    csm = macro_csm([r["_csm"] for r in rows if "_csm" in r]) if csm_by_writer else {}
    for key in CSM_KEYS:
        metrics[key] = csm.get(key)
    if dtw_aggregation == "unit":
        norm = units["dtw_norm"].to_numpy(dtype=np.float64)
        if len(norm):
            metrics.update({"DTW_raw": float(units["dtw_raw"].mean()),
                            "DTW_norm": float(norm.mean()), "DTW_std": float(norm.std(ddof=0))})
    else:
        for key in ("DTW_raw", "DTW_norm", "DTW_std"):
            vals = [r[key] for r in rows if key in r]
            metrics[key] = float(np.mean(vals)) if vals else None
    metrics = {k: (v if k in wanted else None) for k, v in metrics.items()}
    metrics.update(dict.fromkeys(RECOGNITION_KEYS))  # filled by cashg.evaluation.legibility
    writers = pd.DataFrame([{k: v for k, v in r.items() if k != "_csm"} for r in rows])
    return writers, metrics
