"""Top level of the demo corpus: plan writers, forms, splits and defects; generate both trees.

Determinism: every writer has its own random stream ``default_rng([seed, layout, writer])``
and the plan (form ids, splits, defects) comes from ``default_rng([seed, 0])``, so the trees are
byte-identical for a seed whatever the number of worker processes.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import string
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from cashg.core.config.data import DemoConfig
from preprocessing.demo import brush_writer as bw
from preprocessing.demo import iam_writer as iw
from preprocessing.demo.render import render_line
from preprocessing.demo.text import compose_sentence, glyph_lines
from preprocessing.demo.writers import sample_style

SPLIT_FILES = ("trainset.txt", "testset_v.txt", "testset_t.txt", "testset_f.txt")
DEFECTS_FILE = "DEFECTS.json"
SEGMENTATION_FILE = "segmentation.json"
IAM_EPOCH = 1_060_000_000  # whiteboard sessions in 2003, as in IAM-OnDB


@dataclass(frozen=True)
class FormPlan:
    form_id: str
    n_lines: int
    serial: int  # global form number (session start time)
    defect: str = ""  # "", extra_xml, truncated_xml, missing_general, wrong_form_id
    defect_line: int = 0
    wrong_id: str = ""


@dataclass(frozen=True)
class IamWriterTask:
    cfg: DemoConfig
    root: str
    index: int
    writer_id: str
    forms: tuple[FormPlan, ...]


@dataclass(frozen=True)
class BrushWriterTask:
    cfg: DemoConfig
    root: str
    index: int
    known_bad: tuple[int, ...] = field(default_factory=tuple)


def lines_per_writer(cfg: DemoConfig) -> int:
    return max(1, int(round(cfg.sentences_per_writer * cfg.scale)))


def _group_name(gi: int) -> str:
    """Form group names ``a01 .. a10, b01 .. z10, a11 ..``."""
    return f"{string.ascii_lowercase[(gi // 10) % 26]}{gi % 10 + 1 + 10 * (gi // 260):02d}"


def plan_iam(cfg: DemoConfig) -> tuple[list[str], list[list[FormPlan]], dict[str, list[str]]]:
    """Writer ids, each writer's forms, and the writer-disjoint split (lists of form ids)."""
    rng = np.random.default_rng([cfg.seed, 0])
    n_writers = cfg.writers_per_layout
    pool = np.arange(10000, 10000 + max(1000, 10 * n_writers))
    writer_ids = [str(w) for w in np.sort(rng.choice(pool, n_writers, replace=False))]
    sizes: list[list[int]] = []
    for _ in range(n_writers):
        remaining, chunks = lines_per_writer(cfg), []
        while remaining > 0:
            k = int(rng.integers(cfg.lines_per_form_min, cfg.lines_per_form_max + 1))
            k = min(k, remaining)
            if chunks and k < cfg.lines_per_form_min:
                chunks[-1] += k
            else:
                chunks.append(k)
            remaining -= k
        sizes.append(chunks)
    slots = [(w, f) for w in range(n_writers) for f in range(len(sizes[w]))]
    order = rng.permutation(len(slots))
    names: dict[tuple[int, int], tuple[str, int]] = {}
    for k, s in enumerate(order.tolist()):
        gi, p = divmod(k, 30)
        text_no, slot = divmod(p, 3)
        letter = "uvw"[slot]
        if slot == 0 and rng.random() < 0.12:
            letter = ""  # forms without a letter suffix exist (a01-003)
        names[slots[s]] = (f"{_group_name(gi)}-{text_no * 3 + int(rng.integers(3)):03d}{letter}", k)
    forms = [[FormPlan(*names[(w, f)][:1], sizes[w][f], names[(w, f)][1])
              for f in range(len(sizes[w]))] for w in range(n_writers)]
    if cfg.defects:
        forms = _place_iam_defects(forms, rng)
    perm = rng.permutation(n_writers)
    cut = np.round(np.cumsum(np.asarray(cfg.iam_split) / sum(cfg.iam_split)) * n_writers)
    bounds = np.concatenate([[0], cut.astype(int)])
    split = {name: sorted(f.form_id for w in perm[bounds[i]:bounds[i + 1]] for f in forms[w])
             for i, name in enumerate(SPLIT_FILES)}
    return writer_ids, forms, split


