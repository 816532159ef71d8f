"""The glyph test: every writer writes every character of the alphabet, alone and inside a
short word, and a glyph reader names each one.

    python -m cashg.evaluation.glyph_test --checkpoint results/train/EXP/model.pt \\
        --subsets results/subsets/B --reader results/recognizer/B/glyph_reader.pt \\
        --out results/glyph_test/EXP [--writers test|held-out] [--params params.yaml]

A line's CER mixes a character's shape with everything around it. The glyph test isolates
the shape: for each writer (the benchmark's test writers, or with ``--writers held-out`` the
train writers that training holds out, on which changes are chosen) the model writes each
character of its alphabet (the characters of the train split's glyphs) once alone and once
inside the line ``glyph_test.word`` (``"n {}n"``: the character starts a word, where a line
holds its capitals and digits, after a space and another character's ink, and must end so that
the next can start), in the writer's style and with the ``generate`` section's
decoding. The glyph reader (:mod:`cashg.recognition.glyphs`, trained on ground-truth glyphs
of writers it is not scored on) reads each generated glyph, the one inside the word cut out by
its character index, and the writer's own ground-truth glyph of the same character
(``char.h5``): the ceiling. Scored per class (lower, upper, digit, punct): the share read
right, the share that ran to the sampler's point cap (``generate.max_char_points``), and the
ratio of the model's share to the writers' own.

Writes ``glyphs.csv`` (one row per writer, character and setting), ``metrics.json``
(``GLYPH_<class>``: alone, ``GLYPH_<class>_word``, ``GLYPH_<class>_own``,
``GLYPH_<class>_ratio``, ``GLYPH_CAP_<class>``: at the cap, alone and in the word together;
``GLYPH_all*`` over every class) and ``writers/<writer>.png``: each writer's alphabet, its own
glyphs above the model's, misread glyphs in red, glyphs at the cap marked. Cheap enough to
score a stage-1-only training in a couple of minutes (docs/results-log.md: how a change is
tried).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cashg.evaluation.model_stage import model_stage_parser
from cashg.recognition.scoring import GLYPH_CLASSES, glyph_class

SETTINGS = ("alone", "word", "own")

__all__ = ["GlyphRow", "glyph_metrics", "main", "run_glyph_test"]


@dataclass(frozen=True)
class GlyphRow:
    """One glyph read: whose, which character, how written (``alone``, ``word``: the model;
    ``own``: the writer's ground truth), what the reader read, its points and whether it ran
    to the point cap."""

    writer: str
    char: str
    setting: str
    read: str
    points: int
    capped: bool

    @property
    def right(self) -> bool:
        return self.read == self.char


def glyph_metrics(rows: Sequence[GlyphRow]) -> dict[str, float | None]:
    """``metrics.json`` of the rows (module docstring); a class without rows gives None."""
    out: dict[str, float | None] = {}

    def share(sel: list[GlyphRow], key) -> float | None:
        return round(float(np.mean([key(r) for r in sel])), 4) if sel else None

    for name in (*GLYPH_CLASSES, "all"):
        mine = [r for r in rows if name == "all" or glyph_class(r.char) == name]
        by = {s: [r for r in mine if r.setting == s] for s in SETTINGS}
        alone, word, own = (share(by[s], lambda r: r.right) for s in SETTINGS)
        out[f"GLYPH_{name}"] = alone
        out[f"GLYPH_{name}_word"] = word
        out[f"GLYPH_{name}_own"] = own
        out[f"GLYPH_{name}_ratio"] = (round(alone / own, 4) if alone is not None and own
                                      else None)
        out[f"GLYPH_CAP_{name}"] = share(by["alone"] + by["word"], lambda r: r.capped)
    return out


def _glyph_of(sentence, position: int):
    """(xy, pen) of character ``position`` of a generated InkSentence."""
    keep = sentence.char_index == position
    return sentence.xy[keep], sentence.pen[keep]


def run_glyph_test(model, cfg, gcfg, writers: Sequence[str], alphabet: str, style_path: Path,
                   own: dict, reader, word: str, progress: bool = False
                   ) -> tuple[list[GlyphRow], dict]:
    """Rows of every writer x character x setting and the generated glyphs
    ``{(writer, char, setting): (xy, pen)}``. ``own``: ``{(writer, char): (xy, pen)}`` the
    writers' ground-truth glyphs; ``word``: a template with one ``{}``; ``cfg`` / ``gcfg``:
    the checkpoint's model config and the :class:`~cashg.core.config.generate.GenerateConfig`."""
    from cashg.generation.split import Prompt, generate_prompts
    from cashg.recognition.glyphs import GlyphInk

    if word.count("{}") != 1:
        raise ValueError(f"glyph_test.word must hold exactly one {{}}, got {word!r}")
    at = word.index("{}")
    prompts = [Prompt(f"{w}|{c}|{s}", w, c if s == "alone" else word.format(c))
               for w in writers for c in alphabet for s in ("alone", "word")]
    written = generate_prompts(model, cfg, gcfg, prompts, style_path, "cpu", progress)
    cap = gcfg.max_char_points
    keys, inks, points = [], [], []
    for p, sent in zip(prompts, written):
        w, c, s = p.sentence_id.split("|")
        xy, pen = _glyph_of(sent, 0 if s == "alone" else at)
        keys.append((w, c, s))
        inks.append(GlyphInk(xy, pen, c))
        points.append(len(xy))
    for (w, c), (xy, pen) in sorted(own.items()):
        keys.append((w, c, "own"))
        inks.append(GlyphInk(xy, pen, c))
        points.append(len(xy))
    reads = reader.read(inks)
    rows = [GlyphRow(w, c, s, r, n, s != "own" and n >= cap)
            for (w, c, s), r, n in zip(keys, reads, points)]
    glyphs = {k: (g.xy, g.pen) for k, g in zip(keys, inks)}
    return rows, glyphs


def write_rows(rows: Sequence[GlyphRow], path: Path) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["writer", "char", "class", "setting", "read", "right", "points", "capped"])
        for r in rows:
            out.writerow([r.writer, r.char, glyph_class(r.char), r.setting, r.read,
                          int(r.right), r.points, int(r.capped)])


