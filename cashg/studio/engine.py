"""The model side of the studio: one loaded checkpoint, its writers' references, and one
generation run in a worker thread with its points handed out as they are sampled.

Generation is CPU-bound torch work, which releases the GIL: each request's sampling runs in a
thread of a pool of ``Limits.concurrency`` threads, so the event loop keeps serving pages,
queue positions and streams meanwhile. The points of the line are given to ``emit`` in batches
(every ``Limits.flush_s`` seconds) through the sampler's per-step callback, which also checks
``stop`` (timeout or client gone) and then ends the sampling (:class:`Stopped`). Each worker
runs torch with ``threads`` intra-op threads (the command's default: cores / concurrency).
"""

from __future__ import annotations

import base64
import dataclasses
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cashg.core.config.data import PreprocessConfig, StyleConfig
from cashg.core.config.generate import SamplingOptions
from cashg.core.ink import InkSentence
from cashg.studio.limits import Limits
from cashg.studio.references import reference_images
from cashg.studio.requests import BadRequest, WriteRequest

Emit = Callable[[str, dict], None]


class Stopped(RuntimeError):
    """The sampling was stopped (timeout, or the client went away)."""


@dataclass(frozen=True)
class Writer:
    """A writer of the run: its id, the split it comes from and its ``style.h5``."""

    id: str
    split: str
    path: Path


@dataclass(frozen=True)
class Written:
    """A finished line: the sentence, the note on its references, timings (s)."""

    sentence: InkSentence
    note: str
    first_point_s: float
    seconds: float
    steps: int