def _place_iam_defects(forms: list[list[FormPlan]], rng: np.random.Generator
                       ) -> list[list[FormPlan]]:
    """Give four distinct forms one documented defect each."""
    flat = [(w, f) for w in range(len(forms)) for f in range(len(forms[w]))]
    kinds = ("extra_xml", "truncated_xml", "missing_general", "wrong_form_id")
    chosen = rng.choice(len(flat), min(len(kinds), len(flat)), replace=False).tolist()
    out = [list(fs) for fs in forms]
    for kind, i in zip(kinds, chosen):
        w, f = flat[i]
        plan = out[w][f]
        other = flat[(i + 1) % len(flat)]
        wrong = forms[other[0]][other[1]].form_id if len(flat) > 1 else plan.form_id + "x"
        out[w][f] = FormPlan(plan.form_id, plan.n_lines, plan.serial, kind,
                             int(rng.integers(plan.n_lines)), wrong)
    return out


def _place_line(points: np.ndarray, angle_deg: float, origin: tuple[float, float]) -> np.ndarray:
    """Rotate ``(N, 2)`` points about (0, 0) by ``angle_deg`` (y down) and translate."""
    a = np.deg2rad(angle_deg)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return points @ rot.T + np.asarray(origin)


def _times(stroke_index: np.ndarray, xy: np.ndarray, rng: np.random.Generator,
           start_cs: int) -> np.ndarray:
    """Absolute centisecond times: 1-2 cs per sample in a stroke, pauses between strokes."""
    n = len(stroke_index)
    step = np.where(rng.random(n) < 0.06, 2, 1)
    new_stroke = np.concatenate([[False], np.diff(stroke_index) != 0])
    jump = np.concatenate([[0.0], np.hypot(*np.diff(xy, axis=0).T)])
    pause = 6 + (jump / 60.0).astype(np.int64) + rng.integers(0, 25, n)
    step = np.where(new_stroke, pause, step)
    step[0] = 0
    return start_cs + np.cumsum(step)


def _bbox(lines: Iterable[iw.IamLine], rng: np.random.Generator) -> tuple[int, int, int, int]:
    allxy = np.concatenate([ln.xy for ln in lines])
    m = rng.integers(20, 120, 4)
    return (int(allxy[:, 0].min() - m[0]), int(allxy[:, 1].min() - m[1]),
            int(allxy[:, 0].max() + m[2]), int(allxy[:, 1].max() + m[3]))


def generate_iam_writer(task: IamWriterTask) -> dict[str, Any]:
    """Write one IAM writer's forms; return its segmentation entries, defects and counts."""
    cfg, root = task.cfg, Path(task.root)
    rng = np.random.default_rng([cfg.seed, 1, task.index])
    style = sample_style(rng, "iam")
    segmentation: dict[str, dict] = {}
    defects: list[dict] = []
    quirks: dict[str, list[str]] = {"no_suffix_forms": [], "lf_ascii": [], "trailing_space": []}
    n_points = n_lines = 0
    for form in task.forms:
        x0 = float(rng.uniform(300.0, 1200.0))
        y0 = float(rng.uniform(700.0, 1100.0))
        pitch = 21.0 * style.size * float(rng.uniform(1.8, 2.5))
        clock = (IAM_EPOCH + form.serial * 3600 + int(rng.integers(0, 1800))) * 100
        lines: list[iw.IamLine] = []
        for k in range(form.n_lines):
            text = compose_sentence(rng, cfg.min_chars, cfg.max_chars)
            rendered = render_line(text, style, rng, cfg.iam_point_spacing, cfg.delayed_marks)
            angle = 0.0 if rng.random() < 0.1 else rng.normal(style.skew_mean, style.skew_std)
            origin = (x0 + rng.normal(0.0, 25.0), y0 + k * pitch + rng.normal(0.0, 10.0))
            xy = np.rint(_place_line(rendered.points * style.size, angle, origin)).astype(np.int64)
            time_cs = _times(rendered.stroke_index, xy, rng, clock)
            clock = int(time_cs[-1]) + int(rng.integers(100, 400))
            lines.append(iw.IamLine(f"{form.form_id}-{k + 1:02d}", text, xy, time_cs,
                                    rendered.stroke_index, rendered.char_index))
        bbox = _bbox(lines, rng)
        csr = [ln.text for ln in lines]
        for k, line in enumerate(lines):
            path = iw.linestrokes_path(root, line.line_id)
            data = iw.linestrokes_xml(line, bbox)
            rel = path.relative_to(root).as_posix()
            if form.defect == "truncated_xml" and k == form.defect_line:
                data = data[: int(len(data) * rng.uniform(0.4, 0.7))]
                defects.append({"kind": "truncated_xml", "form": form.form_id, "file": rel,
                                "detail": f"cut after {len(data)} bytes"})
            iw.write_bytes(path, data)
            n_points += len(line.xy)
        if form.defect == "extra_xml":
            csr = csr[:-1]
            defects.append({"kind": "extra_xml", "form": form.form_id,
                            "file": iw.linestrokes_path(root, lines[-1].line_id)
                            .relative_to(root).as_posix(),
                            "detail": f"{len(lines)} lineStrokes files but {len(csr)} CSR lines"})
        for line in lines[: len(csr)]:
            segmentation[f"{line.line_id}.xml"] = iw.segmentation_entry(line)
        n_lines += len(lines)
        crlf = bool(rng.random() < 0.93)
        trailing = [bool(rng.random() < 0.08) for _ in csr]
        iw.write_bytes(iw.ascii_path(root, form.form_id), iw.ascii_text(csr, crlf, trailing))
        if not crlf:
            quirks["lf_ascii"].append(form.form_id)
        quirks["trailing_space"].extend(ln.line_id for ln, t in zip(lines, trailing) if t)
        if not iw.form_parts(form.form_id)[2]:
            quirks["no_suffix_forms"].append(form.form_id)
        opath = iw.original_path(root, form.form_id)
        orel = opath.relative_to(root).as_posix()
        form_attr = form.wrong_id if form.defect == "wrong_form_id" else form.form_id
        iw.write_bytes(opath, iw.original_xml(form_attr, task.writer_id, bbox,
                                              with_general=form.defect != "missing_general"))
        if form.defect == "missing_general":
            defects.append({"kind": "missing_general", "form": form.form_id, "file": orel,
                            "detail": "no <General> block: writer id unknown"})
        if form.defect == "wrong_form_id":
            defects.append({"kind": "wrong_form_id", "form": form.form_id, "file": orel,
                            "detail": f"Form@id is {form.wrong_id!r} (the path is right)"})
    return {"segmentation": segmentation, "defects": defects, "quirks": quirks,
            "lines": n_lines, "points": n_points, "forms": len(task.forms),
            "style": asdict(style)}


