"""The README's table of a run's figures, written from the run's results, never by hand.

    python scripts/readme_figures.py --results results --commit "$(git rev-parse --short HEAD)" \\
        --machine "2-core AMD EPYC Zen 4 (family 25 model 17)"
    python scripts/readme_figures.py --check      # the README's table against the record

Two steps, so that the committed README and the committed figures cannot disagree:

1. ``--results``: the figures of one experiment are read from the run's result files (the
   keys each stage writes: ``cashg/evaluation/*.py``, ``cashg/recognition/stage.py``,
   ``cashg/training/cli.py``) into a record, ``docs/results/demo_run.json``, together with the
   commit and the machine the run was made on (given: a results folder does not know them). A
   file the run did not make (a stage not in its params) is left out of the record, and so
   are its rows.
2. The table is rendered from that record alone and written between the markers
   ``<!-- figures:begin -->`` and ``<!-- figures:end -->`` of the README (nothing else there
   changes). ``--check`` renders it again and exits 1 when the README holds anything else
   (tests/test_readme_figures.py does the same).

Without ``--results`` the record is only read: the table is rewritten from the committed
record (after editing how a row is rendered, say).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
RECORD = Path("docs/results/demo_run.json")
CLASSES = ("lower", "upper", "digit", "initial")


def sources(experiment: str, benchmark: str, baseline: str) -> dict[str, str]:
    """Result file of each source, relative to the results folder (the DAG's paths,
    dvc.yaml)."""
    return {
        "evaluate": f"evaluate/{experiment}/metrics.json",
        "recognizer": f"recognizer/{benchmark}/summary.json",
        "style_score": f"style_score/{benchmark}/metrics.json",
        "glyph_test": f"glyph_test/{experiment}/metrics.json",
        "new_text": f"new_text/{experiment}/metrics.json",
        "decoding_curve": f"decoding_curve/{experiment}/metrics.json",
        "train": f"train/{experiment}/train_summary.json",
        "baseline": f"evaluate/{baseline}/metrics.json",
        "checked": f"checked/{experiment}/metrics.json",
    }


# the keys the record keeps of each source (the table reads nothing else); decoding_curve
# keeps its "T<temperature>/<metric>" keys, train its parameter count
KEYS = {
    "evaluate": ("CER", "WER", "CER_gt", "WER_gt", "DTW_norm", "F1_cursive", "CRE", "KGS",
                 "SSS", "DRIFT_ratio", "GAP_ratio", "RUNAWAY", "STYLE_top1", "STYLE_top5",
                 "STYLE_top1_gt", "STYLE_top5_gt", "STYLE_lines",
                 *(f"ERR_{c}" for c in CLASSES), *(f"ERR_{c}_gt" for c in CLASSES)),
    "recognizer": ("CER_chance", "lines_test"),
    "style_score": ("chance_top1", "writers"),
    "glyph_test": tuple(f"GLYPH_{c}{s}" for c in ("lower", "upper", "digit")
                        for s in ("", "_word", "_own")) + ("GLYPH_CAP_upper", "GLYPH_CAP_digit"),
    "new_text": ("CER", "WER", "lines"),
    "decoding_curve": (),
    "train": ("iterations", "seconds_this_session", "trainable_parameters"),
    "baseline": ("CER", "WER", "STYLE_top1", "GAP_ratio"),
    "checked": ("CHECK", "CER", "WER", "ERR_upper", "ERR_digit", "STYLE_top1",
                "SECONDS_per_line"),
}


def read_source(name: str, data: dict) -> dict:
    """The values of ``data`` (a parsed result file) that the record keeps for ``name``."""
    if name == "decoding_curve":
        return {k: v for k, v in data.items() if k.startswith("T") and "/" in k}
    if name == "train":
        data = {**data, "trainable_parameters": (data.get("parameters") or {}).get("trainable")}
    return {k: data[k] for k in KEYS[name] if data.get(k) is not None}


def collect(results: Path, commit: str, machine: str, experiment: str = "dsd",
            benchmark: str = "dsd", baseline: str = "glyph-collage") -> dict:
    """The record of one run: its commit and machine, the experiment, and per source that
    exists the file it was read from and the values kept (:data:`KEYS`)."""
    record: dict = {"commit": commit, "machine": machine, "experiment": experiment,
                    "benchmark": benchmark, "baseline": baseline, "sources": {},
                    "values": {}}
    for name, rel in sources(experiment, benchmark, baseline).items():
        path = Path(results) / rel
        if not path.is_file():
            continue
        record["sources"][name] = f"results/{rel}"
        record["values"][name] = read_source(name, json.loads(path.read_text()))
    if "evaluate" not in record["values"]:
        raise SystemExit(f"{results}: no {sources(experiment, benchmark, baseline)['evaluate']}"
                         " (the run's main figures); is this a run's results folder?")
    return record


@dataclass(frozen=True)
class Row:
    """One row: what is measured, the model's value, what to read it against, and where it
    comes from; ``needs``: the sources it reads (a row whose source is missing is left out)."""

    what: str
    needs: tuple[str, ...]
    model: Callable[[dict], str]
    against: Callable[[dict], str]
    where: Callable[[dict], str]


def _f(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f}"


def _join(v: dict, keys: list[str], digits: int = 2) -> str:
    return " / ".join(_f(v[k], digits) for k in keys)


def _temperatures(curve: dict) -> list[str]:
    """The temperatures of a decoding curve's keys ("T0.5/CER" -> "0.5"), in order."""
    return sorted({k.split("/")[0][1:] for k in curve}, key=float)


