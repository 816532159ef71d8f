"""Pair glyph-level imports (SDT) with the ground truth's characters (``sdt_glyph`` protocol).

SDT generates isolated characters and stores no test-set index (its LMDB key is a counter over a
shuffled loader, :mod:`cashg.baselines.layouts.sdt`); each record carries the real glyph it
imitates (``coords_gt``, :attr:`ImportedSample.reference_xy`). The ``sdt_glyph`` protocol
(:func:`cashg.evaluation.evaluate._glyph_units`) scores every non-space character of a GT
sentence on its own: the GT points with ``char_index == s`` against the prediction's points
with ``char_index == s``, each normalised on its own; a position the prediction lacks is
reported as missing (side ``pred``), a GT sentence without a prediction likewise.

So a sample is paired with one *GT glyph* (sentence, position) of

1. the same writer: the sample's writer through ``writer_map`` (peer id -> GT id) when given;
   otherwise :func:`default_writer_map` (the GT id itself, or the one GT writer whose
   source-local id, after the namespace ``"<source>:"`` of the benchmark files, equals it:
   SDT's ``"1"`` -> ``"icdar2013:1"``);
2. the same character;
3. the closest shape: the sample's reference and each candidate GT glyph are normalised (bbox
   origin, divided by the height; a flat glyph by its width,
   :func:`cashg.core.geometry.normalize.normalize_height_lenient`), resampled to
   :data:`N_POINTS` points evenly spaced by arc length along the whole point sequence (pen-up
   jumps included: both sides have them), and compared by the mean distance of corresponding
   points, in glyph heights. Only a distance at most :data:`TOLERANCE` is accepted: a reference
   and its own GT glyph differ by resampling and preprocessing only, another instance of the
   same character by the same hand typically by more.

Each GT glyph takes at most one sample. Within a (writer, character) group the pairs are taken
greedily by increasing distance (ties: the earlier GT glyph in GT order, then the earlier
sample); samples without a reference then take the first free GT glyph in GT order, in sample
order. A sample left over is :class:`Unmatched`, with the reason naming writer and character.

Each GT sentence that got a glyph becomes one prediction sentence (GT id, writer and text): its
glyphs in text order, laid left to right without overlap (bbox to bbox, a gap of a quarter of
the largest glyph extent), y top-aligned, in the peer's units; ``char_index`` = the position;
pen states from :func:`cashg.baselines.samples.pen_states` (each glyph ends with ``EOC``).
Placement does not affect the glyph-level score. The GT glyphs left without a sample are
:func:`unfilled_glyphs` (also appended to ``match_glyphs(..., unfilled=[])``); the evaluation
reports the same positions as missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cashg.baselines.samples import ImportedSample, Unmatched, pen_states
from cashg.core.geometry.normalize import normalize_height_lenient
from cashg.core.ink import InkFile, InkSentence, make_sentence

__all__ = ["N_POINTS", "TOLERANCE", "UnfilledGlyph", "default_writer_map", "match_glyphs",
           "shape_descriptor", "shape_distance", "unfilled_glyphs"]

N_POINTS = 32  # resampled points per glyph for the shape distance
TOLERANCE = 0.1  # accepted mean point distance, in glyph heights
NAMESPACE_SEP = ":"  # the benchmark files' "<source>:<source id>" (preprocessing/subsets)
GAP = 0.25  # gap between laid-out glyphs, in units of the largest glyph extent


@dataclass(frozen=True)
class UnfilledGlyph:
    """A GT glyph (non-space character) that no sample was paired with."""

    sentence_id: str
    position: int
    character: str
    writer_id: str
    reason: str


@dataclass(frozen=True)
class _GtGlyph:
    sentence_id: str
    position: int
    xy: np.ndarray


def shape_descriptor(xy: np.ndarray, n_points: int = N_POINTS) -> np.ndarray:
    """``(n_points, 2)``: ``xy`` normalised (bbox origin, divided by height) and resampled to
    ``n_points`` points evenly spaced by arc length along the whole sequence."""
    xy = normalize_height_lenient(np.asarray(xy, np.float64))
    arc = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(xy, axis=0), axis=1))]
    if len(xy) == 0 or arc[-1] <= 0:
        return np.repeat(xy[:1] if len(xy) else np.zeros((1, 2)), n_points, axis=0)
    t = np.linspace(0.0, arc[-1], n_points)
    return np.stack([np.interp(t, arc, xy[:, 0]), np.interp(t, arc, xy[:, 1])], axis=1)


def shape_distance(a: np.ndarray, b: np.ndarray, n_points: int = N_POINTS) -> float:
    """Mean distance of corresponding points of the two glyphs' descriptors (glyph heights)."""
    da, db = shape_descriptor(a, n_points), shape_descriptor(b, n_points)
    return float(np.linalg.norm(da - db, axis=1).mean())


