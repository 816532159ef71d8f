"""What a trained run offers the studio: its experiments, checkpoints, writers and results.

A *run* is a results folder as the pipeline writes it (``results/train/<experiment>/model.pt``,
``results/subsets/<benchmark>/<split>/style.h5``, ``results/report/report.md`` with its
``images/``, ``results/evaluate/<experiment>/metrics.json``, ``results/generate/<experiment>/
lines.png``, ``results/new_text/<experiment>/lines.png``) or a lone checkpoint with a
``style.h5`` given beside it. The experiment -> benchmark and split mapping comes from the
params file (``experiments``); without one, a subsets folder named like the experiment is used.
Nothing here loads a model: it only finds files (cheap, torch-free).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

SPLITS = ("test", "validation", "train")  # writer lists in this order (held-out writers first)
PICTURES = {"generated": "generate", "new_text": "new_text"}  # picture kind -> stage folder


class RunError(ValueError):
    """A path that is not a usable run (the message says what is missing)."""


@dataclass(frozen=True)
class Run:
    """The files of one run. ``root``: the results folder (None for a lone checkpoint);
    ``checkpoints``: experiment -> model.pt; ``style_h5``: experiment -> [(split, style.h5)],
    held-out split first; ``params``: the params file used (None when there is none)."""

    root: Path | None
    checkpoints: dict[str, Path]
    style_h5: dict[str, list[tuple[str, Path]]] = field(default_factory=dict)
    params: Path | None = None
    benchmarks: dict[str, str] = field(default_factory=dict)  # experiment -> its benchmark

    @property
    def experiments(self) -> list[str]:
        return sorted(self.checkpoints)

    def report(self) -> Path | None:
        """``report/report.md`` when the run has one."""
        p = self.root / "report" / "report.md" if self.root else None
        return p if p is not None and p.is_file() else None

    def report_image(self, name: str) -> Path | None:
        """A file of ``report/images`` by bare name (no path parts: nothing outside it)."""
        if self.root is None or Path(name).name != name or name.startswith("."):
            return None
        p = self.root / "report" / "images" / name
        return p if p.is_file() else None

    def metrics(self, experiment: str) -> dict | None:
        """``evaluate/<experiment>/metrics.json`` (None when absent or unreadable)."""
        if self.root is None or experiment not in self.checkpoints:
            return None
        p = self.root / "evaluate" / experiment / "metrics.json"
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def decoding_curve(self, experiment: str) -> list[dict] | None:
        """The rows of ``decoding_curve/<experiment>/curve.json`` (temperature, CER, WER,
        STYLE_top1, STYLE_top5 on held-out writers), or None when absent or unreadable."""
        if self.root is None or experiment not in self.checkpoints:
            return None
        p = self.root / "decoding_curve" / experiment / "curve.json"
        try:
            rows = json.loads(p.read_text(encoding="utf-8"))["rows"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return rows if isinstance(rows, list) else None

    def glyph_reader(self, experiment: str) -> Path | None:
        """``recognizer/<benchmark>/glyph_reader.pt`` of the experiment's benchmark (the
        reader that checks each letter, :mod:`cashg.generation.check`), when the run has one."""
        if self.root is None or experiment not in self.checkpoints:
            return None
        p = self.root / "recognizer" / self.benchmarks.get(experiment, experiment) / \
            "glyph_reader.pt"
        return p if p.is_file() else None

    def picture(self, experiment: str, kind: str) -> Path | None:
        """``<stage>/<experiment>/lines.png`` for a kind of :data:`PICTURES`."""
        if self.root is None or experiment not in self.checkpoints or kind not in PICTURES:
            return None
        p = self.root / PICTURES[kind] / experiment / "lines.png"
        return p if p.is_file() else None


def _benchmarks(params: Path | None) -> dict[str, tuple[str, str]]:
    """experiment -> (benchmark, split) from the params file's ``experiments`` section."""
    if params is None:
        return {}
    from cashg.core.params import load_params

    exps = load_params(params).get("experiments") or {}
    return {name: (e.benchmark, e.split) for name, e in exps.items()}


def _style_files(root: Path, benchmark: str, held_out: str) -> list[tuple[str, Path]]:
    """(split, style.h5) of a benchmark's subsets, the held-out split first."""
    order = [held_out, *(s for s in SPLITS if s != held_out)]
    base = root / "subsets" / benchmark
    return [(s, base / s / "style.h5") for s in order if (base / s / "style.h5").is_file()]


def find_params(path: Path) -> Path | None:
    """The params file that made a run: ``params.yaml`` beside the results folder (the
    pipeline's layout, ``<project>/results``), or inside it."""
    base = path if path.is_dir() else path.parent
    for p in (base.parent / "params.yaml", base / "params.yaml"):
        if p.is_file():
            return p
    return None


def open_run(path: Path, params: Path | None = None, style_h5: Path | None = None,
             experiment: str | None = None) -> Run:
    """The :class:`Run` at ``path``: a results folder or a checkpoint file (then ``style_h5``
    gives its writers). ``params``: the params file (default: :func:`find_params`).
    ``experiment`` names a lone checkpoint (default: its file's folder name)."""
    path = Path(path)
    if path.is_file():
        name = experiment or path.parent.name or "model"
        styles = [("given", Path(style_h5))] if style_h5 is not None else []
        if style_h5 is not None and not Path(style_h5).is_file():
            raise RunError(f"{style_h5}: style.h5 not found")
        return Run(None, {name: path}, {name: styles}, params)
    if not path.is_dir():
        raise RunError(f"{path}: neither a results folder nor a checkpoint")
    root = path / "results" if (path / "results" / "train").is_dir() else path
    checkpoints = {p.parent.name: p for p in sorted((root / "train").glob("*/model.pt"))}
    if not checkpoints:
        raise RunError(f"{root}: no train/<experiment>/model.pt (is this a results folder?)")
    params = params if params is not None else find_params(root)
    mapping = _benchmarks(params)
    styles, benchmarks = {}, {}
    for name in checkpoints:
        benchmark, split = mapping.get(name, (name, "test"))
        benchmarks[name] = benchmark
        styles[name] = _style_files(root, benchmark, split)
        if style_h5 is not None:
            styles[name] = [("given", Path(style_h5)), *styles[name]]
    return Run(root, checkpoints, styles, params, benchmarks)


def list_writers(files: list[tuple[str, Path]]) -> list[tuple[str, str, Path]]:
    """(writer, split, style.h5) of every writer of the files, each writer once (its first
    file wins), in file order then the file's writer order."""
    from cashg.core.subsets.readers import StyleReader

    seen: dict[str, tuple[str, str, Path]] = {}
    for split, path in files:
        reader = StyleReader(path)
        try:
            for writer, rows in reader.indices_by_writer().items():
                if len(rows) and writer not in seen:
                    seen[writer] = (writer, split, path)
        finally:
            reader.close()
    return list(seen.values())
