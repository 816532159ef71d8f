"""Experiment tracking with dvclive (offline), rendered sample lines, and the tracking record.

dvclive writes into ``<out>/dvclive``: ``metrics.json`` (latest values), ``plots/metrics/**.tsv``
(one file per metric, the curves DVC plots) and ``plots/images/samples/iter_<t>.png``; the
rendered sample lines also go to ``<out>/samples/iter_<t>.png``. It never contacts the network
(Studio off, no analytics), does not create a DVC experiment (``save_dvc_exp=False``) and does
not rewrite the repository's ``dvc.yaml`` (``dvcyaml=False``): the plots are declared in
``dvc.yaml`` by hand.

Resume: DVC deletes a stage's outputs (``dvclive/``, ``samples/``) before it reruns the stage,
so the tracked files cannot be continued in place. Instead the trainer keeps a
:class:`TrackingRecord` of everything it logged (every ``log`` call and every sample PNG) in
each checkpoint; a run always starts a fresh ``Live`` (which clears its folder), and a resumed
run first :func:`replay` s the record of its checkpoint, then goes on logging. The tracked
files are thus a pure function of the checkpoint plus the iterations run after it: an
interrupted-and-resumed run, or a rerun of a finished run (nothing left to train), ends with
the same curves and samples as an uninterrupted run (up to :data:`TIMING_METRICS`).

Metric names: ``train/<stream>/{mdn,pen,vdl,seq,style}`` (interval means), ``train/{total,lr,
stage,grad_norm,samples_per_sec,nonfinite_skipped}``, ``val/<stream>/{mdn,pen,vdl,seq}``,
``val/total``. The step is the iteration (completed optimizer steps).
"""

from __future__ import annotations

import math
import os
from array import array
from collections import deque
from pathlib import Path, PurePosixPath

import numpy as np
import torch

OFFLINE_ENV = {"DVC_STUDIO_OFFLINE": "true", "DVC_NO_ANALYTICS": "1", "DVCLIVE_OPEN": "false"}
SAMPLES_DIR = "samples"  # under the output folder; also the dvclive image folder
# wall-clock metrics: the only values that differ between a resumed and an uninterrupted run
TIMING_METRICS = frozenset({"train/samples_per_sec"})
RECORD_VERSION = 1


def finite_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """The metrics as floats, sorted by name, non-finite values left out (a skipped step's NaN
    loss has no place in a curve or in ``metrics.json``)."""
    out = {}
    for k in sorted(metrics):
        v = float(metrics[k])
        if math.isfinite(v):
            out[k] = v
    return out


def sample_name(iteration: int) -> str:
    """Relative name of the sample image of an iteration: the path under the output folder and
    the dvclive image name (``samples/iter_00000200.png``)."""
    return f"{SAMPLES_DIR}/iter_{iteration:08d}.png"


class Tracker:
    """Thin wrapper over :class:`dvclive.Live`; a no-op when ``folder`` is None.

    Always a fresh ``Live`` (it clears the folder's metrics, params and plots): a resumed run
    rebuilds the files with :func:`replay`, it never appends to files that DVC may have deleted.
    """

    def __init__(self, folder: Path | None):
        self.live = None
        if folder is None:
            return
        for k, v in OFFLINE_ENV.items():
            os.environ.setdefault(k, v)
        from dvclive import Live

        self.live = Live(str(folder), resume=False, report=None, save_dvc_exp=False,
                         dvcyaml=False, monitor_system=False)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        if self.live is None:
            return
        self.live.step = step
        for k, v in finite_metrics(metrics).items():
            self.live.log_metric(k, v, timestamp=False)
        self.live.make_summary()

    def log_params(self, params: dict) -> None:
        if self.live is not None:
            self.live.log_params(params)

    def log_image(self, name: str, path: Path) -> None:
        if self.live is not None:
            self.live.log_image(name, str(path))

    def close(self) -> None:
        if self.live is not None:
            self.live.end()
            self.live = None