def generate_brush_writer(task: BrushWriterTask) -> dict[str, Any]:
    """Write one BRUSH writer's drawings (sentences, then isolated-glyph lines)."""
    cfg, root = task.cfg, Path(task.root)
    rng = np.random.default_rng([cfg.seed, 2, task.index])
    style = sample_style(rng, "brush")
    texts = [compose_sentence(rng, cfg.min_chars, cfg.brush_max_chars)
             for _ in range(lines_per_writer(cfg))]
    n_sentences = len(texts)
    texts += glyph_lines(cfg.glyph_lines_per_writer)
    spacing = cfg.brush_point_spacing / style.size  # font units
    n_points = 0
    defects = []
    for d, text in enumerate(texts):
        rendered = render_line(text, style, rng, spacing, cfg.delayed_marks,
                               allow_joins=d < n_sentences)  # glyph lines: isolated glyphs
        rel = _place_line(rendered.points * style.size, rng.normal(0.0, style.skew_std), (0, 0))
        x0 = float(rng.uniform(12.0, 40.0))
        base = bw.BASELINE + float(rng.normal(0.0, 1.5))
        fit = min(1.0, (bw.BOX_WIDTH - 4.0 - x0) / max(rel[:, 0].max(), 1e-6),
                  (base - 2.0) / max(-rel[:, 1].min(), 1e-6),
                  (bw.BOX_HEIGHT - 2.0 - base) / max(rel[:, 1].max(), 1e-6))
        xy = rel * fit + (x0, base)
        drawing, label = bw.brush_arrays(xy, rendered.stroke_index, rendered.char_index,
                                         len(text))
        if d in task.known_bad:
            label = label[:, :-1]
            defects.append({"kind": "known_bad", "file": f"{task.index}/{d}",
                            "detail": f"label has {label.shape[1]} columns for a sentence of"
                                      f" {len(text)} characters"})
        bw.write_brush(root / str(task.index) / str(d), text, drawing, label)
        if cfg.brush_resample_variants:
            for gap in (20, 25):
                v_drawing, v_label = bw.resample_variant(drawing, label, float(gap))
                bw.write_brush(root / str(task.index) / f"{d}_resample{gap}", text, v_drawing,
                               v_label)
        n_points += len(drawing)
    return {"defects": defects, "drawings": len(texts), "points": n_points,
            "style": asdict(style)}


def _run(fn: Callable[[Any], dict], tasks: list, workers: int, desc: str) -> list[dict]:
    """Map ``fn`` over ``tasks`` in order (a process pool when ``workers > 1``)."""
    bar = tqdm(total=len(tasks), desc=desc, unit="writer", file=sys.stderr, leave=False)
    results = []
    if workers > 1 and len(tasks) > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            for r in pool.imap(fn, tasks):
                results.append(r)
                bar.update()
    else:
        for t in tasks:
            results.append(fn(t))
            bar.update()
    bar.close()
    return results


