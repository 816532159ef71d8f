"""Training checkpoints: self-describing, atomic, keep-last-N plus best, exact resume.

A training checkpoint is a :mod:`cashg.model.checkpoint` file (so ``load_model`` and
``cashg generate`` read it directly) whose ``extra`` also holds everything a run needs to
continue exactly: ``kind = "cashg-train-state"``, ``config_hash``, ``params`` (the model and
train sections as dicts), ``char_inventory``, ``iteration`` (completed optimizer steps),
``optimizer`` (state dict), ``scheduler`` (the schedules are pure functions of the iteration,
so this records the iteration and the current rate only), ``rng`` (one entry per rank: python,
numpy, torch CPU and CUDA generator states), ``best_val``, ``nonfinite_run``, ``tracking``
(:meth:`cashg.training.tracking.TrackingRecord.state`: every metric and sample image logged so
far, replayed into fresh tracking outputs on resume) and ``log_window`` (metric name -> values
of the iterations since the last log, so an interval cut by a resume has the same mean).
Everything is plain data and tensors: ``torch.load(..., weights_only=True)`` reads it.

Layout of a run folder ``<out>/checkpoints/<config_hash>/``: ``ckpt-<iteration:08d>.pt`` (the
newest ``keep_last`` are kept) and ``best.pt`` (lowest validation loss). Runs with another
config hash live in other folders and are never deleted; a forced fresh start moves an existing
folder aside (``<hash>.prev-<n>``).

Files are written to a temporary name in the same folder, flushed to disk, then renamed with
``os.replace``, so a crash never leaves a truncated checkpoint under a final name.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch

from cashg.core.config.model import ModelConfig
from cashg.core.config.train import TrainConfig
from cashg.model.cashg_model import CASHG
from cashg.model.checkpoint import (
    CheckpointError,
    read_payload,
    save_model_checkpoint,
)

KIND = "cashg-train-state"
CKPT_RE = re.compile(r"^ckpt-(\d{8})\.pt$")
# train fields that do not change what a run computes: a run may resume across changes of these
RESUME_NEUTRAL = frozenset({
    "total_iters", "log_interval", "eval_interval", "eval_batches", "sample_lines",
    "sample_max_chars", "checkpoint_interval", "keep_last", "max_nonfinite_steps",
    "compile", "compile_mode",  # the same computation, compiled or not
    "static_shapes", "cuda_graphs",  # the same losses, padded or replayed (float rounding)
    "device", "bf16", "workers",  # where and in which precision the same schedule runs
    "seconds",  # a budget's schedule is in the fields it changes
})


def as_plain(cfg: object) -> dict:
    """A (nested) dataclass as JSON-ready dicts and lists."""

    def conv(v: object) -> object:
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, (tuple, list)):
            return [conv(x) for x in v]
        return v

    return conv(dataclasses.asdict(cfg))


def data_fingerprint(files: list[Path]) -> str:
    """sha256 over the names and bytes of the training subset files."""
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(f.name.encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def config_hash(model_cfg: ModelConfig, train_cfg: TrainConfig, data: str = "") -> str:
    """16 hex digits identifying what a run computes: the model config, the train config
    without :data:`RESUME_NEUTRAL` fields, and the training data fingerprint."""
    train = {k: v for k, v in as_plain(train_cfg).items() if k not in RESUME_NEUTRAL}
    blob = json.dumps({"model": as_plain(model_cfg), "train": train, "data": data},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def rng_state() -> dict:
    """This process's generator states (python, numpy, torch CPU, torch CUDA)."""
    np_state = np.random.get_state(legacy=False)  # noqa: NPY002 (the global state)
    np_state = {"bit_generator": np_state["bit_generator"],
                "key": [int(x) for x in np_state["state"]["key"]],
                "pos": int(np_state["state"]["pos"]),
                "has_gauss": int(np_state["has_gauss"]), "gauss": float(np_state["gauss"])}
    cuda = [s.clone() for s in torch.cuda.get_rng_state_all()] if torch.cuda.is_available() else []
    return {"python": random.getstate(), "numpy": np_state, "torch": torch.get_rng_state(),
            "cuda": cuda}


def set_rng_state(state: dict) -> None:
    """Restore what :func:`rng_state` returned."""
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    n = state["numpy"]
    legacy = {"bit_generator": n["bit_generator"],
              "state": {"key": np.asarray(n["key"], np.uint32), "pos": n["pos"]},
              "has_gauss": n["has_gauss"], "gauss": n["gauss"]}
    np.random.set_state(legacy)  # noqa: NPY002
    torch.set_rng_state(state["torch"].cpu())
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])


def _fsync(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def atomic_save(path: Path, model: CASHG, model_cfg: ModelConfig, extra: dict) -> None:
    """Write a model checkpoint to ``path`` via a temporary file and ``os.replace``: a kill or
    a full disk part-way leaves whatever ``path`` held before. A write that fails raises
    :class:`CheckpointError` naming the file, the reason and the space left on its disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        save_model_checkpoint(tmp, model, model_cfg, extra)
        _fsync(tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:  # torch reports a failed write as RuntimeError
        kept = "its previous version is kept" if path.exists() else "nothing was written"
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise CheckpointError(f"{path}: cannot write it ({reason}; {_free(path.parent)} free"
                              f" on that disk): {kept}") from exc
    finally:
        if tmp.exists():
            tmp.unlink()


def _free(folder: Path) -> str:
    try:
        return f"{shutil.disk_usage(folder).free / 2**20:.0f} MiB"
    except OSError:
        return "unknown space"


def checkpoint_name(iteration: int) -> str:
    return f"ckpt-{iteration:08d}.pt"


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """``(iteration, path)`` of the run folder's periodic checkpoints, oldest first."""
    if not run_dir.is_dir():
        return []
    out = [(int(m.group(1)), p) for p in run_dir.iterdir() if (m := CKPT_RE.match(p.name))]
    return sorted(out)


def latest_checkpoint(run_dir: Path) -> Path | None:
    ckpts = list_checkpoints(run_dir)
    return ckpts[-1][1] if ckpts else None


def prune(run_dir: Path, keep_last: int) -> list[Path]:
    """Delete all but the newest ``keep_last`` periodic checkpoints (``best.pt`` is separate);
    returns the deleted paths. ``keep_last`` < 1 keeps everything."""
    if keep_last < 1:
        return []
    old = [p for _, p in list_checkpoints(run_dir)[:-keep_last]]
    for p in old:
        p.unlink()
    return old


def move_aside(run_dir: Path) -> Path | None:
    """Rename an existing run folder to ``<name>.prev-<n>`` (never deletes); returns the new path."""
    if not run_dir.exists():
        return None
    n = 1
    while (dest := run_dir.with_name(f"{run_dir.name}.prev-{n}")).exists():
        n += 1
    run_dir.rename(dest)
    return dest


def read_train_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict:
    """The payload of a training checkpoint (``weights_only`` load); raises CheckpointError."""
    payload = read_payload(path, map_location)
    extra = payload.get("extra", {})
    if extra.get("kind") != KIND:
        raise CheckpointError(f"{path}: a model file, not a training checkpoint")
    return payload
