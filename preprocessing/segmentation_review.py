"""Segmentation review (paper appendix B.1, inspired by Character Queries; B.4 for Chinese).

Input: an :class:`~cashg.core.records.InkRecord` with per-character point indices. Output:
one owner (character index) per kept point, or a drop reason. Every fix or drop is a row
``(action, reason, detail)`` for the stage's :class:`~preprocessing.review.ReviewReport`.

The review works on the recorded point indices (before resampling): its checks are
combinatorial, unaffected by deskew and normalisation, the +-3-point tolerance of the Chinese
protocol is defined on the recorded points, and resampling needs a consistent segmentation
to carry character boundaries.

Actions: ``dropped`` = the record is unusable (or, for strict languages, fails the OLHWG
protocol's own validation, paper app. B.4); ``fixed`` = repaired and kept; ``flagged`` = the ink
is sound but the segmentation is flawed: the record is kept with the reason in its
``review_flags`` and reported as a ``warning`` row (detail ``flagged: ...``). The subset builder drops flagged sentences
from training and validation data and from the test set of a protocol free to filter it, but
keeps them in the test set of a protocol whose test set is fixed by its split (DSD,
DeepWriting: :data:`cashg.core.protocols.WHOLE_TEST_SET_PROTOCOLS`), so review never
shrinks a published test set. Rules, in order:

====================  ========  =====================================================================
reason                action    rule
====================  ========  =====================================================================
unsegmented           dropped   the record has no character segmentation
no_points             dropped   the record has no points (or no text)
non_finite            dropped   a coordinate is NaN or infinite
bad_index             dropped   a character owns a point index outside ``0..N-1``
duplicate_index       fixed     a character lists the same point twice (deduplicated)
space_ink             fixed     a space owns points (they become unowned, see below)
duration_sum          dropped   strict languages (zh): the characters' point counts do not sum to
                                N, or a point is owned by none or by several characters
overlap               fixed     a point owned by several characters goes to the first of them in
                                text order, unless a later owner has no other point
unowned_ink           flagged   more than ``max_unowned_fraction`` of the points are unowned
                                (dropped when no point is owned)
unowned_stroke        fixed     a stroke with no owned point is dropped (noise, crossed-out ink)
unowned_attached      fixed     unowned points inside an owned stroke go to the owner of the
                                previous owned point of that stroke (else of the next one)
boundary_snapped      fixed     strict languages: a stroke cut by a character boundary within
                                ``boundary_tolerance`` points of its end goes wholly to its
                                majority owner
boundary_off_stroke_end dropped strict languages: a character boundary further than the tolerance
                                from a stroke end
empty_char            flagged   a non-space character owns no point
interleaved           flagged   within one stroke a character's points are split by another's
non_adjacent_cut      flagged   a stroke runs pen-down from character a into b where b is not the
                                next non-space character after a (English cursive joins between
                                text neighbours are legitimate)
out_of_order          flagged   the first points of the non-space characters are not in text order
====================  ========  =====================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cashg.core.records import InkRecord


@dataclass(frozen=True)
class ReviewSettings:
    """Options of the review (from ``params.yaml`` ``preprocess.review`` and the language)."""

    strict: bool = False  # OLHWG validation (Chinese): duration sum and stroke-end tolerance
    boundary_tolerance: int = 3
    max_unowned_fraction: float = 0.2


@dataclass
class ReviewedSegmentation:
    """Result: ``owner`` (N,) int64 character per point (-1 = point dropped), or ``dropped``.

    ``rows``: (action, reason, detail) tuples; when the record is dropped, only its drop row.
    ``flags``: the reasons of the ``flagged`` rules the record failed (kept; module doc).
    """

    owner: np.ndarray | None
    rows: list[tuple[str, str, str]] = field(default_factory=list)
    dropped: str | None = None
    flags: tuple[str, ...] = ()

    @property
    def keep(self) -> np.ndarray:
        """(N,) bool points that stay."""
        assert self.owner is not None
        return self.owner >= 0


def _drop(reason: str, detail: str) -> ReviewedSegmentation:
    return ReviewedSegmentation(None, [("dropped", reason, detail)], reason)


def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and ends (exclusive) of the maximal runs of equal values of a 1-D array."""
    if not len(values):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    cuts = np.flatnonzero(values[1:] != values[:-1]) + 1
    return np.concatenate([[0], cuts]), np.concatenate([cuts, [len(values)]])


def next_nonspace(text: str) -> np.ndarray:
    """(M,) int64: for each position the next non-space position after it (M if none)."""
    out = np.full(len(text), len(text), dtype=np.int64)
    nxt = len(text)
    for i in range(len(text) - 1, -1, -1):
        out[i] = nxt
        if not text[i].isspace():
            nxt = i
    return out