def default_writer_map(peer_writers: Iterable[str], gt_writers: Iterable[str]
                       ) -> dict[str, str]:
    """``{peer writer: GT writer}``: the GT id itself when the GT has it, else the one GT writer
    whose source-local id (after the first ``:``) equals the peer's; a peer writer matching
    several GT writers (two sources) or none is left out (its samples are unmatched)."""
    gt = set(gt_writers)
    by_local: dict[str, list[str]] = {}
    for w in sorted(gt):
        by_local.setdefault(w.split(NAMESPACE_SEP, 1)[-1], []).append(w)
    out = {}
    for w in set(peer_writers):
        if w in gt:
            out[w] = w
        elif len(by_local.get(w, [])) == 1:
            out[w] = by_local[w][0]
    return out


def _gt_glyphs(sentences: Sequence[InkSentence]) -> dict[tuple[str, str], list[_GtGlyph]]:
    """GT glyphs with points by (writer, character), in GT order."""
    groups: dict[tuple[str, str], list[_GtGlyph]] = {}
    for s in sentences:
        for c, ch in enumerate(s.text):
            if ch.isspace():
                continue
            mask = s.char_index == c
            if not mask.any():
                continue  # cannot be scored; unfilled_glyphs reports it
            groups.setdefault((s.writer_id, ch), []).append(
                _GtGlyph(s.sentence_id, c, s.xy[mask].astype(np.float64)))
    return groups


def _pair_group(samples: list[tuple[int, ImportedSample]], cands: list[_GtGlyph],
                label: str, tolerance: float, n_points: int
                ) -> tuple[dict[int, tuple[_GtGlyph, float | None]], dict[int, str]]:
    """Pair one (writer, character) group: ``({sample index: (GT glyph, distance)},
    {sample index: reason})``. ``label`` names writer and character in the reasons."""
    if not cands:
        return {}, {i: f"no ground-truth glyph of {label}" for i, _ in samples}
    descs = [shape_descriptor(g.xy, n_points) for g in cands]
    pairs, best, within = [], {}, {}
    for i, smp in samples:
        if smp.reference_xy is None or not len(smp.reference_xy):
            continue
        ref = shape_descriptor(smp.reference_xy, n_points)
        dists = [float(np.linalg.norm(ref - d, axis=1).mean()) for d in descs]
        best[i] = min(dists)
        close = [(round(d, 9), g, i) for g, d in enumerate(dists) if d <= tolerance]
        within[i] = len(close)
        pairs += close
    taken: dict[int, tuple[_GtGlyph, float | None]] = {}
    used: set[int] = set()
    for d, g, i in sorted(pairs):
        if i not in taken and g not in used:
            taken[i] = (cands[g], d)
            used.add(g)
    reasons: dict[int, str] = {}
    n = f"{len(cands)} ground-truth glyph{'s' if len(cands) != 1 else ''} of {label}"
    for i, _ in samples:
        if i in taken:
            continue
        if i in best:
            reasons[i] = (f"best shape distance {best[i]:.4f} to the {n} is above the tolerance"
                          f" {tolerance}" if best[i] > tolerance else
                          f"the {within[i]} of the {n} within the shape tolerance"
                          f" {tolerance} (best {best[i]:.4f}) are paired with closer samples")
            continue
        free = next((g for g in range(len(cands)) if g not in used), None)
        if free is None:
            reasons[i] = f"all {n} are already used (the sample has no reference shape)"
        else:
            taken[i] = (cands[free], None)
            used.add(free)
    return taken, reasons


def _layout(glyphs: list[tuple[int, ImportedSample]]) -> tuple[np.ndarray, np.ndarray,
                                                                  np.ndarray]:
    """``(xy, lift, char_index)`` of glyphs laid left to right in position order."""
    extent = max(float(np.ptp(s.xy, axis=0).max()) for _, s in glyphs)
    gap = GAP * extent if extent > 0 else 1.0
    cursor, xys, lifts, cis = 0.0, [], [], []
    for pos, s in sorted(glyphs, key=lambda g: g[0]):
        xy = np.asarray(s.xy, np.float64)
        xy = xy - np.array([xy[:, 0].min() - cursor, xy[:, 1].min()])
        cursor = float(xy[:, 0].max()) + gap
        lift = np.asarray(s.lift, bool).copy()
        lift[-1] = True  # a glyph ends with the pen up: EOC
        xys.append(xy)
        lifts.append(lift)
        cis.append(np.full(len(xy), pos, np.int64))
    return np.concatenate(xys), np.concatenate(lifts), np.concatenate(cis)


