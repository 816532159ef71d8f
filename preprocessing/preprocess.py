"""Per-record preprocessing: :class:`InkRecord` -> :class:`cashg.core.ink.InkSentence` (paper app. B).

Order (paper app. B, docs/conventions.md): segmentation review on the recorded indices (index-level, so it
commutes with the affine steps; see :mod:`preprocessing.segmentation_review`) -> deskew ->
point-density control -> height normalisation (bbox height exactly 1.0) -> pen states -> space
pseudo-points. Resampling spacing and RDP epsilon are in units of the deskewed sentence height,
so they mean the same before and after normalisation.

Point-density control follows the dataset language's policy (``preprocess.point_density``):

* ``resample`` (English; paper app. B.2, "Resampling and RDP Settings"): arc-length resampling
  of every piece at ``resample_spacing``, the spacing widened for a character that would get
  more than ``max_points_per_char`` points (:func:`~cashg.core.geometry.capped_spacing`),
  then weak RDP.
* ``cap`` (Chinese; paper app. B.4, "Chinese Protocol Details": "When the number of points in
  a character exceeds a predefined threshold (default: 160), the character trajectory is
  resampled"): characters keep their recorded points; no spacing resampling and no RDP. A
  character recorded with more than ``max_points_per_char`` points is resampled by arc length
  to exactly that many (:func:`~cashg.core.geometry.capped_counts`), piece by piece, piece
  ends kept. Exactly, not at most: the authors' OLHWD generator
  (cashg-official ``src/preprocessing/olhwd_cn_sent_dataset_generator.py`` lines 675-680)
  calls ``resample_trajectory_preserve_endpoints(char_traj, points_per_char)``
  (``src/data/data_utils.py`` lines 220-389), whose per-stroke targets sum to the threshold,
  and runs RDP only with ``--rdp_epsilon`` > 0 (default 0: off, lines 1082-1083, 1104).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import get_args

import numpy as np

from cashg.core.config.data import DatasetConfig, PointDensity, PreprocessConfig
from cashg.core.geometry import (
    GeometryShapeError,
    capped_counts,
    capped_spacing,
    check_points,
    normalize_height,
    piece_lengths,
    resample_pieces,
    resample_pieces_to_counts,
    rotate,
    skew_estimate,
    weak_rdp_mask,
)
from cashg.core.ink import InkSentence, make_sentence
from cashg.core.pen_states import (
    insert_spaces,
    label_pen_states,
    piece_successor_owner,
    time_pieces,
)
from cashg.core.record_store import RecordStore
from cashg.core.records import InkRecord, ink_sentence_id
from preprocessing.segmentation_review import ReviewSettings, review_segmentation

POINT_DENSITY_POLICIES = get_args(PointDensity)


@dataclass(frozen=True)
class RecordSettings:
    """Everything :func:`preprocess_record` needs for one dataset (see :func:`settings_for`)."""

    dataset_key: str
    deskew: bool = True
    deskew_min_deg: float = 2.0
    deskew_max_deg: float = 45.0
    deskew_min_length: float = 4.0
    deskew_max_disagreement_deg: float = 5.0
    resample: bool = True
    resample_spacing: float = 0.04
    max_points_per_char: int = 100
    point_density: PointDensity = "resample"  # see the module docstring
    rdp: bool = True
    rdp_epsilon: float = 0.006
    rdp_min_points: int = 10
    rdp_max_halvings: int = 5
    rdp_max_removed_fraction: float = 0.5
    review: ReviewSettings = ReviewSettings()
    space_points: bool = True

    def __post_init__(self) -> None:
        if self.point_density not in POINT_DENSITY_POLICIES:
            raise ValueError(f"dataset {self.dataset_key!r}: point density policy"
                             f" {self.point_density!r} is not one of"
                             f" {list(POINT_DENSITY_POLICIES)}")


def settings_for(key: str, dataset: DatasetConfig, cfg: PreprocessConfig) -> RecordSettings:
    """Resolve the per-dataset settings from the ``preprocess`` and ``datasets.<key>`` params."""
    deskew_on = cfg.deskew.datasets.get(key, dataset.format in cfg.deskew.formats)
    for name in ("max_points_per_char", "point_density"):
        if dataset.language not in getattr(cfg, name):
            raise ValueError(f"params.yaml preprocess.{name}: no entry for language"
                             f" {dataset.language!r} (dataset {key!r})")
    policy = cfg.point_density[dataset.language]
    if policy not in POINT_DENSITY_POLICIES:
        raise ValueError(f"params.yaml preprocess.point_density.{dataset.language}: {policy!r}"
                         f" is not one of {list(POINT_DENSITY_POLICIES)} (dataset {key!r})")
    return RecordSettings(
        dataset_key=key,
        deskew=bool(deskew_on),
        deskew_min_deg=cfg.deskew.min_deg,
        deskew_max_deg=cfg.deskew.max_deg,
        deskew_min_length=cfg.deskew.min_length,
        deskew_max_disagreement_deg=cfg.deskew.max_disagreement_deg,
        resample=cfg.resample,
        resample_spacing=cfg.resample_spacing,
        max_points_per_char=int(cfg.max_points_per_char[dataset.language]),
        point_density=policy,
        rdp=cfg.rdp.enabled,
        rdp_epsilon=cfg.rdp.epsilon,
        rdp_min_points=cfg.rdp.min_points,
        rdp_max_halvings=cfg.rdp.max_halvings,
        rdp_max_removed_fraction=cfg.rdp.max_removed_fraction,
        review=ReviewSettings(
            strict=dataset.language in cfg.review.strict_languages,
            boundary_tolerance=cfg.review.boundary_tolerance,
            max_unowned_fraction=cfg.review.max_unowned_fraction,
        ),
        space_points=cfg.space_points,
    )


@dataclass
class RecordResult:
    """Outcome of one record: the sentence (None when dropped), review rows, statistics.

    ``trace`` (only with ``trace=True``): intermediate (N, 2) arrays for figures:
    ``raw``, ``deskewed``, ``resampled``, ``simplified`` (all in character order after the
    review, pre-normalisation units; a step that is off leaves its input) and the piece
    offsets of the last three; ``density_label`` names what was applied and ``focus_char`` is
    the first character the ``cap`` policy resampled (None otherwise).
    """

    sentence: InkSentence | None
    rows: list[tuple[str, str, str]] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    trace: dict | None = None


def _cap_long_chars(pts: np.ndarray, offs: np.ndarray, char_piece_offsets: np.ndarray,
                    cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``cap`` policy (paper app. B.4): characters with more than ``cap`` points resampled.

    ``pts`` (N, 2) in character order with piece offsets ``offs`` (P + 1,); character ``c``
    owns pieces ``char_piece_offsets[c]:char_piece_offsets[c + 1]``. Every other character
    (and every piece left at its recorded count) keeps its recorded points. Returns the new
    points, offsets and the indices of the resampled characters.
    """
    n_in = np.diff(offs)
    per_char = np.diff(offs[char_piece_offsets])
    capped = np.flatnonzero(per_char > cap)
    if not len(capped):
        return pts, offs, capped
    counts = n_in.copy()
    for c in capped:
        a, b = char_piece_offsets[c], char_piece_offsets[c + 1]
        counts[a:b] = capped_counts(n_in[a:b], cap)
    new_pts, new_offs = resample_pieces_to_counts(pts, offs, counts)
    return new_pts, new_offs, capped