class Engine:
    """The loaded model of one experiment and what generating with it needs."""

    def __init__(self, checkpoint: Path, writers: list[Writer], tuned: SamplingOptions,
                 style: StyleConfig | None, preprocess: PreprocessConfig, limits: Limits,
                 threads: int = 1, reader: Path | None = None, check_k: int = 4):
        import torch

        from cashg.model.checkpoint import load_model

        self.model, self.cfg, extra = load_model(checkpoint)
        self.checkpoint = checkpoint
        self.inventory: list[str] | None = extra.get("char_inventory")
        self.n_refs = int(self.cfg.style_refs)
        self.style = style or StyleConfig(image_size=self.cfg.style_image_size)
        if self.style.image_size != self.cfg.style_image_size:
            raise ValueError(f"subsets.style.image_size {self.style.image_size} != the model's "
                             f"{self.cfg.style_image_size} (wrong params file for {checkpoint}?)")
        self.preprocess, self.tuned, self.limits = preprocess, tuned, limits
        self.writers = {w.id: w for w in writers}
        # "check each letter" (cashg.generation.check): the benchmark's glyph reader, K drawings
        self.check = None
        if reader is not None:
            from cashg.generation.check import CharacterCheck
            from cashg.recognition.glyphs import reader_for_check

            self.check = CharacterCheck(reader_for_check(reader, check_k), check_k)
        # torch's intra-op thread count is per calling thread: set it in each worker
        self.executor = ThreadPoolExecutor(limits.concurrency, thread_name_prefix="studio-gen",
                                           initializer=torch.set_num_threads,
                                           initargs=(max(1, threads),))
        self._images: OrderedDict[str, np.ndarray] = OrderedDict()
        self._gaps: dict[str, float | None] = {}  # model.relative_gap: each known writer's gap
        self._lock = threading.Lock()
        self.warm_up()

    def warm_up(self) -> None:
        """Compile (or load from numba's cache) the geometry kernels of drawn references now,
        not during the first drawn request (a few seconds on a cold cache)."""
        from cashg.studio.references import DrawnGlyph

        glyph = DrawnGlyph([np.array([[0.0, 0.0], [3.0, 9.0], [6.0, 0.0]] * 5)], 10.0)
        reference_images([glyph], 1, self.preprocess, self.style)

    def writer_images(self, writer: str) -> np.ndarray:
        """(k, S, S) uint8: all reference images of a known writer (cached, most recent 256)."""
        with self._lock:
            if writer in self._images:
                self._images.move_to_end(writer)
                return self._images[writer]
        from cashg.core.subsets.readers import StyleReader

        reader = StyleReader(self.writers[writer].path)
        try:
            images = np.asarray(reader.writer_images(writer))
        finally:
            reader.close()
        with self._lock:
            self._images[writer] = images
            while len(self._images) > 256:
                self._images.popitem(last=False)
        return images

    def references(self, req: WriteRequest) -> tuple[np.ndarray, str]:
        """(R, S, S) float32 references of a request (ink 1) and a note for the user."""
        if req.glyphs is not None:
            return reference_images(req.glyphs, self.n_refs, self.preprocess, self.style)
        images = self.writer_images(req.writer)
        if images.shape[1:] != (self.style.image_size,) * 2:
            raise BadRequest(f"writer {req.writer}: images are {images.shape[1:]}, the model "
                             f"needs {self.style.image_size}px", 422)
        k = len(images)
        idx = np.linspace(0, k - 1, self.n_refs).round().astype(int) if k > self.n_refs \
            else np.arange(self.n_refs) % k
        note = (f"{self.n_refs} of writer {req.writer}'s {k} reference glyphs" if k >= self.n_refs
                else f"writer {req.writer} has {k} reference glyphs, repeated to "
                     f"{self.n_refs}")
        return images[idx].astype(np.float32) / 255.0, note

    def writer_word_gap(self, req: WriteRequest) -> float | None:
        """The word gap a ``model.relative_gap`` model is given: the median
        of a known writer's lines beside its references (memoised); None (the population's)
        for drawn glyphs, a writer without lines, or a model that does not read it."""
        if not self.model.reads_writer_word_gap or req.writer is None:
            return None
        with self._lock:
            if req.writer in self._gaps:
                return self._gaps[req.writer]
        from cashg.generation.split import folder_writer_word_gap

        gap = folder_writer_word_gap(self.writers[req.writer].path.parent, req.writer)
        with self._lock:
            self._gaps[req.writer] = gap
        return gap

    def write(self, req: WriteRequest, opts: SamplingOptions, emit: Emit,
              stop: Callable[[], bool]) -> Written:
        """Generate ``req.text`` (in a worker thread): ``emit("start", {...})`` with the
        references, ``emit("points", {"points": [[x, y, pen, char], ...]})`` batches as they
        are sampled, then the finished line. :class:`Stopped` when ``stop()`` turns true."""
        import torch

        from cashg.generation.sampling import generate_sentences
        from cashg.studio.pictures import strip_png

        started = time.perf_counter()
        refs, note = self.references(req)
        gap = self.writer_word_gap(req)
        if self.model.reads_writer_word_gap:  # say which word gap the model was given
            note += (f"; word gap {gap:.3f} (the median of the writer's lines)" if gap is not None
                     else "; word gap: the population's")
        png = base64.b64encode(strip_png(refs)).decode("ascii")
        emit("start", {"note": note, "references_png": f"data:image/png;base64,{png}",
                       "temperature": opts.temperature, "seed": opts.seed})
        pos = np.zeros(2, np.float64)
        batch: list[list] = []
        clock = {"flushed": time.perf_counter(), "first": None, "steps": 0}

        def flush() -> None:
            if batch:
                emit("points", {"points": list(batch)})
                batch.clear()
            clock["flushed"] = time.perf_counter()

        def on_step(step) -> None:
            if stop():
                raise Stopped("stopped")
            clock["steps"] += 1
            if not bool(step.live[0]):
                return
            pos[:] += np.asarray(step.deltas[0].tolist(), np.float64)
            batch.append([round(float(pos[0]), 4), round(float(pos[1]), 4), int(step.pen[0]),
                          int(step.char[0])])
            if clock["first"] is None:
                clock["first"] = time.perf_counter() - started
                flush()  # the first point goes out at once
            elif time.perf_counter() - clock["flushed"] >= self.limits.flush_s:
                flush()

        writer_id = req.writer or "drawn"
        check = self.check if self.checks(req) else None
        if check is not None:
            opts = dataclasses.replace(opts, check=check.k)
        (sentence,) = generate_sentences(self.model, [req.text], torch.from_numpy(refs), opts,
                                         writer_id=writer_id, id_prefix="studio",
                                         on_step=on_step, writer_word_gap=gap, check=check)
        flush()
        return Written(sentence, note, float(clock["first"] or 0.0),
                       time.perf_counter() - started, int(clock["steps"]))

    def checks(self, req: WriteRequest) -> bool:
        """Whether ``req`` is written checked: asked for (on by default) and a reader loaded;
        asking for a check without a reader is a :class:`BadRequest`."""
        if req.check and self.check is None:
            raise BadRequest("this run has no glyph reader to check each letter with (the "
                             "benchmark's recognizer stage trains one)")
        return self.check is not None and req.check is not False

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
