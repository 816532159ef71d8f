"""``cashg train``: curriculum training on a benchmark's subsets (also the train stage's body).

    cashg train --data results/subsets/dsd --out results/train/dsd [--params params.yaml]
                [--set model.bi_swt=false ...] [--resume] [--device auto|cpu|cuda]
                [--threads N] [--bf16] [--workers N] [--stop-after N] [--deadline S]
                [--no-track]

Reads the ``model`` and ``train`` sections of the params file (after ``--set`` overrides,
YAML-typed values), trains on ``<data>/train`` (held-out losses from ``<data>/validation`` when
it has samples, else from the last ``train.val_writers`` train writers, which are then excluded
from training, else from fixed train batches), renders sample lines of ``<data>/test`` writers,
and writes into ``--out``: ``model.pt`` (final weights, self-describing: ``cashg generate`` and
``cashg.model.checkpoint.load_model`` read it), ``checkpoints/<config hash>/`` (resumable
state, keep-last-N plus ``best.pt``), ``dvclive/`` (metrics, plots, sample images),
``samples/`` and ``train_summary.json``.

Resume: with ``--resume`` the latest checkpoint of the run with the same config hash (model
config, train config without bookkeeping fields, training-data fingerprint) continues exactly;
without it an existing run folder of that hash is moved aside (``.prev-N``), never deleted.
A changed config has another hash, hence another folder: incompatible runs never mix.
``dvclive/`` and ``samples/`` are rebuilt by every run: a resumed run replays what its
checkpoint recorded (curves, sample images), so they survive DVC deleting them before a rerun.

``--deadline S`` is a wall-time limit: the run stops S seconds after it started, at the end
of an iteration, writes a checkpoint and exits 75 ("not finished": no ``model.pt``, so a
workflow reruns the job); the same command then continues from that checkpoint. SIGTERM (a
scheduler's warning before its limit, a ``kill``) does the same and exits 143. A time budget
for the whole training is ``train.seconds`` instead (:mod:`cashg.training.budget`).

Exit status: 0 completed (or stopped by ``--stop-after``), 75 stopped by ``--deadline``, 143
after SIGTERM (checkpoint written, rerun to continue), 1 when too many consecutive non-finite
steps stopped the run, 2 on bad input or when a checkpoint cannot be written (the file and the
reason are named; the previous checkpoint is kept).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cashg.training.trainer import Trainer

EXIT_SIGTERM = 143
EXIT_DEADLINE = 75  # EX_TEMPFAIL: not finished, the same command continues
EXIT_NONFINITE = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, type=Path,
                        help="a benchmark's subsets folder (results/subsets/NAME)")
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="SECTION.KEY=VALUE",
                        help="override a param (YAML value), e.g. model.bi_swt=false")
    parser.add_argument("--resume", action="store_true",
                        help="continue the latest compatible checkpoint")
    add_runtime_arguments(parser)


def add_runtime_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default=None, choices=("auto", "cpu", "cuda"),
                        help="default: train.device")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--bf16", default=None, action=argparse.BooleanOptionalAction,
                        help="bf16 autocast (default: train.bf16; the paper: AMP off)")
    parser.add_argument("--workers", type=int, default=None,
                        help="DataLoader prefetch workers (default: train.workers)")
    parser.add_argument("--stop-after", type=int, default=None,
                        help="checkpoint and stop after this iteration")
    parser.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                        help="wall-time limit: checkpoint and exit 75 (not finished) after this"
                             " many seconds; the same command continues")
    parser.add_argument("--no-track", action="store_true", help="no dvclive tracking")
    parser.add_argument("--no-cache-data", action="store_true",
                        help="do not memoise decoded samples in memory")
    parser.add_argument("--no-progress", action="store_true")


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Return a copy of the raw params with ``section.key[.sub]=yaml-value`` overrides."""
    import copy

    import yaml

    data = copy.deepcopy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or len(parts) < 2 or not all(parts):
            raise ValueError(f"--set {item!r}: expected SECTION.KEY=VALUE")
        node = data
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ValueError(f"--set {item!r}: {p} is not a mapping")
        node[parts[-1]] = yaml.safe_load(raw)
    return data


def load_configs(params_path: Path, overrides: list[str]):
    """``(ModelConfig, TrainConfig)`` of the params file with ``overrides``; the whole file is
    read once and checked with them."""
    from cashg.core.params import params_from_data, read_yaml

    data = apply_overrides(read_yaml(params_path), overrides)  # the file, read once
    where = f"{params_path} (with --set)" if overrides else str(params_path)
    params = params_from_data(data, where)  # the whole file checked, the overrides in it
    return params["model"], params["train"]


