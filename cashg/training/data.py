"""Training batches from the HDF5 subsets: char, bigram and sentence streams with style images.

Every batch is a pure function of ``(seed, purpose, iteration, stream, micro-batch, rank,
world size)``: the sample indices and the style references are drawn from a
``numpy.random.default_rng`` seeded with that tuple, so no sampler state exists and a resumed
run sees exactly the batches an uninterrupted run would have seen (also with DataLoader
workers, which may prefetch any iteration).

Sampling (paper Table A1: "batches in which each writer appears once"): a *global* batch of
``min(batch_size, writers)`` samples from distinct writers is drawn
(:func:`cashg.core.subsets.readers.one_per_writer_batch`), then rank ``r`` of ``W`` takes
the slice ``r::W``, so the union over ranks is writer-unique and ranks never overlap.

Length buckets (``length_buckets`` > 0, a CPU-budget option; 0 = the paper's sampling): the
char and bigram samples are split into that many quantile buckets of their point count, and
each batch first draws a bucket (probability proportional to its number of samples, so every
sample keeps roughly its marginal frequency), then one sample per writer within the bucket.
Batches are padded to their longest character, and one long glyph otherwise pads a whole
batch (median glyph 20 points, longest 100): bucketing cuts the padded decoder tokens about
2-3x. The bucket draw uses the same seeded generator, so batches stay pure functions of the
iteration. Sentence windows are not bucketed (their crop is random).

Coordinates: the subsets store absolute points in the sentence's height-normalised frame
(y down, y in [0, 1] over the sentence). Each sample is translated in x so that its first point
has x = 0; y is kept, so the first delta (measured from the origin, see
:mod:`cashg.model.batch`) is ``(0, y_0)`` and tells the model the vertical position of the
sample's first point within the line. Sampling starts from the same origin.

Streams (see :class:`~cashg.model.batch.SequenceSample`):
- char: one character, the glyph's points (its original last pen state is kept);
- bigram: ``prev_char + char``, the predecessor is context only (``target = [False, True]``),
  its points are the teacher-forced window prefix ``y_{s-1}``;
- sentence: the window's text, every character a target (windows start at word starts).

Writer augmentation (``train.augment_shear`` > 0; not in the paper): each training writer's
ink and style references pass through one shear drawn per
(iteration, writer) from its own seeded generator (:mod:`cashg.training.augment`); evaluation
batches never.

Style references: ``style_refs`` (the model's ``model.style_refs``, the one number that
training, evaluation and generation use) images of the sample's writer, drawn without
replacement when the writer has enough images, with replacement otherwise; ink 1,
background 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import torch

from cashg.core.config.train import TrainConfig
from cashg.core.pen_states import line_word_gaps, writer_word_gap
from cashg.core.subsets.readers import (  # noqa: F401 (DataError & co.: re-exported)
    BigramReader,
    CharReader,
    DataError,
    SentenceReader,
    StyleReader,
    held_out_writers,
    one_per_writer_batch,
    split_writers,
)
from cashg.model.batch import CharSequenceBatch, SequenceSample, char_deltas, collate
from cashg.training.augment import draw_writer_map, map_chars, map_images
from cashg.training.schedules import STREAMS, stream_plan

STREAM_ID = {s: i for i, s in enumerate(STREAMS)}
PURPOSE_TRAIN, PURPOSE_EVAL = 0, 1
AUGMENT_STREAM = len(STREAMS)  # the augmentation maps' generator key (after the streams' ids)
READERS = {"char": CharReader, "bigram": BigramReader, "sentence": SentenceReader}
# per-sample / per-point datasets read whole by the in-memory mode (see SplitData)
SAMPLE_FIELDS = {"char": ("char",), "bigram": ("char", "prev_char", "prev_len"),
                 "sentence": ("text",)}
POINT_FIELDS = {"char": ("xy", "pen"), "bigram": ("xy", "pen"),
                "sentence": ("xy", "pen", "char_index")}


def _str(v: object) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def split_is_empty(split_dir: Path) -> bool:
    """True when a split folder is absent or its char subset has no sample."""
    path = split_dir / "char.h5"
    if not path.is_file():
        return True
    with CharReader(path) as r:
        return len(r) == 0


def char_inventory(split_dir: Path) -> list[str]:
    """Sorted characters the model is trained on: glyph characters and sentence characters."""
    chars: set[str] = set()
    with h5py.File(split_dir / "char.h5", "r") as f:
        chars.update(_str(c) for c in f["char"][()])
    sent = split_dir / "sentence.h5"
    if sent.is_file():
        with h5py.File(sent, "r") as f:
            for t in f["text"][()]:
                chars.update(_str(t))
    return sorted(chars)


def _shift_x(xy: np.ndarray) -> np.ndarray:
    """(T, 2) float64 translated so the first point has x = 0 (y kept)."""
    xy = np.asarray(xy, np.float64).copy()
    if len(xy):
        xy[:, 0] -= xy[0, 0]
    return xy


def glyph_chars(xy: np.ndarray, pen: np.ndarray) -> list[np.ndarray]:
    """One (T, 3) ``[dx, dy, pen]`` array for a glyph (x shifted to start at 0)."""
    pts = np.concatenate([_shift_x(xy), np.asarray(pen, np.float64)[:, None]], axis=1)
    return char_deltas(pts, np.zeros(len(pts), np.int64), 1)


def bigram_chars(xy: np.ndarray, pen: np.ndarray, prev_len: int) -> list[np.ndarray]:
    """Two (T_i, 3) arrays: predecessor (first ``prev_len`` points) and current character."""
    pts = np.concatenate([_shift_x(xy), np.asarray(pen, np.float64)[:, None]], axis=1)
    ci = (np.arange(len(pts)) >= prev_len).astype(np.int64)
    return char_deltas(pts, ci, 2)


def sentence_chars(xy: np.ndarray, pen: np.ndarray, char_index: np.ndarray,
                   n_chars: int) -> list[np.ndarray]:
    """Per-character (T_i, 3) arrays of a sentence window."""
    pts = np.concatenate([_shift_x(xy), np.asarray(pen, np.float64)[:, None]], axis=1)
    return char_deltas(pts, char_index, n_chars)


def word_spans(text: str) -> list[tuple[int, int]]:
    """``[(start, end)]`` of the words of ``text`` (maximal runs of non-space characters)."""
    spans, start = [], None
    for i, c in enumerate(text + " "):
        if c != " " and start is None:
            start = i
        elif c == " " and start is not None:
            spans.append((start, i))
            start = None
    return spans


def crop_sentence(text: str, xy: np.ndarray, pen: np.ndarray, char_index: np.ndarray,
                  max_chars: int, rng: np.random.Generator) -> tuple[str, list[np.ndarray]]:
    """A sentence window's text and per-character ``[dx, dy, pen]`` arrays, cropped to whole
    words within ``max_chars`` characters from a random word start (no crop when
    ``max_chars`` <= 0 or the text fits). The crop is translated like any sample (x from 0)."""
    if max_chars > 0 and len(text) > max_chars:
        words = word_spans(text)
        if words:
            k = int(rng.integers(len(words)))
            a = words[k][0]
            b = words[k][1]
            for _, e in words[k + 1:]:
                if e - a > max_chars:
                    break
                b = e
            sel = (char_index >= a) & (char_index < b)
            return text[a:b], sentence_chars(xy[sel], pen[sel], char_index[sel] - a, b - a)
    return text, sentence_chars(xy, pen, char_index, len(text))


@dataclass
class _Fields:
    """The reader fields :meth:`SplitData.item` uses (in-memory mode)."""

    xy: np.ndarray
    pen: np.ndarray
    writer: str
    char: str = ""
    prev_char: str = ""
    prev_len: int = 0
    char_index: np.ndarray | None = None
    text: str = ""


@dataclass
class _Item:
    text: str
    chars: list[np.ndarray]
    writer: str
    target: list[bool] | None
    raw: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # sentence: xy, pen, char_index


def load_arrays(path: Path, stream: str) -> dict[str, np.ndarray]:
    """The datasets of a subset file that :meth:`SplitData.item` needs, read whole."""
    with h5py.File(path, "r") as f:
        out = {k: np.asarray(f[k][()]) for k in
               ("offsets", "writer_index", *SAMPLE_FIELDS[stream], *POINT_FIELDS[stream])}
    return out


class SplitData:
    """The subsets of one split, restricted to ``writers`` (None = every writer with images).

    With ``cache`` true (the demo and the merged set fit in memory easily; pass
    ``cache=False`` for very large sets) the subsets are read into memory once and decoded
    samples are memoised per process: a sample read through h5py costs ~4 ms (a dozen small
    dataset reads), which was a quarter of a demo training step on one CPU thread.
    """

    def __init__(self, split_dir: str | Path, writers: Sequence[str] | None = None,
                 streams: Sequence[str] = STREAMS, cache: bool = True):
        self.dir = Path(split_dir)
        for name in ("style", *streams):
            if not (self.dir / f"{name}.h5").is_file():
                raise DataError(f"{self.dir / f'{name}.h5'}: subset file not found")
        self.style = StyleReader(self.dir / "style.h5")
        with_images = [w for w, r in self.style.indices_by_writer().items() if len(r)]
        keep = set(with_images if writers is None else writers)
        missing = keep - set(with_images)
        if missing:
            raise DataError(f"{self.dir / 'style.h5'}: no style images for writers "
                            f"{sorted(missing)[:5]}")
        self.writers = sorted(keep)
        self.writer_int = {w: i for i, w in enumerate(self.style.writers())}
        self.readers = {s: READERS[s](self.dir / f"{s}.h5") for s in streams}
        self.by_writer = {
            s: {w: r for w, r in rd.indices_by_writer().items() if w in keep and len(r)}
            for s, rd in self.readers.items()
        }
        self.cache = cache
        self._arrays = ({s: load_arrays(self.dir / f"{s}.h5", s) for s in streams} if cache
                        else {})
        self._writer_names = {s: rd.writers() for s, rd in self.readers.items()}
        self._buckets: dict[tuple[str, int], list[dict[str, np.ndarray]]] = {}
        self._memo: dict[tuple[str, int], _Item] = {}
        self._images: dict[str, np.ndarray] = {}
        self._writer_word_gaps: dict[str, tuple[list[str], list[np.ndarray]]] = {}
        self._keys: tuple[np.ndarray, np.ndarray] | None = None  # see _line_keys
        self._gap_memo: dict[tuple[str, str | None], float | None] = {}  # see writer_word_gap

    def n_writers(self, stream: str) -> int:
        return len(self.by_writer[stream])

    def item(self, stream: str, i: int) -> _Item:
        key = (stream, int(i))
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        x = self._from_arrays(stream, int(i)) if stream in self._arrays \
            else self.readers[stream][int(i)]
        where = f"{self.dir / f'{stream}.h5'}[{i}]"
        try:
            if stream == "char":
                it = _Item(x.char, glyph_chars(x.xy, x.pen), x.writer, None)
            elif stream == "bigram":
                it = _Item(x.prev_char + x.char, bigram_chars(x.xy, x.pen, x.prev_len), x.writer,
                           [False, True])
            else:
                sentence_chars(x.xy, x.pen, x.char_index, len(x.text))  # validates
                it = _Item(x.text, [], x.writer, None,
                           (np.asarray(x.xy), np.asarray(x.pen), np.asarray(x.char_index)))
        except ValueError as exc:
            raise DataError(f"{where}: {exc}") from exc
        if self.cache:
            self._memo[key] = it
        return it

    def _from_arrays(self, stream: str, i: int):
        """The fields :meth:`item` reads of sample ``i``, from the in-memory arrays."""
        a = self._arrays[stream]
        if not 0 <= i < len(a["offsets"]) - 1:
            raise IndexError(f"{self.dir / f'{stream}.h5'}: index {i} out of range")
        sl = slice(int(a["offsets"][i]), int(a["offsets"][i + 1]))
        f = {k: a[k][sl] for k in POINT_FIELDS[stream]}
        for k in SAMPLE_FIELDS[stream]:
            v = a[k][i]
            f[k] = int(v) if k == "prev_len" else _str(v)
        f["writer"] = self._writer_names[stream][int(a["writer_index"][i])]
        return _Fields(**f)

    def init_chars(self, limit: int = 2000) -> list[np.ndarray]:
        """(T_i, 3) trajectories of up to ``limit`` char samples, evenly spaced over this
        split's writers' samples (deterministic; for :mod:`cashg.training.init`)."""
        idx = self.writer_sample_indices("char")
        pick = idx[np.linspace(0, len(idx) - 1, min(limit, len(idx))).astype(np.int64)]
        return [c for i in pick for c in self.item("char", int(i)).chars]

    def init_gaps(self, limit: int = 2000) -> np.ndarray:
        """(k,) the word gaps (a space's second x offset, :mod:`cashg.core.pen_states`) of up
        to ``limit`` sentence samples, evenly spaced over this split's writers' samples
        (deterministic; for :func:`cashg.training.init.gap_scale`); empty without a sentence
        stream."""
        if "sentence" not in self.readers:
            return np.zeros(0)
        idx = self.writer_sample_indices("sentence")
        pick = idx[np.linspace(0, len(idx) - 1, min(limit, len(idx))).astype(np.int64)]
        return np.asarray([g for i in pick for g in self.word_gaps(int(i))], np.float64)

    def word_gaps(self, i: int) -> list[float]:
        """The word gaps of sentence sample ``i``: each space's second x offset."""
        return [g for _, g in self._space_spans(i)]

    def _space_spans(self, i: int) -> list[tuple[int, float]]:
        """``(position in the sample's text, second x offset)`` of each space of sentence
        sample ``i`` that has its two points."""
        it = self.item("sentence", i)
        chars = sentence_chars(*it.raw, len(it.text))
        return [(p, float(c[1, 0])) for p, (ch, c) in enumerate(zip(it.text, chars))
                if ch == " " and len(c) > 1]

    def writer_word_gap(self, writer: str, sentence: int | None = None) -> float | None:
        """The writer's word gap (``model.relative_gap``, :func:`cashg.core.pen_states.
        writer_word_gap`): the median of the gaps of its lines in this split, the line of
        sentence sample ``sentence`` left out (a sample is never described by its own line's
        gaps); None without a sentence stream or a gap. A line cut into overlapping windows
        (``subsets.sentence.max_chars``) counts each of its gaps once."""
        if "sentence" not in self.readers:
            return None
        leave = None if sentence is None else str(self._line_keys()[0][sentence])
        key = (writer, leave)
        if key not in self._gap_memo:  # a batch asks for every sample's: memoised
            if writer not in self._writer_word_gaps:
                self._writer_word_gaps[writer] = self._line_gaps(writer)
            names, gaps = self._writer_word_gaps[writer]
            self._gap_memo[key] = writer_word_gap(gaps, names.index(leave) if leave in names
                                                  else None)
        return self._gap_memo[key]

    def _line_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """(N,) the line (sentence id) and (N,) the first character's position in it of
        every sentence sample (memoised)."""
        if self._keys is None:
            rows = self.readers["sentence"].texts()
            self._keys = (np.asarray([r[0] for r in rows]),
                          np.asarray([r[1] for r in rows], np.int64))
        return self._keys

    def _line_gaps(self, writer: str) -> tuple[list[str], list[np.ndarray]]:
        """The writer's lines (sentence ids) and each line's word gaps, every space once."""
        ids, offsets = self._line_keys()
        r = self.by_writer["sentence"].get(writer, range(0))
        lines = line_word_gaps((str(ids[i]), int(offsets[i]), self._space_spans(i)) for i in r)
        return list(lines), list(lines.values())

    def writer_sample_indices(self, stream: str) -> np.ndarray:
        """(k,) int64 indices of every sample of this split's writers in ``stream``."""
        return np.concatenate([np.arange(r.start, r.stop) for r in
                               self.by_writer[stream].values()]).astype(np.int64)

    def point_counts(self, stream: str) -> np.ndarray:
        """(N,) number of points of every sample of ``stream`` (from the offsets only)."""
        if stream in self._arrays:
            offsets = self._arrays[stream]["offsets"]
        else:
            with h5py.File(self.dir / f"{stream}.h5", "r") as f:
                offsets = f["offsets"][()]
        return np.diff(np.asarray(offsets, np.int64))

    def length_buckets(self, stream: str, n: int) -> list[dict[str, np.ndarray]]:
        """``n`` quantile buckets of the samples' point counts (fewer when counts tie), each as
        ``{writer: (k,) sample indices}`` over this split's writers; memoised."""
        key = (stream, n)
        if key not in self._buckets:
            counts = self.point_counts(stream)
            idx = self.writer_sample_indices(stream)
            edges = np.unique(np.quantile(counts[idx], np.linspace(0, 1, n + 1)[1:-1]))
            bucket = np.searchsorted(edges, counts, side="right")  # (N,) bucket of each sample
            out = []
            for b in range(len(edges) + 1):
                by_w = {w: np.arange(r.start, r.stop)[bucket[r.start:r.stop] == b]
                        for w, r in self.by_writer[stream].items()}
                by_w = {w: v for w, v in by_w.items() if len(v)}
                if by_w:
                    out.append(by_w)
            self._buckets[key] = out
        return self._buckets[key]

    def writer_images(self, writer: str) -> np.ndarray:
        """(k, S, S) float32 in [0, 1] (ink 1) of one writer, memoised."""
        img = self._images.get(writer)
        if img is None:
            img = self.style.writer_images(writer).astype(np.float32) / 255.0
            self._images[writer] = img
        return img

    def style_refs(self, writer: str, n: int, rng: np.random.Generator) -> np.ndarray:
        """(n, S, S): n of the writer's images (without replacement when it has >= n)."""
        imgs = self.writer_images(writer)
        pick = rng.choice(len(imgs), size=n, replace=len(imgs) < n)
        return imgs[np.sort(pick)]

    def close(self) -> None:
        self.style.close()
        for r in self.readers.values():
            r.close()


class BatchSource:
    """Deterministic batches: see the module docstring. ``rank``/``world`` shard each batch;
    ``style_refs``: reference images per sample (the model config's ``style_refs``)."""

    def __init__(self, data: SplitData, cfg: TrainConfig, rank: int = 0, world: int = 1,
                 purpose: int = PURPOSE_TRAIN, *, style_refs: int, writer_word_gap: bool = False):
        if style_refs < 1:
            raise ValueError(f"model.style_refs must be >= 1, got {style_refs}")
        self.data, self.cfg, self.rank, self.world, self.purpose = data, cfg, rank, world, purpose
        self.style_refs = style_refs
        self.writer_word_gap = writer_word_gap  # model.relative_gap: each sample carries its writer's gap
        for s in data.readers:
            if data.n_writers(s) < world:
                raise DataError(f"{data.dir / f'{s}.h5'}: {data.n_writers(s)} writers cannot "
                                f"fill a writer-unique batch on {world} ranks")
        # stream -> (buckets usable on `world` ranks, their draw probabilities)
        self.buckets: dict[str, tuple[list[dict[str, np.ndarray]], np.ndarray]] = {}
        if cfg.length_buckets > 0:
            for s in ("char", "bigram"):
                if s in data.readers:
                    bk = [b for b in data.length_buckets(s, cfg.length_buckets)
                          if len(b) >= world]
                    sizes = np.array([sum(len(v) for v in b.values()) for b in bk], np.float64)
                    self.buckets[s] = (bk, sizes / sizes.sum())

    def texts(self) -> list[str]:
        """Every text a batch of this source can hold, once each, in a fixed order: the
        char and bigram streams' texts and the sentences, unless ``train.sentence_max_chars``
        crops them (a crop's text is drawn per batch). What the frozen text backbone's
        states are computed for before the loop (:meth:`Trainer.prefill_text_states`)."""
        streams = [s for s in STREAMS if s in self.data.readers
                   and (s != "sentence" or self.cfg.sentence_max_chars <= 0)]
        return list(dict.fromkeys(
            self.data.item(s, int(i)).text for s in streams
            for rows in self.data.by_writer[s].values() for i in rows))

    def indices(self, t: int, stream: str, micro: int, batch_size: int) -> np.ndarray:
        """(k,) this rank's sample indices of the global writer-unique batch."""
        rng = np.random.default_rng([self.cfg.seed, self.purpose, t, STREAM_ID[stream], micro])
        pool = self.data.by_writer[stream]
        if stream in self.buckets:  # a length bucket, drawn in proportion to its size
            buckets, prob = self.buckets[stream]
            pool = buckets[int(rng.choice(len(buckets), p=prob))]
        glob = one_per_writer_batch(pool, batch_size, rng)
        return glob[self.rank::self.world]

    def batch(self, t: int, stream: str, micro: int, batch_size: int) -> CharSequenceBatch:
        """The batch of (iteration ``t``, ``stream``, micro-batch ``micro``) on this rank."""
        idx = self.indices(t, stream, micro, batch_size)
        rng = np.random.default_rng(
            [self.cfg.seed, self.purpose, t, STREAM_ID[stream], micro, 1 + self.rank])
        samples = []
        for i in idx:
            it = self.data.item(stream, int(i))
            text, chars = it.text, it.chars
            if it.raw is not None:
                text, chars = crop_sentence(it.text, *it.raw, self.cfg.sentence_max_chars, rng)
            refs = self.data.style_refs(it.writer, self.style_refs, rng)
            gap = (self.data.writer_word_gap(it.writer, int(i) if stream == "sentence" else None)
                   if self.writer_word_gap else None)
            a = self.writer_map(t, it.writer)
            if a is not None:  # the same new writer in every stream of this iteration
                chars, refs = map_chars(chars, a), map_images(refs, a)
            samples.append(SequenceSample(text, chars, refs, self.data.writer_int[it.writer],
                                          target=it.target, writer_word_gap=gap))
        return collate(samples)

    def writer_map(self, t: int, writer: str) -> np.ndarray | None:
        """(2, 2) the augmentation map of ``writer`` at iteration ``t`` (one per iteration and
        writer, whatever the stream or rank; :mod:`cashg.training.augment`), or None: off, or
        not a training batch."""
        cfg = self.cfg
        if self.purpose != PURPOSE_TRAIN or cfg.augment_shear <= 0:
            return None
        rng = np.random.default_rng([cfg.seed, AUGMENT_STREAM, t, self.data.writer_int[writer]])
        return draw_writer_map(rng, cfg.augment_shear)

    def iteration(self, t: int) -> dict[str, list[CharSequenceBatch]]:
        """All micro-batches of training iteration ``t`` (streams per the curriculum)."""
        plan = stream_plan(t, self.cfg)
        return {s: [self.batch(t, s, m, plan.batch_sizes[s]) for m in range(n)]
                for s, n in plan.micro_batches.items() if n > 0 and s in self.data.readers}


class IterationDataset(torch.utils.data.Dataset):
    """Map-style dataset whose item ``t`` is iteration ``t``'s micro-batches (for a DataLoader
    with ``batch_size=None`` and a sampler over the remaining iterations)."""

    def __init__(self, source: BatchSource, total_iters: int):
        self.source, self.total = source, total_iters

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, t: int) -> dict[str, list[CharSequenceBatch]]:
        return self.source.iteration(int(t))


def _identity(x):
    return x


def iteration_loader(source: BatchSource, start: int, total: int, workers: int = 0):
    """An iterable of ``(t, batches)`` for ``t`` in ``[start, total)``; ``workers`` > 0 prefetches
    in worker processes (the batches are the same either way)."""
    if workers <= 0:
        return ((t, source.iteration(t)) for t in range(start, total))
    loader = torch.utils.data.DataLoader(
        IterationDataset(source, total), batch_size=None, sampler=range(start, total),
        num_workers=workers, persistent_workers=False, prefetch_factor=2,
        collate_fn=_identity)
    return zip(range(start, total), loader)