class TrackingRecord:
    """Everything a run logged to its tracker, in order: every ``log`` call (step and finite
    metrics) and every rendered sample image (relative name and PNG bytes).

    Kept in every checkpoint (:meth:`state`) so that a resumed run can rebuild the tracked
    files with :func:`replay`. Stored column-wise to stay small: one step per call and, per
    metric, the indices of the calls that logged it (int32) with its values (float64), never a
    dict per row. The paper profile (1M iterations, ``log_interval`` 100, ``eval_interval``
    5000) logs about 10,000 train rows of 21 metrics and 200 validation rows of 13, i.e. some
    213,000 values: about 2.6 MB in memory and in each checkpoint (12 bytes a value), plus the
    200 sample PNGs (a 6-character line renders to ~3 kB, two 24-character lines to some tens
    of kB: a few MB in all). Replaying it into dvclive takes about 1.5 ms per row (~15 s).
    """

    def __init__(self) -> None:
        self.steps = array("q")  # the step of each log call
        self.columns: dict[str, tuple[array, array]] = {}  # name -> (call indices, values)
        self.images: list[tuple[int, str, bytes]] = []  # (step, relative name, PNG bytes)

    def add_metrics(self, step: int, metrics: dict[str, float]) -> None:
        """Record one ``log`` call (``metrics`` as logged: see :func:`finite_metrics`)."""
        call = len(self.steps)
        self.steps.append(int(step))
        for k, v in metrics.items():
            calls, values = self.columns.setdefault(k, (array("i"), array("d")))
            calls.append(call)
            values.append(float(v))

    def add_image(self, step: int, name: str, png: bytes) -> None:
        """Record a sample image: ``name`` relative to the output folder, the PNG's bytes."""
        _check_image_name(name)
        self.images.append((int(step), name, bytes(png)))

    def calls(self) -> list[tuple[int, dict[str, float]]]:
        """The recorded ``log`` calls in order, as ``(step, metrics)``."""
        out: list[tuple[int, dict[str, float]]] = [(s, {}) for s in self.steps]
        for k in sorted(self.columns):
            calls, values = self.columns[k]
            for c, v in zip(calls, values):
                out[c][1][k] = v
        return out

    def last_metrics(self) -> dict[str, float]:
        """All metrics logged at the latest step (what the run reported last), ``{}`` if none."""
        if not self.steps:
            return {}
        out: dict[str, float] = {}
        for step, metrics in self.calls():
            if step == self.steps[-1]:
                out.update(metrics)
        return out

    def state(self) -> dict:
        """The record as checkpoint data that ``torch.load(weights_only=True)`` reads: tensors
        (int64 steps, int32 call indices, float64 values, uint8 PNG bytes), str, int, dicts."""
        return {
            "version": RECORD_VERSION,
            "steps": _to_tensor(self.steps),
            "metrics": {k: {"calls": _to_tensor(c), "values": _to_tensor(v)}
                        for k, (c, v) in self.columns.items()},
            "images": [{"step": s, "name": n,
                        "png": torch.from_numpy(np.frombuffer(png, np.uint8).copy())}
                       for s, n, png in self.images],
        }

    @classmethod
    def from_state(cls, state: dict) -> TrackingRecord:
        """Inverse of :meth:`state`; raises ValueError on an unknown version or a bad name."""
        if state.get("version") != RECORD_VERSION:
            raise ValueError(f"tracking record version {state.get('version')} != "
                             f"{RECORD_VERSION}")
        rec = cls()
        rec.steps = _to_array(state["steps"], "q")
        rec.columns = {k: (_to_array(c["calls"], "i"), _to_array(c["values"], "d"))
                       for k, c in state["metrics"].items()}
        for im in state["images"]:
            rec.add_image(int(im["step"]), str(im["name"]), im["png"].numpy().tobytes())
        return rec


_TORCH_DTYPES = {"q": torch.int64, "i": torch.int32, "d": torch.float64}


def _to_tensor(values: array) -> torch.Tensor:
    return torch.from_numpy(np.array(values)).to(_TORCH_DTYPES[values.typecode])


def _to_array(t: torch.Tensor, typecode: str) -> array:
    return array(typecode, t.to(_TORCH_DTYPES[typecode]).cpu().numpy().tobytes())


def _check_image_name(name: str) -> None:
    """Sample images live under ``samples/``: a recorded name never points elsewhere."""
    p = PurePosixPath(name)
    if p.is_absolute() or ".." in p.parts or len(p.parts) < 2 or p.parts[0] != SAMPLES_DIR:
        raise ValueError(f"sample image name {name!r} is not under {SAMPLES_DIR}/")


def clear_samples(out_dir: Path) -> None:
    """Delete the sample images (``<out>/samples/iter_*.png``) a previous run left: like the
    fresh ``Live`` folder, ``samples/`` then holds only what the record and this run write."""
    for p in (out_dir / SAMPLES_DIR).glob("iter_*.png"):
        p.unlink()


def replay(record: TrackingRecord, tracker: Tracker, out_dir: Path) -> None:
    """Log the record again into a fresh ``tracker`` (same steps, same order: an image after
    the calls of its step, as the trainer logs them) and rewrite its sample PNGs under
    ``out_dir`` (also when tracking is off: ``samples/`` is an output of its own)."""
    images = deque(record.images)
    for step, metrics in record.calls():
        while images and images[0][0] < step:
            _replay_image(images.popleft(), tracker, out_dir)
        tracker.log(step, metrics)
    for image in images:
        _replay_image(image, tracker, out_dir)


def _replay_image(image: tuple[int, str, bytes], tracker: Tracker, out_dir: Path) -> None:
    _, name, png = image
    path = out_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(png)
    tracker.log_image(name, path)


def render_samples(model: torch.nn.Module, lines: list[tuple[str, np.ndarray, str]],
                   path: Path, seed: int) -> None:
    """Generate each ``(text, style refs (R, S, S) in [0, 1], writer)`` and render one PNG
    (one row per line), with :func:`cashg.generation.sampling.generate_sentences` (fixed seed)."""
    from cashg.generation.render import render_png
    from cashg.generation.sampling import SamplingOptions, generate_sentences

    sentences = []
    for i, (text, refs, writer) in enumerate(lines):
        sentences += generate_sentences(model, [text], torch.from_numpy(refs),
                                        SamplingOptions(seed=seed + i), writer_id=writer,
                                        id_prefix=f"sample{i}")
    path.parent.mkdir(parents=True, exist_ok=True)
    render_png(sentences, path)