def summary_lines(metrics: dict) -> list[str]:
    """A small table of the metrics, one line per class (for the log)."""
    def f(v):
        return "  -- " if v is None else f"{v:5.3f}"

    lines = ["class  alone  word   own    ratio  at-cap"]
    for name in (*GLYPH_CLASSES, "all"):
        lines.append(f"{name:6s} {f(metrics[f'GLYPH_{name}'])}  {f(metrics[f'GLYPH_{name}_word'])}"
                     f"  {f(metrics[f'GLYPH_{name}_own'])}  {f(metrics[f'GLYPH_{name}_ratio'])}"
                     f"  {f(metrics[f'GLYPH_CAP_{name}'])}")
    return lines


def load_own_glyphs(char_h5: Path, writers: Sequence[str]) -> dict:
    """``{(writer, char): (xy, pen)}``: each writer's rank-0 ground-truth glyph per character."""
    from cashg.core.subsets.readers import CharReader

    wanted = set(writers)
    out = {}
    with CharReader(char_h5) as r:
        for w, rows in r.indices_by_writer().items():
            if w not in wanted:
                continue
            for i in rows:
                g = r[i]
                if g.rank == 0:
                    out[(w, g.char)] = (g.xy, g.pen)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = model_stage_parser(__doc__.splitlines()[0], "reader",
                                "the benchmark's glyph_reader.pt (recognizer@<benchmark>)")
    parser.add_argument("--writers", choices=("test", "held-out"), default="test",
                        help="the test split's writers (the pipeline) or the train writers "
                             "that training holds out (choosing a change)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    import torch

    from cashg.core.params import ParamsError, load_params
    from cashg.core.subsets.readers import DataError, StyleReader, held_out_writers
    from cashg.evaluation.glyph_pictures import write_writer_pictures
    from cashg.model.checkpoint import CheckpointError, load_model
    from cashg.recognition.glyphs import GlyphReader, GlyphReaderError

    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    try:
        params = load_params(args.params)
        gcfg = params["generate"]
        model, cfg, _ = load_model(args.checkpoint, map_location="cpu")
        reader = GlyphReader.load(args.reader)
        train = args.subsets / "train"
        if args.writers == "test":
            split = args.subsets / "test"
            with StyleReader(split / "style.h5") as s:
                writers = sorted(w for w, r in s.indices_by_writer().items() if len(r))
        else:
            split = train
            writers = held_out_writers(train, params["train"].val_writers)[1]
    except (ParamsError, CheckpointError, GlyphReaderError, DataError,
            FileNotFoundError) as exc:
        print(f"glyph test: {exc}", file=sys.stderr)
        return 2
    from cashg.core.subsets.readers import CharReader

    with CharReader(train / "char.h5") as r:
        trained = {r[i].char for i in range(len(r))}
    alphabet = "".join(sorted(trained & set(reader.alphabet)))
    own = load_own_glyphs(split / "char.h5", writers)
    gcfg = dataclasses.replace(gcfg, limit=0)
    rows, glyphs = run_glyph_test(model, cfg, gcfg, writers, alphabet, split / "style.h5", own,
                                  reader, params["glyph_test"].word, not args.no_progress)
    metrics = glyph_metrics(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(rows, args.out / "glyphs.csv")
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n",
                                           encoding="utf-8")
    write_writer_pictures(rows, glyphs, writers, alphabet, args.out / "writers")
    seconds = time.perf_counter() - start
    details = {"writers": list(writers), "writer_set": args.writers, "alphabet": alphabet,
               "word": params["glyph_test"].word, "max_char_points": gcfg.max_char_points,
               "reader": str(args.reader), "reader_meta": reader.meta,
               "seconds": round(seconds, 1)}
    (args.out / "details.json").write_text(json.dumps(details, indent=2) + "\n",
                                           encoding="utf-8")
    for line in summary_lines(metrics):
        print(f"glyph test: {line}", file=sys.stderr)
    print(f"glyph test: {len(writers)} writers x {len(alphabet)} characters in "
          f"{seconds:.0f} s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
