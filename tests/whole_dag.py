"""Run a pipeline copy's whole DAG in this process: every stage the report needs, in
dependency order, by the very commands of ``dvc.yaml`` (what ``snakemake`` runs), with tiny
budgets. Used by the dataset-swap tests."""

from __future__ import annotations

import importlib
import shlex
import time
from pathlib import Path, PurePosixPath

TINY_PARAMS = {
    # a model of seconds, not minutes (cashg.model.presets.TINY's sizes)
    "model": {"canine_hidden": 32, "canine_layers": 1, "canine_heads": 2,
              "canine_intermediate": 64, "canine_hash_buckets": 512, "code_table_size": 256,
              "code_dim": 8, "ctx_layers": 1, "d_model": 32, "n_heads": 4, "ffn_dim": 64,
              "style_refs": 2, "style_cnn_width": 8, "supcon_dim": 16,
              "writer_decoder_layers": 1, "glyph_decoder_layers": 1, "n_mixtures": 3},
    "train_budget": {"schedule": {"total_iters": 4, "stage2_start": 1, "stage3_start": 2,
                                  "vdl_sentence_warmup_start": 2, "vdl_sentence_warmup_end": 3,
                                  "lr_decay_start": 2, "lr_decay_end": 4, "eval_interval": 2,
                                  "checkpoint_interval": 2}},
    "train": {"batch_char": 4, "batch_bigram": 4, "batch_sentence": 2, "sentence_accum": 1,
              "eval_batches": 1, "sample_lines": 1, "val_writers": 1},
    "generate": {"max_char_points": 6, "curve_temperatures": [1.0], "batch_size": 16},
    "recognizer": {"model": {"conv_channels": 8, "kernel": 3, "downsample": 2, "hidden": 8,
                             "layers": 1},
                   "train": {"iterations": 3, "batch_size": 4, "warmup_iters": 1,
                             "val_writers": 1},
                   "glyphs": {"iterations": 3, "batch_size": 4, "width": 4}},
    "new_text": {"writers": 2, "per_writer": 1},
}


POOLED = ("preprocessing.stages.parse", "preprocessing.stages.preprocess")  # --workers 2 default


def tiny(params: dict) -> dict:
    """``params`` with :data:`TINY_PARAMS` over it and every experiment on the short
    schedule."""
    for section, values in TINY_PARAMS.items():
        _merge(params.setdefault(section, {}), values)
    for exp in params["experiments"].values():
        exp["budget"] = "short"
    return params


def _merge(into: dict, values: dict) -> None:
    for key, value in values.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def stage_order(root: Path) -> list:
    """Every stage of the DAG both tools run (``workflow.dag.load_stages``), each after the
    stages whose outputs it reads; ``demo_corpus`` only when another stage reads it (with real
    roots nothing does)."""
    from workflow.dag import load_stages

    specs = {s.name: s for s in load_stages(root)}
    outs = [(s.name, PurePosixPath(o.path)) for s in specs.values() for o in s.outs]

    def producers(dep: str) -> set[str]:
        path = PurePosixPath(dep)
        return {name for name, out in outs if out == path or out in path.parents
                or path in out.parents}

    order: list = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for dep in specs[name].deps:
            for producer in sorted(producers(dep) - {name}):
                visit(producer)
        order.append(specs[name])

    for name in specs:
        if name != "demo_corpus":
            visit(name)
    return order


def run_stage(cmd: str) -> int:
    """One stage command in this process (``python -m MODULE ...`` or ``cashg ...``), with one
    worker where a stage would start a process pool."""
    argv = shlex.split(cmd)
    if argv[:2] == ["python", "-m"]:
        module, args = importlib.import_module(argv[2]), argv[3:]
        if "--workers" in args:
            args[args.index("--workers") + 1] = "1"
        elif argv[2] in POOLED:
            args += ["--workers", "1"]
        return int(module.main(args) or 0)
    if argv[0] == "cashg":
        from cashg.cli import main

        return main(argv[1:])
    raise AssertionError(f"unexpected stage command {cmd!r}")


def run_whole_dag(root: Path, monkeypatch) -> dict[str, float]:
    """Run every stage of ``root`` (a pipeline copy) in dependency order; returns the seconds
    each stage took, in the order they ran. A stage that fails fails the caller, naming it."""
    monkeypatch.chdir(root)
    took = {}
    for spec in stage_order(root):
        t0 = time.perf_counter()
        rc = run_stage(spec.cmd)
        assert rc == 0, f"{spec.name} exited {rc}: {spec.cmd}"
        took[spec.name] = round(time.perf_counter() - t0, 1)
    return took