def sample_lines_from_test(test_dir: Path, n: int, max_chars: int, n_refs: int, size: int):
    """Up to ``n`` ``(text, refs (R, S, S), writer)`` from the test split: the first sentence of
    each of the first ``n`` writers (sorted ids), cut at a word end within ``max_chars``."""
    from cashg.core.ink import InkFile
    from cashg.generation.inputs import load_style_h5

    gt, style = test_dir / "gt.h5", test_dir / "style.h5"
    if n <= 0 or not gt.is_file() or not style.is_file():
        return []
    out, seen = [], set()
    with InkFile(gt) as f:
        for sid in sorted(f.ids()):
            s = f[sid]
            if s.writer_id in seen:
                continue
            text = s.text if len(s.text) <= max_chars else \
                (s.text[:max_chars].rsplit(" ", 1)[0] or s.text[:max_chars])
            try:
                refs = load_style_h5(style, s.writer_id, size, n_refs)
            except ValueError:
                continue
            seen.add(s.writer_id)
            out.append((text, refs, s.writer_id))
            if len(out) == n:
                break
    return out


def open_data(data_dir: Path, cfg, cache: bool):
    """``(train SplitData, held-out SplitData, held-out description, subset files)``."""
    from functools import partial

    from cashg.training.data import DataError, SplitData, held_out_writers, split_is_empty
    from cashg.training.schedules import used_streams

    train_dir, val_dir = data_dir / "train", data_dir / "validation"
    if not train_dir.is_dir():
        raise DataError(f"{train_dir}: no train split")
    split = partial(SplitData, streams=used_streams(cfg), cache=cache)  # the subsets it reads
    files = sorted(train_dir.glob("*.h5"))
    if not split_is_empty(val_dir):
        train = split(train_dir)
        val = split(val_dir)
        files += sorted(val_dir.glob("*.h5"))
        return train, val, f"{val_dir} (validation split)", files
    if cfg.val_writers > 0:
        kept, held = held_out_writers(train_dir, cfg.val_writers)
        train = split(train_dir, writers=kept)
        val = split(train_dir, writers=held)
        return train, val, f"{train_dir} writers {held} (held out of training)", files
    train = split(train_dir)
    return train, split(train_dir), \
        f"{train_dir} (fixed train batches: no validation split, val_writers=0)", files


def train_main(data_dir: Path, out: Path, params_path: Path, overrides: list[str], resume: bool,
               args: argparse.Namespace, trainer_class: type[Trainer] | None = None) -> int:
    """Shared body of ``cashg train`` and the train stage (``trainer_class``: a
    :class:`~cashg.training.trainer.Trainer` subclass, for measurement scripts)."""
    import torch

    from cashg.core.params import ParamsError
    from cashg.model.cashg_model import count_parameters
    from cashg.model.checkpoint import CheckpointError
    from cashg.training import checkpoint as ck
    from cashg.training.data import DataError, char_inventory
    from cashg.training.distributed import barrier, shutdown
    from cashg.training.trainer import Trainer

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        model_cfg, cfg = load_configs(params_path, overrides)
        train, val, val_desc, files = open_data(data_dir, cfg, not args.no_cache_data)
    except (ParamsError, DataError, ValueError) as exc:
        print(f"cashg train: {exc}", file=sys.stderr)
        return 2
    opts = run_options(cfg, args, resume)
    if cfg.seconds is not None:
        from cashg.training.budget import fit_to_budget

        try:
            fitted = fit_to_budget(model_cfg, cfg, train, opts, cfg.seconds)
        except ValueError as exc:
            print(f"cashg train: train.seconds {cfg.seconds:g}: {exc}", file=sys.stderr)
            return 2
        overrides = [*overrides, *fitted]
        model_cfg, cfg = load_configs(params_path, overrides)
    lines = sample_lines_from_test(data_dir / "test", cfg.sample_lines, cfg.sample_max_chars,
                                   model_cfg.style_refs, model_cfg.style_image_size)
    params = {"model": ck.as_plain(model_cfg), "train": ck.as_plain(cfg),
              "overrides": list(overrides), "data": str(data_dir)}
    inventory = char_inventory(data_dir / "train")
    trainer = (trainer_class or Trainer)(
        model_cfg, cfg, train, out, opts, val_data=val, sample_lines=lines,
        char_inventory=inventory, data_fingerprint=ck.data_fingerprint(files), params=params)
    if trainer.dist.is_main:
        print(f"[train] {data_dir} -> {out} on {trainer.device} x{trainer.dist.world}; "
              f"config hash {trainer.hash}; held-out: {val_desc}; "
              f"parameters {count_parameters(trainer.model)}", file=sys.stderr)
    try:
        result = trainer.run()
    except CheckpointError as exc:
        print(f"cashg train: {exc}", file=sys.stderr)
        shutdown()
        return 2
    code = 0
    if result.status == "completed" and trainer.dist.is_main:
        extra = {"kind": "cashg-final-model", "config_hash": trainer.hash, "params": params,
                 "char_inventory": inventory, "iteration": result.iteration,
                 "best_val": result.best_val, "weights": weights_description(trainer)}
        with trainer.sampling_weights():
            ck.atomic_save(out / "model.pt", trainer.model, model_cfg, extra)
        summary = {
            "status": result.status, "iterations": result.iteration, "config_hash": trainer.hash,
            "resumed_from": str(trainer.resumed_from) if trainer.resumed_from else None,
            "seconds_this_session": round(result.seconds, 2), "device": str(trainer.device),
            "world_size": trainer.dist.world, "threads": torch.get_num_threads(),
            "bf16": opts.bf16, "best_val_total": result.best_val, "held_out": val_desc,
            "parameters": count_parameters(trainer.model), "final_metrics": result.last_metrics,
            "compile": compile_summary(trainer), "weights": weights_description(trainer),
            "loop": result.loop, "precision": "bf16" if opts.bf16 else "fp32",
            "workers": opts.workers, "cuda_graphs": graphs_summary(trainer),
            "batches": batch_sizes(cfg, train),
        }
        (out / "train_summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True)
                                                + "\n", encoding="utf-8")
        print(f"[train] done: {result.iteration} iterations in {result.seconds:.1f} s; wrote"
              f" {out / 'model.pt'}", file=sys.stderr)
    elif result.status == "deadline":
        code = EXIT_DEADLINE
    elif result.status == "interrupted":
        code = EXIT_SIGTERM if trainer._stop_signal else 0
        if trainer.dist.is_main and code == 0:
            print(f"[train] stopped after iteration {result.iteration} (--stop-after); rerun "
                  "with --resume to continue", file=sys.stderr)
    elif result.status == "stopped_nonfinite":
        code = EXIT_NONFINITE
    barrier()
    shutdown()
    train.close()
    return code


