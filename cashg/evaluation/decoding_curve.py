"""Neatness against style: the decoding curve of a trained model on held-out writers.

    python -m cashg.evaluation.decoding_curve --checkpoint results/train/EXP/model.pt \\
        --subsets results/subsets/B --recognizer results/recognizer/B/recognizer.pt \\
        --out results/decoding_curve/EXP [--params params.yaml] [--threads 1]

A lower sampling temperature writes neater, more legible lines; it also pulls every writer's
lines towards the model's most probable hand. This stage measures both sides for the run's
own model on the held-out lines (:func:`cashg.evaluation.held_out.held_out_lines`: the train
writers that training holds out, never the test lines): at each of ``generate.curve_temperatures``
(sampled, the other decoding settings as the ``generate`` section has them) it generates every held-out
row, has the benchmark's recognizer read it (CER, WER) and the held-out writer classifier name
its writer (:func:`cashg.evaluation.held_out.held_out_scorer`: Style top-1 / top-5). The report
shows the curve next to the decoding the run uses, and the studio's neatness control says
what each end of the slider costs.

Writes ``curve.json`` (one row per temperature) and
``metrics.json`` (the rows as ``T<temperature>/<key>``, for ``dvc metrics show``). A side
metric never stops the pipeline: without held-out lines the curve has no row and says why
(``no_curve``), without enough held-out rows per writer it has no Style Score and says why
(``no_style_score``); an unreadable model, recognizer or params file is exit status 2.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
from pathlib import Path

from cashg.evaluation.model_stage import model_stage_parser

CURVE_KEYS = ("CER", "WER", "STYLE_top1", "STYLE_top5")


def main(argv: list[str] | None = None) -> int:
    parser = model_stage_parser(__doc__.splitlines()[0], "recognizer",
                                "the benchmark's recognizer.pt")
    args = parser.parse_args(argv)

    import torch

    from cashg.core.params import ParamsError, load_params
    from cashg.evaluation.held_out import (
        HeldOutError,
        held_out_lines,
        held_out_scorer,
        held_out_style,
        score_held_out,
    )
    from cashg.evaluation.style_score import StyleScoreError
    from cashg.model.checkpoint import CheckpointError, load_model
    from cashg.recognition.recognizer import Recognizer, RecognizerCheckpointError

    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            params = load_params(args.params)
            gcfg = params["generate"]
            temperatures = gcfg.curve_temperatures
            val_writers = params["train"].val_writers
            model, cfg, _ = load_model(args.checkpoint, map_location="cpu")
            recognizer = Recognizer.load(args.recognizer)
        except (ParamsError, CheckpointError, RecognizerCheckpointError,
                FileNotFoundError) as exc:
            print(f"decoding curve: {exc}", file=sys.stderr)
            return 2
        try:
            gt_path, style_path, desc = held_out_lines(args.subsets, val_writers, Path(tmp))
        except HeldOutError as exc:  # a side metric: say why there is no curve, go on
            print(f"decoding curve: no curve ({exc})", file=sys.stderr)
            temperatures, desc, no_curve = (), "no held-out lines", str(exc)
        else:
            no_curve = None
        scorer, scored, no_style = None, [], None
        if no_curve is None:
            try:
                scorer, scored = held_out_scorer(args.subsets, gt_path)
            except StyleScoreError as exc:  # rows it cannot read: CER only
                no_style = str(exc)
            else:
                no_style = scorer.unavailable
            if no_style is not None:  # too few held-out rows to name writers: CER only
                print(f"decoding curve: no Style Score ({no_style})", file=sys.stderr)
                scorer, scored = None, []
        for temperature in temperatures:
            # sampled at each temperature even where the run decodes greedily (the paper profile)
            opts = dataclasses.replace(gcfg, temperature=float(temperature), greedy=False)
            held, _ = score_held_out(model, cfg, opts, gt_path, style_path, recognizer, "cpu")
            top1, top5 = (held_out_style(scorer, scored,
                                         {s.sentence_id: s for s in held.generated})
                          if scorer is not None else (None, None))
            row = {"temperature": float(temperature), "CER": held.counts.cer, "WER": held.counts.wer, "STYLE_top1": top1,
                   "STYLE_top5": top5}
            rows.append(row)
            style = "" if top1 is None else f", style top-1 {top1:.3f}, top-5 {top5:.3f}"
            print(f"decoding curve: temperature {temperature}: CER {row['CER']:.3f}, WER"
                  f" {row['WER']:.3f}{style}", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    curve = {"lines": desc, "scored_lines": len(scored),
             "writers": list(scorer.writers) if scorer is not None else [],
             "no_style_score": no_style, "no_curve": no_curve,
             "decoding": {k: v for k, v in dataclasses.asdict(gcfg).items()
                          if k not in ("temperature", "curve_temperatures")},
             "used_temperature": gcfg.temperature, "rows": rows}
    (args.out / "curve.json").write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")
    metrics = {f"T{r['temperature']:g}/{k}": r[k] for r in rows for k in CURVE_KEYS}
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n",
                                           encoding="utf-8")
    print(f"decoding curve: {len(rows)} temperatures on {desc} -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
