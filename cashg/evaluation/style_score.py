"""Style Score: does a generated line go to the writer it imitates?

DTW and the CSM measure how far generated ink lies from the writer's real ink of the same
sentence. A user asks something else: "does this look like *my* handwriting?". The field's
answer (SDT's Style Score; HWD and the HTG protocol for offline text) is a writer-identification
model trained on real handwriting, asked to name the writer of each generated line: top-1 /
top-5 accuracy against the writer the line was conditioned on.

**The split.** The classifier is fitted on the ground truth of a benchmark's test writers, and
only lines of other sentences are scored: a sentence (its text) goes to the fitting half or
the scored half by the parity of a hash of its text (:func:`scored_text`), the same for every
writer, so no scored text is ever fitted, and the texts every writer shares (BRUSH's alphabet
lines) fall on one side for all of them. Its accuracy on the scored half of the *ground truth*
is the ceiling a generator can reach with it.

**The features** (:func:`line_features`, :data:`FEATURE_NAMES`) are text-independent properties
of a line's ink that set writers apart and that a generated line has in the same units: the
direction and turning-angle distributions of the pen-down segments (slant, roundness, how
angular), where the ink lies about the line's middle (ascenders, descenders, x-height), the
width per character and the word gap (both in line heights), pen lifts per character, the
share of characters joined to the next (cursive), and the median stroke length. Each line is
first scaled to the 2nd-98th percentile height of its ink, so one stray stroke does not
rescale the rest (ground-truth lines are 1.0 high by construction, generated ones about so).

**The classifier** is a shrunken linear discriminant (:class:`StyleScorer`): the features
standardised on the fitting half, one mean per writer, the pooled within-writer covariance
shrunk towards the identity (by the amount of :data:`SHRINKAGE_GRID` that names the writer of
the most fitting lines left out one at a time), equal priors. It is closed-form and deterministic (no seed, no
training budget), needs few lines per writer (about 20 in the demo) and its decision is a
distance a person can follow. A learned writer-ID network would see more, but would cost CPU
time in every run and carry a seed of its own; this one separates the demo's test writers'
real lines with top-1 of about 0.9 (the ceiling in ``metrics.json``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from cashg.core.ink import InkSentence
from cashg.core.records import CURSIVE_EOC
from cashg.generation.render import sentence_strokes

__all__ = [
    "FEATURE_NAMES",
    "StyleScore",
    "StyleScoreError",
    "StyleScorer",
    "fit_scorer",
    "line_features",
    "score_style",
    "scored_text",
    "split_lines",
]

FORMAT = "cashg-style-scorer"
VERSION = 1
N_DIRECTIONS = 12  # segment-direction bins over [0, 2 pi), length-weighted
N_TURNS = 8  # turning-angle bins over [-pi, pi), between consecutive segments of a stroke
HEIGHT_QUANTILES = (0.05, 0.25, 0.75, 0.95)  # of the ink's height about its median
# shrinkage of the pooled covariance towards the identity (standardised features): the grid
# value with the best leave-one-line-out top-1 on the fitting half (ties: the larger)
SHRINKAGE_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5)

FEATURE_NAMES: tuple[str, ...] = (
    *(f"direction_{k}" for k in range(N_DIRECTIONS)),
    *(f"turn_{k}" for k in range(N_TURNS)),
    *(f"height_q{int(q * 100):02d}" for q in HEIGHT_QUANTILES),
    "width_per_char", "word_gap", "lifts_per_char", "joined_share", "stroke_length",
)


class StyleScoreError(ValueError):
    """A scorer cannot be fitted, read or applied (the message names the file or the lines)."""


def scored_text(text: str) -> bool:
    """Whether lines of ``text`` are scored (True) or fitted on (False): the parity of the
    first byte of the text's SHA-256, the same for every writer and every run."""
    return hashlib.sha256(text.encode("utf-8")).digest()[0] % 2 == 1


def _histogram(values: np.ndarray, weights: np.ndarray, bins: int, lo: float,
               hi: float) -> np.ndarray:
    counts, _ = np.histogram(values, bins=bins, range=(lo, hi), weights=weights)
    total = counts.sum()
    return counts / total if total > 0 else np.full(bins, 1.0 / bins)


