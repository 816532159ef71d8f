"""Generate stage: a held-out split's sentences in the writers' styles, for evaluation.

    python -m cashg.training.generate_stage --checkpoint results/train/EXP/model.pt \\
        --gt results/subsets/B/SPLIT/gt.h5 --style results/subsets/B/SPLIT/style.h5 \\
        --out results/generate/EXP [--device auto|cpu|cuda] [--threads N]

The pipeline generates each benchmark's test split (``generate@<benchmark>``, Table 2) and
the ablation benchmark's ``ablation.split``, validation by default
(``generate_ablation@<variant>``, Table 3). For every ground-truth sentence (sorted ids; the
first ``generate.limit`` when > 0) the model writes the same text fully autoregressively
(paper Sec. 4: one sample per test input) with the style references of the same writer: the
checkpoint's ``model.style_refs`` images of ``--style`` (the number the model was trained
with; evenly spaced, repeated cyclically when a writer has fewer). Outputs in ``--out``:

- ``pred.h5``: cashg-ink with the GT's sentence ids and writer ids (input of
  ``cashg.evaluation.stage`` / ``cashg evaluate --gt ... --pred ...``); its root attributes
  ``checkpoint``, ``decoding`` (JSON, see below), ``style_refs``, ``gt`` and the GT's
  ``benchmark`` and ``split`` say how it was made;
- ``lines.png``: the first ``generate.plot_lines`` sentences, ground truth above generation;
- ``summary.json``: what produced ``pred.h5``: ``decoding`` (``greedy``, ``temperature``,
  ``bias``, ``max_char_points``, ``seed``: :func:`decoding_record`), ``style_refs``, the
  checkpoint, the ground truth (``gt``: its path; ``benchmark`` and ``split``: its root
  attributes, written by the subsets stage), the number of sentences, the device and the
  seconds. The report reads the decoding of each table row from here
  (:func:`describe_decoding`), and the split of the Table 3 rows.

Decoding (``generate`` params): ``greedy: true`` takes the mean of the most probable mixture
component and the most probable pen state at every step, the authors' decoding (their
``src/model/handwriting_generator.py`` decodes with ``get_seq_from_gmm(...,
decode="argmax_onehot")``: argmax of the mixture weights, that component's mean, argmax of the
pen logits); ``greedy: false`` samples stochastically at ``temperature`` with Graves' sampling
``bias``.

Sentences are generated in batches of ``generate.batch_size`` (default 64; every sentence of a
batch advances on its own, see :mod:`cashg.sampling`): sorted by text length (ties by id) so
that a batch holds sentences of similar length, which cuts padding and the steps a batch spends
on its last, longest rows. Batch ``k`` of that order samples with seed ``generate.seed + k``,
so a run is reproducible for a given batch size; the outputs keep the sorted-id order.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np


def decoding_record(gcfg) -> dict:
    """The decoding settings of a :class:`~cashg.core.config.model.GenerateConfig` (plain, for JSON)."""
    return {"greedy": bool(gcfg.greedy), "temperature": float(gcfg.temperature),
            "bias": float(gcfg.bias), "max_char_points": int(gcfg.max_char_points),
            "seed": int(gcfg.seed)}


def describe_decoding(decoding: Mapping) -> str:
    """A phrase for a :func:`decoding_record`: ``greedy decoding (the authors' decoding)`` or
    ``stochastic sampling, temperature T, bias B``."""
    if decoding.get("greedy"):
        return "greedy decoding (the authors' decoding)"
    return (f"stochastic sampling, temperature {float(decoding.get('temperature', 1.0))},"
            f" bias {float(decoding.get('bias', 0.0))}")


def _refs(style: Path, writer: str, size: int, n: int, memo: dict) -> np.ndarray:
    """(n, size, size) float32 references of ``writer`` (memoised)."""
    from cashg.generation.cli import load_style_h5

    if writer not in memo:
        imgs = load_style_h5(style, writer, size, n)
        memo[writer] = np.resize(imgs, (n, *imgs.shape[1:])) if len(imgs) < n else imgs
    return memo[writer]


def generate_split(model, cfg, gcfg, gt_path: Path, style_path: Path, device, progress=True):
    """``(generated InkSentences, ground-truth InkSentences)`` in sorted id order, with
    ``cfg.style_refs`` references per sentence (``cfg``: the checkpoint's model config)."""
    import torch
    from tqdm import tqdm

    from cashg.core.ink import InkFile, make_sentence
    from cashg.sampling import SamplingOptions, encode_texts, sample

    with InkFile(gt_path) as f:
        gts = [f[sid] for sid in sorted(f.ids())]
    if gcfg.limit > 0:
        gts = gts[: gcfg.limit]
    memo: dict = {}
    out: list = [None] * len(gts)
    by_length = sorted(range(len(gts)), key=lambda i: (len(gts[i].text), i))
    batches = [by_length[a:a + gcfg.batch_size] for a in range(0, len(gts), gcfg.batch_size)]
    for k, batch in enumerate(tqdm(batches, desc="generate", unit="batch", file=sys.stderr,
                                   disable=not progress)):
        chunk = [gts[i] for i in batch]
        refs = np.stack([_refs(style_path, s.writer_id, cfg.style_image_size, cfg.style_refs,
                               memo) for s in chunk])
        cps, mask = encode_texts([s.text for s in chunk], device)
        opts = SamplingOptions(greedy=gcfg.greedy, temperature=gcfg.temperature, bias=gcfg.bias,
                               max_char_points=gcfg.max_char_points, seed=gcfg.seed + k)
        res = sample(model, cps, mask, torch.from_numpy(refs).to(device), opts)
        for j, (i, s) in enumerate(zip(batch, chunk)):
            out[i] = make_sentence(s.sentence_id, s.writer_id, s.text, res.absolute(j),
                                   res.pen[j], res.char_index[j])
    return out, gts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cashg.training.generate_stage",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--gt", required=True, type=Path,
                        help="the split's gt.h5 (cashg-ink), e.g. results/subsets/B/test/gt.h5")
    parser.add_argument("--style", required=True, type=Path,
                        help="the same split's style.h5")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    import torch

    from cashg.core.ink import InkFormatError, split_of, write_ink
    from cashg.core.params import ParamsError, load_section
    from cashg.generation.cli import unknown_characters
    from cashg.model.checkpoint import CheckpointError, load_model
    from cashg.render import render_png
    from cashg.training.distributed import resolve_device

    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    try:
        gcfg = load_section("generate", args.params)
        device = resolve_device(args.device)
        model, cfg, extra = load_model(args.checkpoint, map_location=device)
        for p in (args.gt, args.style):
            if not p.is_file():
                raise FileNotFoundError(f"{p}: file not found")
        origin = split_of(args.gt)
        pred, gts = generate_split(model, cfg, gcfg, args.gt, args.style, device,
                                   not args.no_progress)
    except (ParamsError, CheckpointError, InkFormatError, FileNotFoundError, ValueError,
            RuntimeError) as exc:
        print(f"generate_stage: {exc}", file=sys.stderr)
        return 2
    missing = unknown_characters([s.text for s in gts], extra.get("char_inventory"))
    if missing:
        print(f"generate_stage: characters never seen in training: {missing!r}", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    decoding = decoding_record(gcfg)
    write_ink(args.out / "pred.h5", pred, checkpoint=str(args.checkpoint),
              decoding=json.dumps(decoding, sort_keys=True), style_refs=cfg.style_refs,
              gt=str(args.gt), **{k: v for k, v in origin.items() if v is not None})
    rows = []
    for g, p in list(zip(gts, pred))[: gcfg.plot_lines]:
        rows += [g, p]
    render_png(rows, args.out / "lines.png")
    summary = {"decoding": decoding, "decoding_text": describe_decoding(decoding),
               "style_refs": cfg.style_refs, "checkpoint": str(args.checkpoint),
               "gt": str(args.gt), **origin,
               "sentences": len(pred), "device": str(device),
               "seconds": round(time.perf_counter() - t0, 2)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n",
                                           encoding="utf-8")
    print(f"generate_stage: {len(pred)} sentences of {args.gt} (split"
          f" {origin['split'] or 'not recorded'}; {describe_decoding(decoding)}, "
          f"{cfg.style_refs} style references) -> {args.out / 'pred.h5'}, "
          f"{args.out / 'lines.png'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
