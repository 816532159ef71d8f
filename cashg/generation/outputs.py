"""Outputs of generation: a file of generated lines (``cashg generate``) and the generate stage's
``pred.h5``, ``lines.png`` and ``summary.json``, with the record of the decoding that made them.

The stage's outputs (``--out`` of :mod:`cashg.generation.stage`):

- ``pred.h5``: cashg-ink with the GT's sentence ids and writer ids (input of
  ``cashg.evaluation.stage`` / ``cashg evaluate --gt ... --pred ...``); its root attributes
  ``checkpoint``, ``decoding`` (JSON, :func:`decoding_record`), ``style_refs``, ``gt`` and the
  GT's ``benchmark`` and ``split`` say how it was made;
- ``lines.png``: the first ``generate.plot_lines`` sentences, ground truth above generation;
- ``summary.json``: what produced ``pred.h5``: ``decoding``, ``style_refs``, the checkpoint, the
  ground truth (``gt``: its path; ``benchmark`` and ``split``: its root attributes, written by
  the subsets stage), the number of sentences, the device and the seconds. The report reads the
  decoding of each table row from here (:func:`describe_decoding`), and the split of the
  Table 3 rows.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path

FORMATS = (".png", ".svg", ".inkml", ".h5")


def write_output(sentences, out: Path, width: int | None = None) -> None:
    """Write generated sentences to ``out``, the format picked by its extension (:data:`FORMATS`):
    a picture (PNG, SVG; ``width`` pixels wide, default
    :data:`cashg.generation.render.WIDTH`), InkML, or cashg-ink (``.h5``)."""
    from cashg.core.ink import write_ink
    from cashg.generation.render import WIDTH, render_inkml, render_png, render_svg

    out.parent.mkdir(parents=True, exist_ok=True)
    ext = out.suffix.lower()
    width = WIDTH if width is None else width
    if ext == ".png":
        render_png(sentences, out, width=width)
    elif ext == ".svg":
        render_svg(sentences, out, width=width)
    elif ext == ".inkml":
        render_inkml(sentences, out)
    elif ext == ".h5":
        write_ink(out, sentences)
    else:
        raise ValueError(f"{out}: unsupported extension (use one of {', '.join(FORMATS)})")


def decoding_record(gcfg) -> dict:
    """The decoding settings of a :class:`~cashg.core.config.generate.GenerateConfig` (plain, for
    JSON): ``greedy``, ``temperature``, ``bias``, ``max_char_points``, ``seed``, and
    ``check`` when the characters were checked."""
    record = {"greedy": bool(gcfg.greedy), "temperature": float(gcfg.temperature),
              "bias": float(gcfg.bias), "max_char_points": int(gcfg.max_char_points),
              "seed": int(gcfg.seed)}
    if getattr(gcfg, "check", 0):
        record["check"] = int(gcfg.check)
    return record


def describe_decoding(decoding: Mapping) -> str:
    """A phrase for a :func:`decoding_record`: ``greedy decoding (the authors' decoding)`` or
    ``stochastic sampling, temperature T, bias B``."""
    checked = (f", each character drawn {int(decoding['check'])} times and the drawing the "
               "glyph reader reads best kept" if decoding.get("check") else "")
    if decoding.get("greedy"):
        return "greedy decoding (the authors' decoding)" + checked
    return (f"stochastic sampling, temperature {float(decoding.get('temperature', 1.0))},"
            f" bias {float(decoding.get('bias', 0.0))}" + checked)


def write_split_outputs(out: Path, pred: list, gts: list, *, gcfg, style_refs: int,
                        checkpoint: Path, gt: Path, origin: Mapping, device: str,
                        started: float) -> None:
    """Write ``pred.h5``, ``lines.png`` and ``summary.json`` (see the module docstring) of the
    generated sentences ``pred`` of the ground truth ``gts`` (same order) into ``out``; ``started``: the run's ``time.perf_counter()`` at its start."""
    from cashg.core.ink import write_ink
    from cashg.generation.render import render_png

    out.mkdir(parents=True, exist_ok=True)
    decoding = decoding_record(gcfg)
    write_ink(out / "pred.h5", pred, checkpoint=str(checkpoint),
              decoding=json.dumps(decoding, sort_keys=True), style_refs=style_refs,
              gt=str(gt), **{k: v for k, v in origin.items() if v is not None})
    rows = []
    for g, p in list(zip(gts, pred))[: gcfg.plot_lines]:
        rows += [g, p]
    render_png(rows, out / "lines.png")
    summary = {"decoding": decoding, "decoding_text": describe_decoding(decoding),
               "style_refs": style_refs, "checkpoint": str(checkpoint), "gt": str(gt),
               **origin, "sentences": len(pred), "device": device,
               "seconds": round(time.perf_counter() - started, 2)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n",
                                      encoding="utf-8")