def review_segmentation(record: InkRecord, settings: ReviewSettings) -> ReviewedSegmentation:
    """Check and repair the character segmentation of one record (rules in the module doc)."""
    if record.char_points is None:
        return _drop("unsegmented", "record has no character segmentation")
    n = record.n_points
    text = record.text
    if n == 0 or not text:
        return _drop("no_points", f"{n} points, {len(text)} characters")
    if not np.isfinite(record.points).all():
        return _drop("non_finite", "NaN or infinite coordinates")
    rows: list[tuple[str, str, str]] = []
    flags: list[str] = []

    def flag(reason: str, detail: str) -> None:
        if reason not in flags:  # one row per reason and record
            flags.append(reason)
            rows.append(("warning", reason, f"flagged: {detail}"))

    chars: list[np.ndarray] = []
    for c, idx in enumerate(record.char_points):
        idx = np.asarray(idx, dtype=np.int64)
        if len(idx) and (idx.min() < 0 or idx.max() >= n):
            return _drop("bad_index", f"char {c} {text[c]!r} owns index outside 0..{n - 1}")
        uniq = np.unique(idx)
        if len(uniq) != len(idx):
            rows.append(("fixed", "duplicate_index",
                         f"char {c} {text[c]!r}: {len(idx) - len(uniq)} duplicates removed"))
        if text[c].isspace() and len(uniq):
            rows.append(("fixed", "space_ink", f"space {c} owned {len(uniq)} points"))
            uniq = uniq[:0]
        chars.append(uniq)

    n_owners = np.zeros(n, dtype=np.int64)
    for idx in chars:
        n_owners[idx] += 1
    if settings.strict:
        total = sum(len(ci) for ci in record.char_points)
        if total != n or (n_owners != 1).any():
            return _drop("duration_sum", f"char point counts sum to {total}, trajectory has {n}"
                         f" ({int((n_owners == 0).sum())} unowned,"
                         f" {int((n_owners > 1).sum())} shared)")

    owner = np.full(n, -1, dtype=np.int64)
    shared = n_owners > 1
    for c in range(len(chars) - 1, -1, -1):  # reverse: the first owner in text order wins
        owner[chars[c]] = c
    if shared.any():
        for c, idx in enumerate(chars):  # an owner with no other point gets its shared points
            if len(idx) and shared[idx].all():
                owner[idx] = c
        rows.append(("fixed", "overlap", f"{int(shared.sum())} points owned by several characters"))

    unowned = owner < 0
    if unowned.any():
        frac = float(unowned.mean())
        if frac == 1.0:
            return _drop("unowned_ink", f"none of the {n} points is owned by a character")
        if frac > settings.max_unowned_fraction:
            flag("unowned_ink", f"{int(unowned.sum())} of {n} points ({frac:.1%}) unowned")
        stroke = record.stroke_index
        s_starts, s_ends = _runs(stroke)
        n_dropped_strokes = n_dropped_points = n_attached = 0
        for a, b in zip(s_starts, s_ends):
            seg = owner[a:b]  # view
            if (seg < 0).all():
                n_dropped_strokes += 1
                n_dropped_points += b - a
                continue
            if not (seg < 0).any():
                continue
            owned = np.flatnonzero(seg >= 0)
            # each unowned point takes the owner of the previous owned point (else the next)
            holes = np.flatnonzero(seg < 0)
            k = np.searchsorted(owned, holes) - 1
            seg[holes] = seg[owned[np.where(k >= 0, k, 0)]]
            n_attached += len(holes)
        if n_dropped_strokes:
            rows.append(("fixed", "unowned_stroke",
                         f"{n_dropped_strokes} strokes ({n_dropped_points} points) dropped"))
        if n_attached:
            rows.append(("fixed", "unowned_attached", f"{n_attached} points attached"))

    s_starts, s_ends = _runs(record.stroke_index)
    if settings.strict:
        tol = settings.boundary_tolerance
        n_snapped = 0
        for a, b in zip(s_starts, s_ends):
            seg = owner[a:b]
            live = seg >= 0
            if not live.any():
                continue
            r0, r1 = _runs(seg)
            if len(r0) <= 1:
                continue
            length = b - a
            for q in r0[1:]:
                if min(q, length - q) > tol:
                    return _drop("boundary_off_stroke_end",
                                 f"stroke at point {a}: boundary {q} points from its start,"
                                 f" {length - q} from its end (tolerance {tol})")
            counts = np.bincount(seg[live])
            seg[:] = int(np.argmax(counts))  # majority owner; ties -> earliest character
            n_snapped += 1
        if n_snapped:
            rows.append(("fixed", "boundary_snapped", f"{n_snapped} strokes reassigned whole"))

    counts = np.bincount(owner[owner >= 0], minlength=len(text))
    for c, ch in enumerate(text):
        if not ch.isspace() and counts[c] == 0:
            flag("empty_char", f"char {c} {ch!r} owns no points")

    nxt = next_nonspace(text)
    for a, b in zip(s_starts, s_ends):
        seg = owner[a:b]
        seg = seg[seg >= 0]
        r0, _ = _runs(seg)
        run_owner = seg[r0]
        if len(np.unique(run_owner)) != len(run_owner):
            flag("interleaved", f"stroke at point {a}: owners {run_owner.tolist()}")
            continue
        for u, v in zip(run_owner[:-1], run_owner[1:]):
            if v != nxt[u]:
                flag("non_adjacent_cut", f"stroke at point {a} runs from char {u}"
                     f" {text[u]!r} into char {v} {text[v]!r}")
                break

    first = np.full(len(text), n, dtype=np.int64)
    live = np.flatnonzero(owner >= 0)
    np.minimum.at(first, owner[live], live)
    nonspace = np.array([not ch.isspace() for ch in text])
    starts = first[nonspace]
    present = starts < n  # an empty (flagged) character has no start
    order = np.flatnonzero(present)
    if (np.diff(starts[present]) <= 0).any():
        k = int(np.flatnonzero(np.diff(starts[present]) <= 0)[0])
        pos = np.flatnonzero(nonspace)[order]
        flag("out_of_order", f"char {pos[k + 1]} {text[pos[k + 1]]!r} starts before"
             f" char {pos[k]} {text[pos[k]]!r}")
    return ReviewedSegmentation(owner, rows, flags=tuple(flags))