def _dump_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _fresh(root: Path) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)


def generate_demo_corpus(cfg: DemoConfig, out_iam: Path, out_brush: Path,
                         workers: int = 1) -> dict[str, Any]:
    """Write the IAM-OnDB-format tree at ``out_iam`` and the BRUSH-format tree at ``out_brush``.

    Both folders are emptied first. Returns a summary (counts and defects per layout); each
    tree root also gets ``DEFECTS.json``, the manifest of the injected defects and quirks.
    """
    if cfg.writers_per_layout < 1 or cfg.scale <= 0:
        raise ValueError("demo: writers_per_layout must be >= 1 and scale > 0")
    if cfg.defects and cfg.writers_per_layout < 2:
        # the injected IAM-OnDB defects would take the one writer's only form, and the parse
        # stage (parse.min_kept_share) would rightly fail on an input it keeps nothing of
        raise ValueError("demo: defects: true needs writers_per_layout >= 2 (set defects: false"
                         " for a one-writer corpus)")
    if not 1 <= cfg.lines_per_form_min <= cfg.lines_per_form_max:
        raise ValueError("demo: need 1 <= lines_per_form_min <= lines_per_form_max")
    if len(cfg.iam_split) != 4 or min(cfg.iam_split) < 0 or sum(cfg.iam_split) <= 0:
        raise ValueError("demo: iam_split needs 4 non-negative fractions (train, v, t, f)")
    out_iam, out_brush = Path(out_iam), Path(out_brush)
    _fresh(out_iam)
    _fresh(out_brush)

    writer_ids, forms, split = plan_iam(cfg)
    iam_tasks = [IamWriterTask(cfg, str(out_iam), w, writer_ids[w], tuple(forms[w]))
                 for w in range(cfg.writers_per_layout)]
    iam_results = _run(generate_iam_writer, iam_tasks, workers, "demo IAM-OnDB writers")
    segmentation: dict[str, dict] = {}
    for r in iam_results:
        segmentation.update(r["segmentation"])
    _dump_json(out_iam / SEGMENTATION_FILE, segmentation)
    for name, ids in split.items():
        iw.write_bytes(out_iam / name, iw.split_list(ids))
    iam_defects = sorted((d for r in iam_results for d in r["defects"]),
                         key=lambda d: (d["kind"], d["file"]))
    quirks = {k: sorted(v for r in iam_results for v in r["quirks"][k])
              for k in iam_results[0]["quirks"]}
    iam_manifest = {"format": "iam_ondb", "seed": cfg.seed, "defects": iam_defects,
                    "quirks": quirks,
                    "writers": {writer_ids[w]: [f.form_id for f in forms[w]]
                                for w in range(cfg.writers_per_layout)}}
    _dump_json(out_iam / DEFECTS_FILE, iam_manifest)

    rng = np.random.default_rng([cfg.seed, 3])
    n_drawings = lines_per_writer(cfg) + cfg.glyph_lines_per_writer
    bad_writer = int(rng.integers(cfg.writers_per_layout)) if cfg.defects else -1
    bad_drawing = int(rng.integers(lines_per_writer(cfg)))
    brush_tasks = [BrushWriterTask(cfg, str(out_brush), w,
                                   (bad_drawing,) if w == bad_writer else ())
                   for w in range(cfg.writers_per_layout)]
    brush_results = _run(generate_brush_writer, brush_tasks, workers, "demo BRUSH writers")
    brush_defects = [d for r in brush_results for d in r["defects"]]
    known_bad = sorted(f"{d['file']}{suffix}" for d in brush_defects
                       for suffix in ("", *(("_resample20", "_resample25")
                                           if cfg.brush_resample_variants else ())))
    brush_manifest = {"format": "brush", "seed": cfg.seed, "defects": brush_defects,
                      "known_bad": known_bad}
    _dump_json(out_brush / DEFECTS_FILE, brush_manifest)

    return {
        "iam": {"root": str(out_iam), "writers": len(iam_results),
                "forms": sum(r["forms"] for r in iam_results),
                "lines": sum(r["lines"] for r in iam_results),
                "segmented_lines": len(segmentation),
                "points": sum(r["points"] for r in iam_results),
                "cursive_writers": sum(r["style"]["cursive"] for r in iam_results),
                "defects": len(iam_defects)},
        "brush": {"root": str(out_brush), "writers": len(brush_results),
                  "drawings": sum(r["drawings"] for r in brush_results),
                  "drawings_per_writer": n_drawings,
                  "points": sum(r["points"] for r in brush_results),
                  "cursive_writers": sum(r["style"]["cursive"] for r in brush_results),
                  "known_bad": known_bad},
    }