def run_options(cfg, args: argparse.Namespace, resume: bool):
    """The trainer's :class:`~cashg.training.trainer.RunOptions`: device, precision and
    workers from the ``train`` params unless a flag says otherwise."""
    from cashg.training.trainer import RunOptions

    return RunOptions(device=args.device or cfg.device,
                      bf16=cfg.bf16 if args.bf16 is None else args.bf16,
                      workers=cfg.workers if args.workers is None else args.workers,
                      resume=resume, track=not args.no_track, stop_after=args.stop_after,
                      deadline=args.deadline, cache_data=not args.no_cache_data,
                      progress=not args.no_progress)


def run(args: argparse.Namespace) -> int:
    return train_main(args.data, args.out, args.params, args.overrides, args.resume, args)


def weights_description(trainer: Trainer) -> str:
    """What model.pt holds: the last weights, or the average of ``train.ema_decay``."""
    ema = trainer.ema
    if ema is None or not ema.started:
        return "last"
    return f"ema decay {ema.decay} over iterations {ema.start}-{trainer.iteration}"


def graphs_summary(trainer: Trainer) -> dict | bool:
    """train.cuda_graphs in the run's summary: False, or the shapes captured this session,
    the seconds the captures took, the replayed steps and, where the step fell back to
    eager, why (a report flags it: a run that never replayed is not a graphed run)."""
    graphed = trainer.graphed
    if graphed is None:
        return False
    stats = graphed.stats
    return {"captures": stats.captures, "capture_seconds": round(stats.capture_s, 1),
            "replays": stats.replays, "fell_back_to_eager": stats.failure}


def batch_sizes(cfg, train) -> dict[str, dict[str, int]]:
    """Per stream, the batch the params ask for and the one drawn: one sample per writer
    (paper Table A1), so a benchmark with fewer training writers than the batch gets a batch
    of its writers; sentences are accumulated over ``sentence_accum`` micro-batches."""
    asked = {"char": cfg.batch_char, "bigram": cfg.batch_bigram,
             "sentence": cfg.batch_sentence}
    out = {}
    for stream, n in asked.items():
        if stream in train.by_writer:
            out[stream] = {"asked": n, "drawn": min(n, train.n_writers(stream))}
    if "sentence" in out:
        out["sentence"]["accumulated"] = cfg.sentence_accum
    return out


def compile_summary(trainer: Trainer) -> dict | bool:
    """train.compile in the run's summary: False, or the mode, the graphs compiled this
    session, the seconds spent compiling and, where it fell back to eager, why."""
    stats = getattr(trainer.step_fn, "stats", None)
    if stats is None:
        return False
    return {"mode": trainer.cfg.compile_mode, "graphs": stats.graphs,
            "compile_seconds": round(stats.compile_s, 1), "fell_back_to_eager": stats.failure}
