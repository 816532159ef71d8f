"""Character segmentation *inferred* for imported outputs that carry none (DSD, DeepWriting).

The paper's Connectivity and Spacing Metrics need to know which points belong to which
character. Some peers' outputs are bare trajectories (DSD, DeepWriting): their segmentation is
inferred here, by CTC forced alignment of the known text with this project's online handwriting
recognizer (:mod:`cashg.recognition`), and is always reported as inferred, never as the
method's own.

Method, per line (``xy`` (N, 2), ``lift`` (N,), ``text``):

1. **The recognizer's input.** The line goes through the recognizer's own normalisation
   (:func:`normalised_line`, the steps of :func:`cashg.recognition.features.normalise_line`):
   every pen-down stroke resampled at ``point_spacing`` character heights (end points kept),
   the running baseline removed, coordinates in character heights. An imported line has no
   segmentation, so the character height is first estimated from the strokes
   (:func:`stroke_height`: the median y extent of the strokes) and then, ``refine`` times,
   re-measured from the segmentation just inferred (the recognizer's own definition,
   :func:`cashg.recognition.features.char_height`) and the alignment redone.
2. **Forced alignment.** The network gives (T, C) log-probabilities, one frame per
   ``downsample`` resampled points. The targets are the whole text, spaces included (the
   recognizer reads a space as a CTC target: the pen-up jump between words). The Viterbi path
   over the CTC trellis of exactly that label sequence (:func:`forced_alignment`) labels every
   frame with a target position (= an index into ``text``) or the blank.
3. **Frames -> characters** (:func:`frame_characters`): a frame labelled with a drawn
   (non-space) character belongs to it; a blank frame, or a frame labelled with a space,
   belongs to the drawn character emitted last before it (frames before the first emission:
   to the first drawn character). Space characters own no frames, hence no points (an
   imported line has no space pseudo-points; :mod:`cashg.core.ink` allows a character without
   points).
4. **Points -> frames** (:func:`point_positions`, :func:`point_frames`): an original point
   ``j`` of a stroke with cumulative arc length ``s_j`` out of ``L`` sits at the fractional
   index ``o + (m - 1) * s_j / L`` of the resampled sequence, where the stroke's ``m``
   resampled points start at ``o`` (they lie at equal arc-length steps ``L / (m - 1)``, both
   ends kept, so this index is exact at the ends and linear in between; a one-point stroke
   sits at ``o``; a stroke of zero length spreads its points evenly over its two resampled
   points). The convolution blocks (kernel ``k``, padding ``k // 2``, strides multiplying to
   ``D = downsample``) centre frame ``t`` on resampled point ``t * D``, so a point at index
   ``p`` falls in frame ``floor(p / D + 1/2)`` (clipped to the T frames).
5. **Clean-up** (:func:`cover_characters`): the point labels are made monotone in time
   (running maximum: a later point never returns to an earlier character; the alignment
   already is, this only guards it), then every drawn character is given at least one point
   by the least change of the character start positions (L1 isotonic regression of the
   starts, see :func:`cover_characters`). A line with fewer points than drawn characters
   cannot give each one a point: it keeps the monotone alignment, and the characters without
   points stay empty.
6. **Starts at pen lifts** (:func:`snap_to_lifts`, ``lift_window`` frames, None: off). CTC
   emits a character in a frame near its beginning, so the rule of step 3 puts its start
   somewhere in that frame, a few points from where the pen actually came down. For the
   Connectivity Metrics that matters: a character whose start misses the pen lift before it
   leaves its predecessor ending pen-down, i.e. *cursive* (without this step 96% of the DSD
   test boundaries read as cursive, 31% truly are). So a character's start moves to the
   stroke start (the first point after a lift) in the frames just before its first emission:
   after the previous drawn character's last emission frame, at most ``lift_window`` frames
   before its own first emission frame, not after it (the latest such stroke start; starts
   stay strictly increasing). The window of 2 frames was chosen on the recognizer's held-out
   validation writers (train split), not on the test lines.

:func:`segmentation_agreement` measures how close an inferred segmentation comes to a true
one (``scripts/measure/segmentation_agreement.py`` runs it on ground-truth lines whose segmentation
was removed).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from cashg.baselines.samples import pen_states
from cashg.core.records import CURSIVE_EOC
from cashg.recognition.features import (
    NormalisedLine,
    char_height,
    resample_strokes,
    running_baseline,
)
from cashg.recognition.recognizer import pad_batch

if TYPE_CHECKING:
    from cashg.core.config.recognizer import RecognizerFeatureConfig
    from cashg.recognition.recognizer import Recognizer

__all__ = [
    "LIFT_WINDOW",
    "AgreementCounts",
    "agreement_counts",
    "cover_characters",
    "forced_alignment",
    "frame_characters",
    "infer_segmentation",
    "line_log_probs",
    "normalised_line",
    "point_frames",
    "point_positions",
    "pooled_agreement",
    "segmentation_agreement",
    "snap_to_lifts",
    "stroke_height",
    "stroke_offsets",
]

LIFT_WINDOW = 2  # frames before a character's first emission searched for its pen-down
# log-probabilities are floored here before the Viterbi pass: a class the network calls
# impossible (-inf) stays a very bad choice, but the path exists whenever T is long enough
_LOG_FLOOR = -1e30


# --------------------------------------------------------------------------- alignment
def forced_alignment(log_probs: np.ndarray, targets: Sequence[int]) -> np.ndarray:
    """(T,) target position (0..S-1) or -1 (blank) of each frame on the best CTC path that
    reads exactly ``targets``.

    ``log_probs`` (T, C): per-frame log-probabilities, class 0 the blank; ``targets`` (S,)
    class ids in 1..C-1. Viterbi over the CTC trellis ``- t0 - t1 - ... - t(S-1) -``: a frame
    stays in its state, moves to the next, or skips a blank between two *different* labels
    (two equal labels in a row need a blank between them, or they would merge). The path
    starts in the first blank or the first label and ends in the last label or the last
    blank. Ties keep the earlier choice (stay, then advance by one).

    Raises:
        ValueError: ``log_probs`` not 2-D, a target outside 1..C-1, or fewer frames than the
            targets need (S plus one per pair of equal neighbouring labels).
    """
    lp = np.asarray(log_probs, np.float64)
    if lp.ndim != 2:
        raise ValueError(f"log_probs must be (T, C), got shape {lp.shape}")
    n_frames, n_classes = lp.shape
    tg = np.asarray(targets, np.int64).reshape(-1)
    if tg.size and (tg.min() < 1 or tg.max() >= n_classes):
        raise ValueError(f"targets must be classes 1..{n_classes - 1} (0 is the blank),"
                         f" got {tg.min()}..{tg.max()}")
    n_targets = len(tg)
    repeats = int(np.count_nonzero(tg[1:] == tg[:-1]))
    if n_frames < n_targets + repeats:
        raise ValueError(
            f"{n_frames} frames cannot hold {n_targets} CTC targets: they need at least"
            f" {n_targets + repeats} ({repeats} pair(s) of equal neighbouring labels need a"
            " blank between them)")
    if n_targets == 0:
        return np.full(n_frames, -1, np.int64)
    ext = np.zeros(2 * n_targets + 1, np.int64)
    ext[1::2] = tg
    n_states = len(ext)
    emit = np.maximum(lp, _LOG_FLOOR)[:, ext]  # (T, states)
    can_skip = np.zeros(n_states, bool)  # state 2k+1 may come from 2k-1 (skipping a blank)
    can_skip[3::2] = tg[1:] != tg[:-1]
    score = np.full(n_states, -np.inf)
    score[:2] = emit[0, :2]
    back = np.zeros((n_frames, n_states), np.int8)
    cand = np.full((3, n_states), -np.inf)
    states = np.arange(n_states)
    for t in range(1, n_frames):
        cand[0] = score
        cand[1, 1:] = score[:-1]
        cand[2, 2:] = np.where(can_skip[2:], score[:-2], -np.inf)
        step = cand.argmax(axis=0)
        score = cand[step, states] + emit[t]
        back[t] = step
    state = n_states - 1 if score[-1] >= score[-2] else n_states - 2
    path = np.empty(n_frames, np.int64)
    for t in range(n_frames - 1, -1, -1):
        path[t] = state
        state -= back[t, state]
    return np.where(path % 2 == 1, (path - 1) // 2, -1)


def frame_characters(frame_targets: np.ndarray, text: str) -> np.ndarray:
    """(T,) index into ``text`` of the drawn character each frame belongs to.

    ``frame_targets`` (T,): :func:`forced_alignment` of the whole text (target position =
    text index, -1 = blank). A frame labelled with a drawn character belongs to it; a blank
    or space frame to the drawn character emitted last before it, or to the first drawn
    character when none was emitted yet. Monotone whenever ``frame_targets`` is.
    """
    drawn = _drawn_indices(text)
    labels = np.asarray(frame_targets, np.int64)
    is_space = np.array([ch.isspace() for ch in text] + [True], bool)  # [-1] -> True
    own = np.where((labels >= 0) & ~is_space[labels], labels, -1)
    last = np.maximum.accumulate(np.where(own >= 0, np.arange(len(own)), -1)) if len(own) \
        else np.zeros(0, np.int64)
    return np.where(last >= 0, own[np.maximum(last, 0)], drawn[0]).astype(np.int64)


# --------------------------------------------------------------------------- points <-> frames
def stroke_offsets(lift: np.ndarray) -> np.ndarray:
    """(P + 1,) start of each pen-down stroke (a stroke ends at a lift point) and the end,
    as :func:`cashg.recognition.features.resample_strokes` splits them."""
    lift = np.asarray(lift, bool)
    return np.r_[0, np.flatnonzero(lift[:-1]) + 1, len(lift)].astype(np.int64)


def point_positions(xy: np.ndarray, lift: np.ndarray, spacing: float) -> np.ndarray:
    """(N,) fractional index of every point of ``xy`` (N, 2) in the points that
    :func:`~cashg.recognition.features.resample_strokes` makes of it at ``spacing``.

    A stroke's resampled points lie at equal arc-length steps with both ends kept, so a point
    at cumulative arc length ``s`` of a stroke of length ``L`` whose ``m`` resampled points
    start at ``o`` sits at ``o + (m - 1) * s / L``; a one-point stroke at ``o``; the points
    of a zero-length stroke evenly between its two resampled points. Without resampling
    (``spacing`` <= 0, or fewer than two points) a point's index is its own.
    """
    xy = np.asarray(xy, np.float64).reshape(-1, 2)
    lift = np.asarray(lift, bool)
    n = len(xy)
    if spacing <= 0 or n < 2:
        return np.arange(n, dtype=np.float64)
    _, out_lift = resample_strokes(xy, lift, spacing)
    offs, out_offs = stroke_offsets(lift), stroke_offsets(out_lift)
    if len(offs) != len(out_offs):  # resample_strokes keeps every stroke and its lift
        raise RuntimeError(f"resampling made {len(out_offs) - 1} strokes of {len(offs) - 1}")
    pos = np.empty(n, np.float64)
    for a, b, o, e in zip(offs[:-1], offs[1:], out_offs[:-1], out_offs[1:]):
        if b - a == 1:
            pos[a] = o
            continue
        s = np.r_[0.0, np.cumsum(np.hypot(*np.diff(xy[a:b], axis=0).T))]
        frac = s / s[-1] if s[-1] > 0 else np.linspace(0.0, 1.0, b - a)
        pos[a:b] = o + (e - o - 1) * frac
    return pos


def point_frames(positions: np.ndarray, n_frames: int, downsample: int) -> np.ndarray:
    """(N,) frame of each point at fractional resampled index ``positions``: frame ``t`` is
    centred on resampled point ``t * downsample`` (convolutions padded by ``kernel // 2``),
    so a point falls in the nearest centre's frame, clipped to the ``n_frames`` frames."""
    if n_frames < 1:
        raise ValueError("a line without recognizer frames has no alignment")
    frames = np.floor(np.asarray(positions, np.float64) / downsample + 0.5).astype(np.int64)
    return np.clip(frames, 0, n_frames - 1)


# --------------------------------------------------------------------------- recognizer input
def stroke_height(xy: np.ndarray, lift: np.ndarray) -> float:
    """Character height estimated without a segmentation: the median y extent of the strokes
    (:func:`~cashg.recognition.features.char_height` with one "character" per stroke)."""
    lift = np.asarray(lift, bool)
    stroke = np.r_[0, np.cumsum(lift[:-1])] if len(lift) else np.zeros(0, np.int64)
    return char_height(np.asarray(xy, np.float64).reshape(-1, 2), stroke)


def normalised_line(xy: np.ndarray, lift: np.ndarray, text: str, height: float,
                    cfg: RecognizerFeatureConfig) -> NormalisedLine:
    """The recognizer's normalised line of drawn points ``xy`` / ``lift`` at character height
    ``height``: the steps of :func:`~cashg.recognition.features.normalise_line` (resample every
    stroke at ``cfg.point_spacing`` heights, subtract the running baseline over
    ``cfg.baseline_window`` heights, divide by the height), which takes the height from a
    segmentation that an imported line does not have."""
    xy = np.asarray(xy, np.float64).reshape(-1, 2)
    lift = np.asarray(lift, bool)
    if len(xy):
        xy, lift = resample_strokes(xy, lift, cfg.point_spacing * height)
        base = running_baseline(xy[:, 0], xy[:, 1], cfg.baseline_window * height)
        xy = np.stack([xy[:, 0] - xy[0, 0], xy[:, 1] - base], axis=1) / height
    return NormalisedLine("", "", text, xy.astype(np.float32).reshape(-1, 2), lift)


def line_log_probs(recognizer: Recognizer, line: NormalisedLine) -> np.ndarray:
    """(T, C) log-probabilities of one normalised line (eval mode, no gradients)."""
    x, n = pad_batch([recognizer.features(line)])
    was_training = recognizer.net.training
    recognizer.net.eval()
    try:
        with torch.no_grad():
            log_probs, frames = recognizer.net(x, n)
    finally:
        recognizer.net.train(was_training)
    return log_probs[0, : int(frames[0])].double().numpy()


# --------------------------------------------------------------------------- clean-up
def _drawn_indices(text: str) -> np.ndarray:
    drawn = np.array([k for k, ch in enumerate(text) if not ch.isspace()], np.int64)
    if not len(drawn):
        raise ValueError(f"text {text!r} has no drawn (non-space) character to segment")
    return drawn


def _isotonic_l1(values: np.ndarray) -> np.ndarray:
    """Non-decreasing integer sequence closest to ``values`` in L1 (pool-adjacent-violators
    with block medians, the lower median of a pooled block)."""
    blocks: list[list[int]] = []
    for v in np.asarray(values, np.int64).tolist():
        blocks.append([v])
        while len(blocks) > 1 and _median(blocks[-2]) > _median(blocks[-1]):
            last = blocks.pop()
            blocks[-1].extend(last)
    return np.array([_median(b) for b in blocks for _ in b], np.int64)


def _median(block: list[int]) -> int:
    return sorted(block)[(len(block) - 1) // 2]


def cover_characters(char_index: np.ndarray, text: str) -> np.ndarray:
    """(N,) monotone segmentation in which every drawn character of ``text`` owns a point.

    The labels are first made monotone (running maximum). With N points and K drawn
    characters, character ``k`` (in text order) then starts at ``b_k``, the first point
    labelled ``k`` or later. Every character owns a point exactly when ``0 = b_0 < b_1 < ...
    < b_(K-1) <= N - 1``, i.e. ``c_k = b_k - k`` is non-decreasing within ``[0, N - K]``: the
    starts are moved the least (L1) to satisfy that (isotonic regression of ``c``, then
    clipped), so an empty character takes its point(s) from its neighbours on both sides.
    A segmentation that already covers every character is returned unchanged (as monotone).
    With fewer points than drawn characters nothing can cover them all: the monotone labels
    are returned and some characters stay empty.
    """
    ci = np.maximum.accumulate(np.asarray(char_index, np.int64)) if len(char_index) \
        else np.zeros(0, np.int64)
    drawn = _drawn_indices(text)
    n, k = len(ci), len(drawn)
    if n < k:
        return ci
    rank = np.searchsorted(drawn, ci)  # position of each point's character among the drawn
    starts = np.searchsorted(rank, np.arange(k), side="left")
    c = np.clip(_isotonic_l1(starts - np.arange(k)), 0, n - k)
    c[0] = 0
    starts = c + np.arange(k)
    return drawn[np.searchsorted(starts, np.arange(n), side="right") - 1]


def _starts(char_index: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """(K,) first point of each drawn character (or where it would start) in a monotone
    segmentation."""
    rank = np.searchsorted(drawn, np.asarray(char_index, np.int64))
    return np.searchsorted(rank, np.arange(len(drawn)), side="left")


def snap_to_lifts(char_index: np.ndarray, lift: np.ndarray, point_frame: np.ndarray,
                  frame_targets: np.ndarray, text: str, window: int) -> np.ndarray:
    """(N,) segmentation whose character starts sit on pen-downs where the alignment allows.

    ``char_index`` (N,) monotone, every drawn character with a point (:func:`cover_characters`);
    ``lift`` (N,) pen-lift flags; ``point_frame`` (N,) each point's frame; ``frame_targets``
    (T,) the alignment (text index or -1). For every drawn character but the first, the
    stroke starts (points right after a lift) whose frame ``f`` satisfies ``last(prev) < f``,
    ``first(k) - window <= f <= first(k)`` (``first`` / ``last``: a character's first and
    last emission frame, ``prev`` the previous drawn character) are candidates; the latest one
    that keeps the starts strictly increasing becomes the character's start. Characters
    without a candidate keep their start. A segmentation that does not cover every character
    is returned unchanged.
    """
    ci = np.asarray(char_index, np.int64)
    drawn = _drawn_indices(text)
    n, k = len(ci), len(drawn)
    if n < k or k < 2:
        return ci
    starts = _starts(ci, drawn)
    if starts[0] != 0 or (np.diff(starts) <= 0).any():
        return ci
    labels = np.asarray(frame_targets, np.int64)
    frames = np.arange(len(labels))
    point_frame = np.asarray(point_frame, np.int64)
    pen_down = np.flatnonzero(np.r_[False, np.asarray(lift, bool)[:-1]])
    for j in range(1, k):
        emitted, before = frames[labels == drawn[j]], frames[labels == drawn[j - 1]]
        if not len(emitted) or not len(before):
            continue
        lo = max(int(before.max()) + 1, int(emitted.min()) - int(window))
        hi = int(emitted.min())
        upper = starts[j + 1] if j + 1 < k else n
        f = point_frame[pen_down]
        ok = (f >= lo) & (f <= hi) & (pen_down > starts[j - 1]) & (pen_down < upper)
        if ok.any():
            starts[j] = int(pen_down[ok].max())
    return drawn[np.searchsorted(starts, np.arange(n), side="right") - 1]


# --------------------------------------------------------------------------- inference
def _align_at_height(recognizer: Recognizer, xy: np.ndarray, lift: np.ndarray, text: str,
                     targets: list[int], height: float, lift_window: int | None
                     ) -> np.ndarray:
    cfg = recognizer.feature_cfg
    line = normalised_line(xy, lift, text, height, cfg)
    log_probs = line_log_probs(recognizer, line)
    try:
        frame_targets = forced_alignment(log_probs, targets)
    except ValueError as exc:
        raise ValueError(f"cannot align {text!r} to a line of {len(xy)} points"
                         f" ({len(line)} resampled points, {len(log_probs)} recognizer"
                         f" frames): {exc}") from None
    downsample = int(np.prod(recognizer.net.strides))
    positions = point_positions(xy, lift, cfg.point_spacing * height)
    owner = frame_characters(frame_targets, text)
    point_frame = point_frames(positions, len(owner), downsample)
    ci = cover_characters(owner[point_frame], text)
    if lift_window is None:
        return ci
    return snap_to_lifts(ci, lift, point_frame, frame_targets, text, lift_window)


def infer_segmentation(recognizer: Recognizer, xy: np.ndarray, lift: np.ndarray, text: str,
                       refine: int = 1, lift_window: int | None = LIFT_WINDOW) -> np.ndarray:
    """(N,) index into ``text`` of the character every point of the line belongs to, inferred
    by CTC forced alignment with ``recognizer`` (see the module doc for the method).

    ``xy`` (N, 2) absolute coordinates (any units, y down), ``lift`` (N,) True where the pen
    leaves the paper after the point; no space pseudo-points (every point is drawn ink).
    ``refine``: how often the character height is re-measured from the inferred segmentation
    and the alignment redone (0: the stroke-based estimate only). ``lift_window``: frames
    searched for a character's pen-down before its first emission (:func:`snap_to_lifts`;
    None: character starts stay where the frames put them).

    The result is monotone in time, never points at a space, and gives every drawn character
    at least one point when the line has at least as many points as drawn characters.

    Raises:
        ValueError: bad shapes or non-finite points; a character of ``text`` outside the
            recognizer's alphabet (named); a text without drawn characters; a line too short
            (too few recognizer frames) for its text.
    """
    xy = np.asarray(xy, np.float64)
    lift = np.asarray(lift, bool)
    if xy.ndim != 2 or xy.shape[1] != 2 or not len(xy):
        raise ValueError(f"xy must be (N, 2) with N >= 1, got shape {xy.shape}")
    if lift.shape != (len(xy),):
        raise ValueError(f"{lift.shape} lift flags for {len(xy)} points")
    if not np.isfinite(xy).all():
        raise ValueError("xy holds NaN or inf")
    _drawn_indices(text)
    targets = recognizer.alphabet.encode(text)  # names a character outside the alphabet
    ci = _align_at_height(recognizer, xy, lift, text, targets, stroke_height(xy, lift),
                          lift_window)
    for _ in range(max(int(refine), 0)):
        ci = _align_at_height(recognizer, xy, lift, text, targets, char_height(xy, ci),
                              lift_window)
    return ci


# --------------------------------------------------------------------------- agreement
@dataclass
class AgreementCounts:
    """Counts behind :func:`segmentation_agreement`, summed over lines by :meth:`add`.

    ``points``: drawn points (true character not a space); ``correct``: those labelled with
    their true character. ``boundaries``: character starts compared (every drawn character
    with a true point except each line's first, whose start is the line's start);
    ``within[tol]``: those whose inferred start is at most ``tol`` points from the true one;
    ``offset_sum``: the sum of the absolute start offsets (points); ``offset_chars_sum``: the
    same, each offset divided by its line's mean character length (drawn points per drawn
    character), so lines of different point densities compare. ``cursive``: with the pen
    lifts, the paper's adjacent-character boundaries (both characters drawn and with true
    points) as ``[[true lift & inferred lift, true lift & inferred cursive], [true cursive &
    inferred lift, true cursive & inferred cursive]]``: the label the Connectivity Metrics
    read off the left character's last point (``EOC`` or ``CURSIVE_EOC``).
    """

    tolerances: tuple[int, ...] = (1,)
    lines: int = 0
    points: int = 0
    correct: int = 0
    boundaries: int = 0
    offset_sum: int = 0
    offset_chars_sum: float = 0.0
    within: dict[int, int] = field(default_factory=dict)
    cursive: np.ndarray = field(default_factory=lambda: np.zeros((2, 2), np.int64))

    def add(self, other: AgreementCounts) -> AgreementCounts:
        if other.tolerances != self.tolerances:
            raise ValueError(f"tolerances differ: {self.tolerances} vs {other.tolerances}")
        return AgreementCounts(
            self.tolerances, self.lines + other.lines, self.points + other.points,
            self.correct + other.correct, self.boundaries + other.boundaries,
            self.offset_sum + other.offset_sum, self.offset_chars_sum + other.offset_chars_sum,
            {t: self.within.get(t, 0) + other.within.get(t, 0) for t in self.tolerances},
            self.cursive + other.cursive)

    def figures(self) -> dict:
        """The figures of :func:`segmentation_agreement` with their counts (None where
        nothing was counted; boundary accuracy keyed by the tolerance as a string)."""
        b, c = self.boundaries, self.cursive
        labelled = int(c.sum())
        tp, fp, fn = int(c[1, 1]), int(c[0, 1]), int(c[1, 0])
        return {
            "lines": self.lines, "points": self.points, "boundaries": b,
            "point_accuracy": self.correct / self.points if self.points else None,
            "boundary_accuracy": {str(t): (self.within.get(t, 0) / b if b else None)
                                  for t in self.tolerances},
            "mean_boundary_offset": self.offset_sum / b if b else None,
            "mean_boundary_offset_chars": self.offset_chars_sum / b if b else None,
            "cursive_boundaries": labelled,
            "cursive_label_accuracy": (int(c[0, 0]) + tp) / labelled if labelled else None,
            "cursive_rate_true": int(c[1].sum()) / labelled if labelled else None,
            "cursive_rate_inferred": int(c[:, 1].sum()) / labelled if labelled else None,
            "cursive_f1": 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else None,
        }


def _ends_cursive(char_index: np.ndarray, lift: np.ndarray, chars: np.ndarray) -> np.ndarray:
    """(len(chars),) bool: the last point of each character (which must own points) is a
    ``CURSIVE_EOC`` of :func:`cashg.baselines.samples.pen_states` (the pen stays down)."""
    pen = pen_states(lift, char_index)
    last = {int(c): i for i, c in enumerate(np.asarray(char_index).tolist())}
    return np.array([pen[last[int(c)]] == CURSIVE_EOC for c in chars], bool)


def agreement_counts(true_ci: np.ndarray, inferred_ci: np.ndarray, text: str,
                     tolerances: Sequence[int] = (1,),
                     lift: np.ndarray | None = None) -> AgreementCounts:
    """:class:`AgreementCounts` of one line (both (N,) over the same points, in time order;
    ``lift`` (N,) the pen lifts, for the cursive-label counts).

    Points whose true character is a space (pseudo-points) are left out. A character's true
    start is its first true point; its inferred start is the first point labelled with it or a
    later character (where it would start when it owns no point).
    """
    true_ci = np.asarray(true_ci, np.int64)
    inferred_ci = np.asarray(inferred_ci, np.int64)
    if true_ci.shape != inferred_ci.shape or true_ci.ndim != 1:
        raise ValueError(f"segmentations of different shapes: {true_ci.shape} (true) vs"
                         f" {inferred_ci.shape} (inferred)")
    is_space = np.array([ch.isspace() for ch in text], bool)
    if len(true_ci) and (true_ci.min() < 0 or true_ci.max() >= len(text)):
        raise ValueError(f"true segmentation does not fit the text {text!r}")
    drawn = ~is_space[true_ci] if len(true_ci) else np.zeros(0, bool)
    t, i = true_ci[drawn], inferred_ci[drawn]
    chars, first = np.unique(t, return_index=True)
    later = np.maximum.accumulate(i) if len(i) else i
    inferred_first = np.searchsorted(later, chars, side="left")
    offsets = np.abs(inferred_first - first)[1:]  # each line's first start is its start
    char_length = len(t) / len(chars) if len(chars) else 1.0
    tols = tuple(int(x) for x in tolerances)
    cursive = np.zeros((2, 2), np.int64)
    if lift is not None:
        lift = np.asarray(lift, bool)[drawn]
        owned = np.zeros(len(text) + 1, bool)
        owned[chars] = True
        left = np.array([s for s in range(len(text) - 1) if not is_space[s]
                         and not is_space[s + 1] and owned[s] and owned[s + 1]], np.int64)
        inferred_owned = np.isin(left, i)
        z = _ends_cursive(t, lift, left)
        z_hat = np.zeros(len(left), bool)  # a character without points ends nothing
        z_hat[inferred_owned] = _ends_cursive(i, lift, left[inferred_owned])
        np.add.at(cursive, (z.astype(np.int64), z_hat.astype(np.int64)), 1)
    return AgreementCounts(
        tols, 1, int(len(t)), int(np.count_nonzero(t == i)), int(len(offsets)),
        int(offsets.sum()), float(offsets.sum() / char_length),
        {x: int(np.count_nonzero(offsets <= x)) for x in tols}, cursive)


def segmentation_agreement(true_ci: np.ndarray, inferred_ci: np.ndarray, text: str,
                           tolerances: Sequence[int] = (1,),
                           lift: np.ndarray | None = None) -> dict:
    """Agreement of an inferred segmentation with the true one on one line:

    - ``point_accuracy``: share of drawn points labelled with their true character;
    - ``boundary_accuracy[tol]``: share of character starts (all drawn characters but the
      first) inferred within ``tol`` points of the true start;
    - ``mean_boundary_offset``: mean absolute distance of those starts, in points, and
      ``mean_boundary_offset_chars`` the same in character lengths (the line's drawn points
      per drawn character);
    - with ``lift``: the boundary labels the Connectivity Metrics read (a character's last
      point cursive or a pen lift, on adjacent drawn characters): ``cursive_label_accuracy``,
      ``cursive_rate_true`` / ``cursive_rate_inferred`` and ``cursive_f1`` (inferred against
      true; None without lifts).
    """
    return agreement_counts(true_ci, inferred_ci, text, tolerances, lift).figures()


def pooled_agreement(lines: Iterable[tuple[np.ndarray, ...]],
                     tolerances: Sequence[int] = (1,)) -> dict:
    """:func:`segmentation_agreement` over ``(true_ci, inferred_ci, text[, lift])`` lines,
    pooled: every point, character start and boundary counts once (longer lines weigh
    more)."""
    total = AgreementCounts(tuple(int(x) for x in tolerances))
    for line in lines:
        true_ci, inferred_ci, text, *rest = line
        total = total.add(agreement_counts(true_ci, inferred_ci, text, tolerances,
                                           rest[0] if rest else None))
    return total.figures()