def line_features(sentence: InkSentence) -> np.ndarray:
    """``(F,)`` float64 features of one line (:data:`FEATURE_NAMES`); ``nan`` where a line has
    nothing to measure (no word gap in a one-word line), filled by the scorer. A line with no
    drawn ink is an error naming it."""
    drawn = [s.astype(np.float64) for s in sentence_strokes(sentence)]
    if not drawn:
        raise StyleScoreError(f"line {sentence.sentence_id}: no drawn ink to score")
    ys = np.concatenate([s[:, 1] for s in drawn])
    lo, hi = np.percentile(ys, [2, 98])
    scale = 1.0 / max(hi - lo, 1e-6)
    drawn = [s * scale for s in drawn]
    middle = float(np.median(ys)) * scale
    segs = [np.diff(s, axis=0) for s in drawn if len(s) > 1]
    seg = np.concatenate(segs) if segs else np.zeros((0, 2))
    length = np.linalg.norm(seg, axis=1)
    keep = length > 1e-9
    angle = np.mod(np.arctan2(seg[keep, 1], seg[keep, 0]), 2 * np.pi)
    directions = _histogram(angle, length[keep], N_DIRECTIONS, 0.0, 2 * np.pi)
    turns_all = []
    for d in segs:
        d = d[np.linalg.norm(d, axis=1) > 1e-9]
        if len(d) > 1:
            a = np.arctan2(d[:, 1], d[:, 0])
            turns_all.append(np.mod(np.diff(a) + np.pi, 2 * np.pi) - np.pi)
    turns = np.concatenate(turns_all) if turns_all else np.zeros(0)
    turn_hist = _histogram(turns, np.ones_like(turns), N_TURNS, -np.pi, np.pi)
    heights = np.quantile(np.concatenate([s[:, 1] for s in drawn]) - middle, HEIGHT_QUANTILES)
    letters = [c for c in sentence.text if not c.isspace()]
    n_chars = max(len(letters), 1)
    xs = np.concatenate([s[:, 0] for s in drawn])
    width_per_char = float(xs.max() - xs.min()) / n_chars
    word_gap = _word_gap(sentence) * scale
    lifts = len(drawn) / n_chars
    last = np.flatnonzero(np.diff(sentence.char_index, append=-1) != 0)  # each char's end
    letter = np.array([not sentence.text[c].isspace() for c in sentence.char_index[last]], bool)
    ends = sentence.pen[last][letter] if len(last) else np.zeros(0)
    joined = float(np.mean(ends == CURSIVE_EOC)) if len(ends) else 0.0
    stroke_length = float(np.median([np.linalg.norm(np.diff(s, axis=0), axis=1).sum()
                                     for s in drawn]))
    return np.concatenate([directions, turn_hist, heights,
                           [width_per_char, word_gap, lifts, joined, stroke_length]])


def _word_gap(sentence: InkSentence) -> float:
    """Mean width of the space pseudo-strokes (each space owns two points at one height, its
    span the word gap, docs/conventions.md), or ``nan`` without a space."""
    spaces = [k for k, c in enumerate(sentence.text) if c.isspace()]
    gaps = []
    for k in spaces:
        xs = sentence.xy[sentence.char_index == k, 0]
        if len(xs) >= 2:
            gaps.append(float(xs.max() - xs.min()) if xs[-1] >= xs[0] else float(xs[-1] - xs[0]))
    return float(np.mean(gaps)) if gaps else float("nan")


def split_lines(lines: Iterable[InkSentence],
                by: Callable[[InkSentence], str] | None = None,
                ) -> tuple[list[InkSentence], list[InkSentence]]:
    """``(fitted, scored)``: the lines whose text (or ``by(line)``: e.g. the whole line a
    sentence window was cut from, so that overlapping windows of one line stay on one side)
    :func:`scored_text` assigns to each half, each sorted by sentence id."""
    fitted, scored = [], []
    for s in sorted(lines, key=lambda s: s.sentence_id):
        (scored if scored_text(by(s) if by else s.text) else fitted).append(s)
    return fitted, scored