def _density_label(s: RecordSettings, rdp_on: bool) -> str:
    """What the point-density step did, for the figure's title (the trace)."""
    if s.point_density == "cap":
        return (f"over {s.max_points_per_char} points/char resampled, no RDP" if s.resample
                else "as recorded (resampling off)")
    if s.resample:
        return "resampled + weak RDP" if rdp_on else "resampled"
    return "weak RDP" if rdp_on else "as recorded (resampling and RDP off)"


def preprocess_record(record: InkRecord, s: RecordSettings, trace: bool = False) -> RecordResult:
    """Run the whole per-sentence pipeline on one record (pure; deterministic).

    A malformed array at a geometry entry point raises
    :class:`~cashg.core.geometry.shapes.GeometryShapeError` naming the record's source file
    and sample id (a bug upstream, not a data-quality drop: nothing is skipped silently).
    """
    try:
        check_points(record.points, "preprocess_record", "record points")
        return _preprocess_record(record, s, trace)
    except GeometryShapeError as exc:
        raise GeometryShapeError(f"{record.source or '?'}: {record.sample_id}: {exc}") from exc


def _preprocess_record(record: InkRecord, s: RecordSettings, trace: bool) -> RecordResult:
    review = review_segmentation(record, s.review)
    if review.dropped is not None:
        return RecordResult(None, review.rows)
    rows = list(review.rows)
    keep = review.keep
    xy = record.points[keep].astype(np.float64)  # (N, 2) time order
    owner = review.owner[keep]  # (N,)
    stroke = record.stroke_index[keep]
    n_raw = len(xy)

    angle, deskew_skip = 0.0, "disabled"
    if s.deskew:
        angle, deskew_skip = skew_estimate(xy, s.deskew_min_deg, s.deskew_max_deg,
                                           s.deskew_min_length, s.deskew_max_disagreement_deg)
        if angle != 0.0:
            xy = rotate(xy, -angle, xy.mean(axis=0))
    height = float(xy[:, 1].max() - xy[:, 1].min())
    if not height > 0.0:
        return RecordResult(None, [("dropped", "zero_height", f"height {height}")])

    # pieces in time order, then reordered to character order (stable: time order inside)
    t_offs = time_pieces(stroke, owner)
    t_owner = owner[t_offs[:-1]]
    t_next = piece_successor_owner(t_owner, stroke[t_offs[:-1]])
    order = np.argsort(t_owner, kind="stable")
    p_owner = t_owner[order]
    p_next = t_next[order]
    sizes = np.diff(t_offs)[order]
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    take = np.concatenate([np.arange(t_offs[p], t_offs[p + 1]) for p in order])
    pts = np.ascontiguousarray(xy[take])  # (N, 2) character order
    n_chars = len(record.text)
    char_piece_offsets = np.searchsorted(p_owner, np.arange(n_chars + 1)).astype(np.int64)
    tr: dict | None = {"raw": record.points[keep][take], "deskewed": pts.copy(),
                       "offsets_deskewed": offs.copy(), "piece_owner": p_owner.copy(),
                       "height": height} if trace else None

    n_capped = 0
    cap_policy = s.point_density == "cap"
    focus_char = None
    if s.resample and cap_policy:
        pts, offs, capped = _cap_long_chars(pts, offs, char_piece_offsets, s.max_points_per_char)
        n_capped = len(capped)
        focus_char = int(capped[0]) if n_capped else None
    elif s.resample:
        spacing = np.full(len(p_owner), s.resample_spacing * height)
        lengths = piece_lengths(pts, offs)
        n_in = np.diff(offs)
        for c in range(n_chars):
            a, b = char_piece_offsets[c], char_piece_offsets[c + 1]
            if a == b:
                continue
            sp = capped_spacing(n_in[a:b], lengths[a:b], float(spacing[a]),
                                s.max_points_per_char)
            if sp != spacing[a]:
                spacing[a:b] = sp
                n_capped += 1
        pts, offs = resample_pieces(pts, offs, spacing)
    n_resampled = len(pts)
    if tr is not None:
        tr["resampled"], tr["offsets_resampled"] = pts.copy(), offs.copy()

    # Weak RDP is kept as a mask over the resampled points (cashg-ink ``rdp_keep``), not applied:
    # the subset builder simplifies, except the test ground truth of a protocol evaluated
    # without RDP (DSD, paper Sec. 4.1). Pen states sit on piece ends, which RDP keeps.
    n_rdp_chars = 0
    rdp_keep = np.ones(len(pts), dtype=bool)
    rdp_on = s.rdp and not cap_policy
    if rdp_on:
        rdp_keep, eps_used = weak_rdp_mask(pts, offs, char_piece_offsets,
                                           s.rdp_epsilon * height, s.rdp_min_points,
                                           s.rdp_max_halvings, s.rdp_max_removed_fraction)
        n_rdp_chars = int((eps_used > 0).sum())
    if tr is not None:
        kept_per_piece = np.add.reduceat(rdp_keep.astype(np.int64), offs[:-1]) \
            if len(offs) > 1 else np.zeros(0, np.int64)
        tr["simplified"] = pts[rdp_keep].copy()
        tr["offsets_simplified"] = np.concatenate([[0], np.cumsum(kept_per_piece)]).astype(
            np.int64)
        tr["density_label"] = _density_label(s, rdp_on)
        tr["focus_char"] = focus_char

    pts, _, _ = normalize_height(pts)
    pen = label_pen_states(offs, p_owner, p_next, record.text)
    char_index = np.repeat(p_owner, np.diff(offs))
    n_nonspace = int(rdp_keep.sum())
    if s.space_points:
        pts, pen, char_index = insert_spaces(pts, pen, char_index, record.text)
        is_space = np.array([ch.isspace() for ch in record.text], dtype=bool)[char_index]
        full_keep = np.ones(len(pts), dtype=bool)
        full_keep[~is_space] = rdp_keep  # insert_spaces keeps the non-space points' order
        rdp_keep = full_keep

    attrs: dict[str, object] = {"dataset": s.dataset_key, "source_id": record.sample_id,
                                "deskew_deg": float(angle)}
    if review.flags:  # flawed segmentation, sound ink: the subset builder decides (review doc)
        attrs["review_flags"] = ",".join(review.flags)
    if record.meta.get("form_id"):
        attrs["form_id"] = record.meta["form_id"]
    if record.source:
        attrs["source_file"] = record.source
    sentence = make_sentence(ink_sentence_id(record.sample_id), record.writer_id, record.text,
                             pts, pen, char_index,
                             rdp_keep=None if rdp_keep.all() else rdp_keep, **attrs)
    counts = np.bincount(char_index[rdp_keep], minlength=n_chars)  # spaces ignored below
    nonspace = np.array([not ch.isspace() for ch in record.text], dtype=bool)
    stats = {
        "points_raw": n_raw,
        "points_resampled": n_resampled,
        "points_final": n_nonspace,
        "points_per_char": counts[nonspace],
        "deskew_deg": float(angle),
        "deskew_skip": deskew_skip,
        "chars_capped": n_capped,
        "chars_rdp": n_rdp_chars,
        "chars": int(nonspace.sum()),
    }
    if tr is not None:
        tr["final"] = sentence
    return RecordResult(sentence, rows, stats, tr)