def _curve(curve: dict, metric: str, digits: int = 2) -> str:
    return " / ".join(_f(curve[f"T{t}/{metric}"], digits) for t in _temperatures(curve))


def rows(record: dict) -> list[Row]:
    """The table's rows, in order (each reads only the record)."""
    src = record["sources"]
    err = [f"ERR_{c}" for c in CLASSES]
    glyph = [f"GLYPH_{c}" for c in ("lower", "upper", "digit")]
    return [
        Row("CER / WER of the test lines"
            + (f" ({record['values']['recognizer']['lines_test']})"
               if "lines_test" in record["values"].get("recognizer", {}) else "")
            + ", read by the benchmark's recognizer", ("evaluate",),
            lambda v: _join(v["evaluate"], ["CER", "WER"], 3),
            lambda v: "ground truth " + _join(v["evaluate"], ["CER_gt", "WER_gt"], 3)
            + (f"; chance CER {_f(v['recognizer']['CER_chance'])}"
               if "CER_chance" in v.get("recognizer", {}) else ""),
            lambda v: f"`{src['evaluate']}`: `CER`, `WER`, `CER_gt`, `WER_gt`"),
        Row("share of characters read wrong: lower case / capitals / digits / line-initial",
            ("evaluate",),
            lambda v: _join(v["evaluate"], err),
            lambda v: "ground truth " + _join(v["evaluate"], [f"{k}_gt" for k in err]),
            lambda v: "the same file: `ERR_<class>`, `ERR_<class>_gt`"),
        Row("checked writing (each character drawn K times, the glyph reader keeping the"
            " best; not the paper's protocol): K / CER / WER / capitals / digits read wrong /"
            " Style top-1", ("checked",),
            lambda v: f"{v['checked']['CHECK']} / " + _join(
                v["checked"], ["CER", "WER", "ERR_upper", "ERR_digit", "STYLE_top1"], 3),
            lambda v: f"{_f(v['checked']['SECONDS_per_line'])} s a line to sample",
            lambda v: f"`{src['checked']}`: `CHECK`, `CER`, `WER`, `ERR_<class>`,"
                      " `STYLE_top1`, `SECONDS_per_line`"),
        Row("DTW_norm (the paper's trajectory distance; lower is closer)",
            ("evaluate",),
            lambda v: _f(v["evaluate"]["DTW_norm"]),
            lambda v: "",
            lambda v: "the same file: `DTW_norm`"),
        Row("CSM: F1_cursive / CRE / KGS / SSS (the paper's connectivity and spacing)",
            ("evaluate",),
            lambda v: _join(v["evaluate"], ["F1_cursive", "CRE", "KGS", "SSS"]),
            lambda v: "",
            lambda v: "the same file: `F1_cursive`, `CRE`, `KGS`, `SSS`"),
        Row("placement: baseline drift / word gap, as a multiple of the writers' own",
            ("evaluate",),
            lambda v: f"{_f(v['evaluate']['DRIFT_ratio'])}x / {_f(v['evaluate']['GAP_ratio'])}",
            lambda v: "1 / 1",
            lambda v: "the same file: `DRIFT_ratio`, `GAP_ratio`"),
        Row("runaway lines (ink that leaves the line)",
            ("evaluate",),
            lambda v: str(v["evaluate"]["RUNAWAY"]),
            lambda v: "",
            lambda v: "the same file: `RUNAWAY`"),
        Row("Style Score top-1 / top-5: lines given to the writer they imitate",
            ("evaluate",),
            lambda v: _join(v["evaluate"], ["STYLE_top1", "STYLE_top5"]),
            lambda v: "the writers' own lines " + _join(v["evaluate"],
                                                       ["STYLE_top1_gt", "STYLE_top5_gt"])
            + (f"; chance top-1 {_f(v['style_score']['chance_top1'])}"
               if "chance_top1" in v.get("style_score", {}) else ""),
            lambda v: "the same file: `STYLE_top1`, `STYLE_top5` (and `_gt`)"),
        Row("glyph test: each character written alone, read right: lower case / capitals /"
            " digits", ("glyph_test",),
            lambda v: _join(v["glyph_test"], glyph),
            lambda v: "the writers' own glyphs " + _join(v["glyph_test"],
                                                        [f"{k}_own" for k in glyph]),
            lambda v: f"`{src['glyph_test']}`: `GLYPH_<class>`, `GLYPH_<class>_own`"),
        Row("glyph test: the same inside a word", ("glyph_test",),
            lambda v: _join(v["glyph_test"], [f"{k}_word" for k in glyph]),
            lambda v: "",
            lambda v: "the same file: `GLYPH_<class>_word`"),
        Row("glyph test: capitals / digits that run to the sampler's point cap",
            ("glyph_test",),
            lambda v: _join(v["glyph_test"], ["GLYPH_CAP_upper", "GLYPH_CAP_digit"]),
            lambda v: "",
            lambda v: "the same file: `GLYPH_CAP_upper`, `GLYPH_CAP_digit`"),
        Row("new text (sentences outside the training data): CER / WER", ("new_text",),
            lambda v: _join(v["new_text"], ["CER", "WER"], 3),
            lambda v: "",
            lambda v: f"`{src['new_text']}`: `CER`, `WER`"),
        Row("lines of the train writers that training holds out, at sampling temperature "
            + " / ".join(_temperatures(record["values"].get("decoding_curve", {})))
            + ": CER", ("decoding_curve",),
            lambda v: _curve(v["decoding_curve"], "CER", 3),
            lambda v: "",
            lambda v: f"`{src['decoding_curve']}`: `T<temperature>/CER`"),
        Row("the same: Style Score top-1", ("decoding_curve",),
            lambda v: _curve(v["decoding_curve"], "STYLE_top1"),
            lambda v: "",
            lambda v: "the same file: `T<temperature>/STYLE_top1`"),
        Row(f"baseline `{record.get('baseline')}` (each writer's own glyphs, not learned): "
            "CER / WER / Style top-1 / word gap", ("baseline",),
            lambda v: _join(v["baseline"], ["CER", "WER", "STYLE_top1", "GAP_ratio"]),
            lambda v: "",
            lambda v: f"`{src['baseline']}`"),
        Row("training: iterations / trainable parameters / seconds", ("train",),
            lambda v: f"{v['train']['iterations']:,} / "
                      f"{v['train']['trainable_parameters'] / 1e6:.2f} M / "
                      f"{v['train']['seconds_this_session']:,.0f}",
            lambda v: "",
            lambda v: f"`{src['train']}`: `iterations`, `parameters`, `seconds_this_session`"),
    ]