@dataclass(frozen=True)
class StyleScore:
    """Accuracies of a scorer on ``lines`` lines (``None`` when there are none); ``skipped``
    lines were not scored, for the reason ``note`` (their writers were left out of the fit,
    or no classifier could be fitted at all)."""

    lines: int
    top1: float | None
    top5: float | None
    per_writer: dict[str, float]  # writer -> top-1 over its lines
    skipped: int = 0
    note: str = ""

    def metrics(self, suffix: str = "") -> dict[str, float | int | None]:
        return {f"STYLE_top1{suffix}": self.top1, f"STYLE_top5{suffix}": self.top5,
                f"STYLE_lines{suffix}": self.lines}


@dataclass(frozen=True)
class StyleScorer:
    """A fitted writer classifier: feature standardisation, writer means and the shrunken
    pooled precision; :meth:`rank` orders the writers for a line, best first."""

    writers: tuple[str, ...]
    mean: np.ndarray  # (F,) of the fitting lines' features
    std: np.ndarray  # (F,)
    centroids: np.ndarray  # (W, F) standardised writer means
    precision: np.ndarray  # (F, F) inverse of the shrunken pooled covariance
    fitted_ids: tuple[str, ...]
    shrinkage: float = 0.0
    loo_top1: float | None = None  # leave-one-line-out top-1 on the fitting half
    # writers of the fitting lines that the classifier does not know, and why (too few lines):
    # their lines are skipped when scored, not an error
    left_out: Mapping[str, str] = field(default_factory=dict)
    # why no classifier exists (fewer than two writers with enough lines): every score is
    # None with this reason, the arrays are empty
    unavailable: str | None = None

    @classmethod
    def none(cls, reason: str, left_out: Mapping[str, str] | None = None,
             fitted_ids: Sequence[str] = ()) -> StyleScorer:
        """A scorer that scores nothing, for ``reason`` (a side metric says why it is
        missing instead of stopping the pipeline)."""
        empty = np.zeros(0)
        return cls((), empty, empty, np.zeros((0, 0)), np.zeros((0, 0)), tuple(fitted_ids),
                   left_out=dict(left_out or {}), unavailable=reason)

    def standardise(self, features: np.ndarray) -> np.ndarray:
        """``(n, F)`` -> standardised, a missing value (nan) at the fitting lines' mean."""
        x = (np.asarray(features, np.float64) - self.mean) / self.std
        return np.where(np.isnan(x), 0.0, x)

    def scores(self, features: np.ndarray) -> np.ndarray:
        """``(n, W)`` linear discriminant scores (higher = more that writer's)."""
        z = self.standardise(features)  # (n, F)
        w = self.centroids @ self.precision  # (W, F)
        bias = -0.5 * np.einsum("wf,wf->w", w, self.centroids)  # (W,)
        return z @ w.T + bias

    def rank(self, features: np.ndarray) -> np.ndarray:
        """``(n, W)`` writer indices, most likely first (ties by writer order)."""
        return np.argsort(-self.scores(features), axis=1, kind="stable")

    def score(self, lines: Sequence[InkSentence], writer_of: Mapping[str, str]) -> StyleScore:
        """Top-1 / top-5 of ``lines``, each against ``writer_of[sentence_id]`` (the writer it
        was conditioned on). The lines of a writer the fit left out (:attr:`left_out`) are
        skipped and counted; a writer the scorer never saw is an error naming it."""
        if self.unavailable is not None:
            return StyleScore(0, None, None, {}, len(lines), self.unavailable)
        unknown = sorted({writer_of[s.sentence_id] for s in lines} - set(self.writers)
                         - set(self.left_out))
        if unknown:
            raise StyleScoreError(f"writer(s) {', '.join(unknown)} are not among the scorer's "
                                  f"{len(self.writers)} writers: it scores only the test "
                                  "writers it was fitted on")
        kept = [s for s in lines if writer_of[s.sentence_id] not in self.left_out]
        skipped = len(lines) - len(kept)
        note = (f"{skipped} line(s) of writer(s) left out of the fit ("
                + "; ".join(f"{w}: {why}" for w, why in sorted(self.left_out.items())
                            if any(writer_of[s.sentence_id] == w for s in lines)) + ")"
                if skipped else "")
        lines = kept
        if not lines:
            return StyleScore(0, None, None, {}, skipped, note)
        index = {w: k for k, w in enumerate(self.writers)}
        truth = np.array([index[writer_of[s.sentence_id]] for s in lines])
        ranked = self.rank(np.stack([line_features(s) for s in lines]))
        hit1 = ranked[:, 0] == truth
        hit5 = (ranked[:, :5] == truth[:, None]).any(axis=1)
        per_writer = {w: float(hit1[truth == k].mean()) for w, k in index.items()
                      if (truth == k).any()}
        return StyleScore(len(lines), float(hit1.mean()), float(hit5.mean()), per_writer,
                          skipped, note)

    def to_json(self) -> dict:
        return {"format": FORMAT, "version": VERSION, "features": list(FEATURE_NAMES),
                "writers": list(self.writers), "mean": self.mean.tolist(),
                "std": self.std.tolist(), "centroids": self.centroids.tolist(),
                "precision": self.precision.tolist(), "fitted_ids": list(self.fitted_ids),
                "shrinkage": self.shrinkage, "loo_top1": self.loo_top1,
                "left_out": dict(self.left_out), "unavailable": self.unavailable}

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json()) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> StyleScorer:
        """Read a scorer file (plain JSON); a file of another format, version or feature set
        is an error naming it."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StyleScoreError(f"{path}: not a readable style scorer ({exc})") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise StyleScoreError(f"{path}: not a {FORMAT} file")
        if data.get("version") != VERSION or data.get("features") != list(FEATURE_NAMES):
            raise StyleScoreError(f"{path}: written by another version of the style scorer "
                                  "(its features differ): rerun the style_score stage")
        try:
            return cls(tuple(data["writers"]), np.asarray(data["mean"], np.float64),
                       np.asarray(data["std"], np.float64),
                       np.asarray(data["centroids"], np.float64),
                       np.asarray(data["precision"], np.float64), tuple(data["fitted_ids"]),
                       float(data["shrinkage"]), data.get("loo_top1"),
                       dict(data.get("left_out") or {}), data.get("unavailable"))
        except (KeyError, TypeError, ValueError) as exc:
            raise StyleScoreError(f"{path}: malformed style scorer ({exc})") from exc


def fit_scorer(lines: Sequence[InkSentence], min_lines: int = 2,
               writers: Iterable[str] = ()) -> StyleScorer:
    """Fit the classifier on ``lines`` (their ``writer_id`` the labels). A writer with fewer
    than ``min_lines`` lines, or one of ``writers`` (every writer the scorer will be asked
    about, e.g. all of the split's) with none, is left out (:attr:`StyleScorer.left_out`,
    with the reason; its lines are skipped when scored); with fewer than two writers left
    the scorer is :meth:`StyleScorer.none`, which says why (real data: DeepWriting's test
    writers have one to three lines each)."""
    by_writer: dict[str, list[np.ndarray]] = {w: [] for w in writers}
    for s in lines:
        by_writer.setdefault(s.writer_id, []).append(line_features(s))
    left_out = {w: f"{len(f)} line(s) in the fitting half, fewer than {min_lines}"
                for w, f in sorted(by_writer.items()) if len(f) < min_lines}
    by_writer = {w: f for w, f in by_writer.items() if w not in left_out}
    fitted_ids = tuple(s.sentence_id for s in lines if s.writer_id in by_writer)
    if len(by_writer) < 2:
        return StyleScorer.none(
            f"the style scorer needs 2 writers with {min_lines} lines or more in the fitting"
            f" half, got {len(by_writer)} (of {len(by_writer) + len(left_out)} writers)",
            left_out, fitted_ids)
    writers = tuple(sorted(by_writer))
    x = np.stack([f for w in writers for f in by_writer[w]])  # (n, F)
    y = np.array([k for k, w in enumerate(writers) for _ in by_writer[w]])  # (n,)
    mean = np.nanmean(x, axis=0)
    mean = np.where(np.isnan(mean), 0.0, mean)
    std = np.nanstd(x, axis=0)
    std = np.where((std > 1e-9) & ~np.isnan(std), std, 1.0)
    z = np.where(np.isnan(x), 0.0, (x - mean) / std)  # (n, F)
    loo = {a: _leave_one_out(z, y, len(writers), a) for a in SHRINKAGE_GRID}
    shrinkage = max(SHRINKAGE_GRID, key=lambda a: (loo[a], a))
    centroids, precision = _discriminant(z, y, len(writers), shrinkage)
    return StyleScorer(writers, mean, std, centroids, precision, fitted_ids, shrinkage,
                       loo[shrinkage], left_out)


def _discriminant(z: np.ndarray, y: np.ndarray, n_writers: int,
                  shrinkage: float) -> tuple[np.ndarray, np.ndarray]:
    """``(centroids (W, F), precision (F, F))`` of standardised lines ``z`` (n, F)."""
    centroids = np.stack([z[y == k].mean(axis=0) for k in range(n_writers)])
    within = z - centroids[y]
    cov = within.T @ within / max(len(z) - n_writers, 1)
    shrunk = (1 - shrinkage) * cov + shrinkage * np.eye(z.shape[1])
    return centroids, np.linalg.inv(shrunk)


def _leave_one_out(z: np.ndarray, y: np.ndarray, n_writers: int, shrinkage: float) -> float:
    """Top-1 of each line by the discriminant fitted on the others (a writer left with no
    line counts as a miss)."""
    hits = 0
    for i in range(len(z)):
        rest = np.ones(len(z), bool)
        rest[i] = False
        if not (y[rest] == y[i]).any():
            continue
        centroids, precision = _discriminant(z[rest], y[rest], n_writers, shrinkage)
        w = centroids @ precision
        scores = w @ z[i] - 0.5 * np.einsum("wf,wf->w", w, centroids)
        hits += int(np.argmax(scores) == y[i])
    return hits / len(z)


def score_style(result, gt: Mapping[str, InkSentence], pred: Mapping[str, InkSentence],
                scorer_path: str | Path) -> str:  # noqa: ANN001 - EvaluationResult
    """Fill the Style Score keys of ``result.metrics`` (:data:`STYLE_KEYS
    <cashg.evaluation.protocols.STYLE_KEYS>`) from the scored pairs whose text is in the
    scored half, each generated line against its ground truth's writer; the ground truth of
    the same lines gives the ceiling. A split whose writers the scorer was not fitted on
    (another split than the test split) leaves them ``None``. Records the per-writer top-1
    in ``result.details["style_score"]`` and returns a one-line summary."""
    scorer = StyleScorer.load(scorer_path)
    ids = [i for i in (result.sentences["sentence_id"] if len(result.sentences) else [])
           if scored_text(gt[i].text)]
    writer_of = {i: gt[i].writer_id for i in ids}
    detail: dict = {"scorer": str(scorer_path), "writers": list(scorer.writers),
                    "shrinkage": scorer.shrinkage, "left_out": dict(scorer.left_out)}
    if scorer.unavailable is not None:
        detail["skipped"] = f"no Style Score: {scorer.unavailable}"
        result.details["style_score"] = detail
        return detail["skipped"]
    outside = sorted(set(writer_of.values()) - set(scorer.writers) - set(scorer.left_out))
    if outside:
        detail["skipped"] = (f"writers {', '.join(outside[:5])} are not the scorer's (fitted "
                             "on the benchmark's test writers): no Style Score on this split")
        result.details["style_score"] = detail
        return detail["skipped"]
    fitted = set(scorer.fitted_ids)
    leak = sorted(i for i in ids if i in fitted)
    if leak:
        raise StyleScoreError(f"{scorer_path}: lines {', '.join(leak[:5])} were fitted on and "
                              "would be scored: the scorer is not this ground truth's")
    generated = scorer.score([pred[i] for i in ids], writer_of)
    real = scorer.score([gt[i] for i in ids], writer_of)
    result.metrics.update(generated.metrics())
    result.metrics.update({"STYLE_top1_gt": real.top1, "STYLE_top5_gt": real.top5})
    detail.update({"per_writer_top1": generated.per_writer,
                   "per_writer_top1_gt": real.per_writer, "lines_scored": generated.lines,
                   "lines_skipped": generated.skipped, "skipped_why": generated.note})
    result.details["style_score"] = detail

    def fmt(v: float | None) -> str:
        return "--" if v is None else f"{v:.3f}"

    return (f"top-1 {fmt(generated.top1)}, top-5 {fmt(generated.top5)} over"
            f" {generated.lines} lines of {len(scorer.writers)} writers (ground truth"
            f" {fmt(real.top1)} / {fmt(real.top5)})"
            + (f"; skipped {generated.note}" if generated.skipped else ""))