# ---------------------------------------------------------------------------------------------
# Whole record stores (the ``preprocess`` stage)
# ---------------------------------------------------------------------------------------------

_WORKER: dict = {}


def _init_worker(records_path: str, settings: RecordSettings) -> None:
    _WORKER["store"] = RecordStore(records_path)
    _WORKER["settings"] = settings


def _run_range(bounds: tuple[int, int]) -> list[tuple[tuple[str, str], RecordResult]]:
    store, settings = _WORKER["store"], _WORKER["settings"]
    out = []
    for record in store.read_range(*bounds):
        # the record itself is not sent back: only the ids the report needs
        out.append(((record.source, record.sample_id), preprocess_record(record, settings)))
    return out


def iter_preprocessed(records_path: str, settings: RecordSettings, workers: int = 1,
                      progress: bool = True, batch: int = 256):
    """Yield ``((source, sample_id), RecordResult)`` for every record of a store, in order.

    ``workers > 1`` uses a process pool over batches of records; output order (and so the
    written file) does not depend on the number of workers.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from tqdm import tqdm

    with RecordStore(records_path) as reader:
        n = len(reader)
    ranges = [(a, min(a + batch, n)) for a in range(0, n, batch)]
    bar = tqdm(total=n, desc=f"preprocess {settings.dataset_key}", unit="line",
               disable=not progress, dynamic_ncols=True)
    try:
        if workers <= 1 or len(ranges) <= 1:
            _init_worker(str(records_path), settings)
            try:
                for r in ranges:
                    for item in _run_range(r):
                        yield item
                        bar.update()
            finally:
                _WORKER.pop("store").close()
            return
        # spawn: workers are direct children (their CPU time and peak RSS show up in
        # getrusage(RUSAGE_CHILDREN)); forkserver would hide them behind the server process
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                                 initargs=(str(records_path), settings)) as pool:
            for chunk in pool.map(_run_range, ranges):
                for item in chunk:
                    yield item
                    bar.update()
    finally:
        bar.close()


def _quantiles(values: np.ndarray) -> dict:
    if not len(values):
        return {"count": 0}
    q = np.percentile(values, [5, 50, 95])
    return {"count": int(len(values)), "mean": round(float(values.mean()), 3),
            "p5": float(q[0]), "median": float(q[1]), "p95": float(q[2]),
            "max": int(values.max()), "min": int(values.min())}


def preprocess_store(records_path, out_path, settings: RecordSettings, report,
                     workers: int = 1, progress: bool = True) -> tuple[dict, dict]:
    """Preprocess every record of ``records_path`` into the cashg-ink file ``out_path``.

    Rows go to ``report`` (a :class:`~preprocessing.review.ReviewReport`, whose seen/kept
    counts are updated). Returns the statistics for ``summary.json`` and the record indices
    picked for the figures (``deskew``: the largest applied angle; ``resample_rdp``: the median
    point reduction, or for the ``cap`` policy, which leaves most sentences as recorded, the
    largest).

    Point statistics, for both point-density policies: ``points_raw`` after the review,
    ``points_resampled`` after the resampling step (the spacing resampling, or the ``cap``
    policy's resampling of long characters; ``points_raw`` when resampling is off),
    ``points_final`` after weak RDP (none for ``cap``), spaces excluded; ``chars_capped``
    the characters whose point count the cap reduced (``resample``: spacing widened; ``cap``:
    resampled to the cap); ``chars_rdp`` the characters weak RDP simplified.
    """
    from cashg.core.ink import write_ink

    per_char: list[np.ndarray] = []
    totals = {"points_raw": 0, "points_resampled": 0, "points_final": 0, "chars": 0,
              "chars_capped": 0, "chars_rdp": 0}
    angles: list[tuple[float, int]] = []  # (deskew angle, record index)
    skips: dict[str, int] = {}  # deskew not applied, by reason
    reductions: list[tuple[float, int]] = []  # (point reduction, record index)

    def sentences():
        for i, ((source, sample), result) in enumerate(
                iter_preprocessed(str(records_path), settings, workers, progress)):
            report.seen += 1
            for action, reason, detail in result.rows:
                report.add(source, sample, action, reason, detail)
            if result.sentence is None:
                continue
            report.kept += 1
            st = result.stats
            per_char.append(st["points_per_char"])
            for k in totals:
                totals[k] += int(st[k])
            angles.append((st["deskew_deg"], i))
            if st["deskew_skip"] and st["deskew_skip"] != "disabled":
                skips[st["deskew_skip"]] = skips.get(st["deskew_skip"], 0) + 1
            if st["chars"] >= 3:
                reductions.append((1.0 - st["points_final"] / max(st["points_raw"], 1), i))
            yield result.sentence

    write_ink(out_path, sentences(), dataset=settings.dataset_key)
    report.check()
    ppc = np.concatenate(per_char) if per_char else np.zeros(0, np.int64)
    applied = np.array([a for a, _ in angles if a != 0.0])
    picks = {}
    if angles:
        picks["deskew"] = max(angles, key=lambda t: (abs(t[0]), -t[1]))[1]
    if reductions:
        reductions.sort()
        if settings.point_density == "cap":
            picks["resample_rdp"] = max(reductions, key=lambda t: (t[0], -t[1]))[1]
        else:
            picks["resample_rdp"] = reductions[len(reductions) // 2][1]
    stats = {
        **totals,
        "point_reduction": round(1.0 - totals["points_final"] / max(totals["points_raw"], 1), 4),
        "points_per_char": _quantiles(ppc),
        "deskew": {"enabled": settings.deskew, "applied": int(len(applied)),
                   "skipped_by_reason": dict(sorted(skips.items())),
                   "mean_abs_deg": round(float(np.abs(applied).mean()), 3) if len(applied)
                   else 0.0},
    }
    return stats, picks