def match_glyphs(
    samples: Sequence[ImportedSample],
    gt: InkFile | Iterable[InkSentence],
    writer_map: Mapping[str, str] | None = None,
    *,
    tolerance: float = TOLERANCE,
    n_points: int = N_POINTS,
    unfilled: list[UnfilledGlyph] | None = None,
) -> tuple[list[InkSentence], list[Unmatched]]:
    """Pair single-character samples with GT glyphs and assemble prediction sentences.

    Returns ``(predictions, unmatched)``: one prediction per GT sentence that got a glyph (GT
    order) and one :class:`Unmatched` per sample not placed; every sample is in exactly one of
    them. When ``unfilled`` is a list, the GT glyphs left without a sample are appended to it
    (:func:`unfilled_glyphs`). See the module docstring for the rules.
    """
    sentences = list(gt)
    groups = _gt_glyphs(sentences)
    gt_writers = {s.writer_id for s in sentences}
    peer_writers = {s.writer_id for s in samples if s.writer_id is not None}
    wmap = dict(writer_map) if writer_map is not None else default_writer_map(peer_writers,
                                                                              gt_writers)
    unmatched: dict[int, str] = {}
    by_group: dict[tuple[str, str], list[tuple[int, ImportedSample]]] = {}
    for i, smp in enumerate(samples):
        if smp.text is None or len(smp.text) != 1 or smp.text.isspace():
            unmatched[i] = f"not one character (text {smp.text!r}): glyphs are paired singly"
        elif smp.writer_id is None:
            unmatched[i] = f"no writer for character {smp.text!r}"
        elif smp.writer_id not in wmap:
            how = "is not in the writer map" if writer_map is not None else (
                "matches no ground-truth writer (or several)")
            unmatched[i] = f"writer {smp.writer_id!r} {how} (character {smp.text!r})"
        else:
            by_group.setdefault((wmap[smp.writer_id], smp.text), []).append((i, smp))
    placed: dict[str, list[tuple[int, ImportedSample, float | None]]] = {}
    for (writer, ch), members in by_group.items():
        peers = sorted({str(m.writer_id) for _, m in members} - {writer})
        label = f"writer {writer!r}" + (f" (peer {', '.join(peers)})" if peers else "")
        taken, reasons = _pair_group(members, groups.get((writer, ch), []),
                                     f"{label} and character {ch!r}", tolerance, n_points)
        unmatched.update(reasons)
        for i, (g, d) in taken.items():
            placed.setdefault(g.sentence_id, []).append((g.position, samples[i], d))
    preds = []
    for s in sentences:
        glyphs = placed.get(s.sentence_id)
        if not glyphs:
            continue
        glyphs.sort(key=lambda g: g[0])
        xy, lift, ci = _layout([(pos, smp) for pos, smp, _ in glyphs])
        items = "; ".join(f"{pos}: {smp.where()}" + ("" if d is None else f" (d={d:.4f})")
                          for pos, smp, d in glyphs)
        preds.append(make_sentence(s.sentence_id, s.writer_id, s.text, xy,
                                   pen_states(lift, ci), ci, source_items=items))
    n_placed = sum(len(g) for g in placed.values())
    assert n_placed + len(unmatched) == len(samples), (n_placed, len(unmatched), len(samples))
    if unfilled is not None:
        unfilled.extend(unfilled_glyphs(sentences, preds))
    return preds, [Unmatched(samples[i].where(), unmatched[i]) for i in sorted(unmatched)]


def unfilled_glyphs(gt: InkFile | Iterable[InkSentence], preds: Iterable[InkSentence]
                    ) -> list[UnfilledGlyph]:
    """The GT glyphs (non-space characters, GT order) that ``preds`` give no points."""
    by_id = {p.sentence_id: p for p in preds}
    out = []
    for s in gt:
        p = by_id.get(s.sentence_id)
        for c, ch in enumerate(s.text):
            if ch.isspace():
                continue
            if not (s.char_index == c).any():
                reason = "the ground-truth glyph has no points"
            elif p is None or not (p.char_index == c).any():
                reason = "no generated glyph was paired with it"
            else:
                continue
            out.append(UnfilledGlyph(s.sentence_id, c, ch, s.writer_id, reason))
    return out