def render(record: dict) -> str:
    """The markdown of the table: a line naming the run, then one row per figure whose
    sources are in the record (every value formatted from the record alone)."""
    values = record["values"]
    head = (f"Figures of the `{record['experiment']}` experiment in the run of commit "
            f"`{record['commit']}` on a {record['machine']} "
            f"(written by `scripts/readme_figures.py` from that run's results into "
            f"[{RECORD.as_posix()}]({RECORD.as_posix()})):")
    lines = [head, "", "| figure | model | read against | from |", "|---|---|---|---|"]
    for row in rows(record):
        if not all(n in values for n in row.needs):
            continue
        try:
            cells = [row.what, row.model(values), row.against(values), row.where(values)]
        except KeyError:  # a result file of an older run without this key
            continue
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def rewrite(readme: str, table: str) -> str:
    """``readme`` with the text between the two markers replaced by ``table``."""
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or \
            readme.index(BEGIN) > readme.index(END):
        raise ValueError(f"the README needs one {BEGIN} before one {END}")
    before, rest = readme.split(BEGIN)
    _, after = rest.split(END)
    return f"{before}{BEGIN}\n{table}\n{END}{after}"


def section(readme: str) -> str:
    """The text between the README's markers (as :func:`rewrite` writes it)."""
    return readme.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, help="a run's results folder: write the record "
                    "from it first (else the committed record is read)")
    ap.add_argument("--commit", help="the commit the run was made from (with --results)")
    ap.add_argument("--machine", help="the machine it ran on, in words (with --results)")
    ap.add_argument("--experiment", default="dsd")
    ap.add_argument("--benchmark", default="dsd")
    ap.add_argument("--baseline", default="glyph-collage")
    ap.add_argument("--record", type=Path, default=ROOT / RECORD)
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 when the README's table is not the record's")
    args = ap.parse_args(argv)
    if args.results is not None:
        if args.check or not args.commit or not args.machine:
            ap.error("--results needs --commit and --machine, and writes (not with --check)")
        record = collect(args.results, args.commit, args.machine, args.experiment,
                         args.benchmark, args.baseline)
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    record = json.loads(args.record.read_text())
    readme = args.readme.read_text(encoding="utf-8")
    table = render(record)
    if args.check:
        if section(readme) != table:
            print(f"{args.readme}: the figures table is not the one {args.record} gives; "
                  "run python scripts/readme_figures.py", file=sys.stderr)
            return 1
        return 0
    args.readme.write_text(rewrite(readme, table), encoding="utf-8")
    print(f"{args.readme}: figures of {record['commit']} ({len(table.splitlines()) - 4} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
