"""IAM-OnDB parser: ``lineStrokes`` + ``ascii`` + ``original`` (+ Character-Queries GT) -> records.

Layout (docs/formats.md), for the line ``a01-000u-01``::

    lineStrokes/a01/a01-000/a01-000u-01.xml   strokes (<StrokeSet><Stroke><Point x y time>)
    ascii/a01/a01-000/a01-000u.txt            OCR: ... CSR: (blank) line 1, line 2, ...
    original/a01/a01-000/strokesu.xml         <General><Form writerID="10028" .../>

A form id may lack the letter suffix (``a01-003`` -> ``a01-003-01.xml``, ``strokes.xml``).
Everything is keyed on paths, never on ``Form@id`` (unreliable in the real data).

Decisions (each rejection is a review row with the reason in brackets):

- CSR lines are matched to line files **by line number** (``-01`` is CSR line 1). A form whose
  CSR line count differs from its number of line files, or whose line numbers are not exactly
  1..n, is rejected as a whole [``csr_xml_count_mismatch``]: which transcription belongs to
  which ink is then unknowable, and a wrong pairing would poison training silently.
- No writer id (original file missing, unreadable, without ``<General>``, or without
  ``writerID``) -> every line of the form [``missing_writer_id``].
- No ascii file or no ``CSR:`` section [``missing_transcription``]; an empty line
  [``empty_transcription``]; a placeholder [``placeholder_transcription``]: no letter or digit,
  one of the placeholders the real ascii files contain (:data:`KNOWN_PLACEHOLDERS`, e.g.
  ``Please Enter Transcription here``; always rejected) or one listed in
  ``parse.placeholder_texts``, compared case- and spacing-insensitively; a run of two or more ``%`` [``percent_run``] unless
  ``parse.percent_runs: keep``.
- A line file that is not well-formed XML (truncated) [``truncated_xml``]; a line with no usable
  point [``no_points``]; file names that are not ``<form>-<NN>.xml`` [``unrecognised_file_name``].
- Points with a non-finite coordinate and strokes shorter than ``min_points_per_stroke`` are
  dropped (``fixed`` rows); non-finite timestamps drop the line's time channel (``fixed``).
  Time going backwards is kept in file (pen) order with a ``warning``.
- Segmentation (Character Queries JSON): ``inkRanges`` are inclusive ``(startStroke,
  startPoint) .. (endStroke, endPoint)``, strokes in between fully included, stroke = index of
  the ``<Stroke>`` element in file order, point = index inside that stroke (NOT swapped, unlike
  pre-2024 converters). A line missing from the JSON is kept unsegmented (``warning``
  ``no_segmentation``); an entry with out-of-range indices, a segment count different from the
  text length, or a different text is dropped (``fixed``, record kept unsegmented) or the line
  rejected, per ``parse.bad_segmentation``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from lxml import etree

from cashg.core.config.data import DatasetConfig, ParseConfig
from cashg.core.records import InkRecord
from preprocessing.parsers.pool import run_ordered
from preprocessing.parsers.safe_xml import XMLFileError, iter_start_elements, parse_xml_file
from preprocessing.review import ReviewReport

DATASET = "iam_ondb"
SPLIT_LISTS = ("trainset", "testset_v", "testset_t", "testset_f")
_LINE_FILE = re.compile(r"^(?P<form>.+)-(?P<line>\d+)\.xml$")
_PERCENT_RUN = re.compile(r"%{2,}")
# Placeholders that the IAM-OnDB transcription tool left in real ascii files instead of a
# transcription (docs/formats.md). Compared after
# :func:`_placeholder_key`, so case, spacing and trailing dots do not matter.
KNOWN_PLACEHOLDERS = (
    "Please Enter Transcription here",
    "Please enter the transcription here",
    "Enter Transcription here",
    "Transcription here",
)
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_ALL_X = etree.XPath("//Stroke/Point/@x", smart_strings=False)
_ALL_Y = etree.XPath("//Stroke/Point/@y", smart_strings=False)
_ALL_T = etree.XPath("//Stroke/Point/@time", smart_strings=False)
_SEGMENT_LABEL_KEYS = ("label", "char", "character", "symbol")


class TranscriptionError(ValueError):
    """An ascii transcription file that cannot be used (names the file)."""


class SegmentationError(ValueError):
    """A segmentation entry that does not fit its line; ``reason`` is the review reason code."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# --------------------------------------------------------------------------- file readers


def _to_float(values: list[str]) -> np.ndarray:
    """``(n,)`` float64 from attribute strings; unparsable values become NaN."""
    try:
        return np.asarray(values, dtype=np.float64)
    except ValueError:
        out = np.empty(len(values))
        for i, v in enumerate(values):
            try:
                out[i] = float(v)
            except ValueError:
                out[i] = np.nan
        return out


def read_line_strokes(path: str | Path) -> list[np.ndarray]:
    """The strokes of one ``lineStrokes`` file, in file order (empty strokes included).

    Returns one ``(n, 3)`` float64 array ``[x, y, time]`` per ``<Stroke>`` element, so list
    index = the stroke index the segmentation ground truth uses. A missing or unparsable
    attribute gives NaN in that cell. Raises :class:`XMLFileError` for unreadable/truncated XML.
    """
    root = parse_xml_file(path)
    stroke_elements = list(root.iter("Stroke"))
    # fast path: every child of a <Stroke> is a <Point> with x, y and time (comments are
    # removed by the parser); one XPath per attribute over the whole file, then split
    counts = [len(s) for s in stroke_elements]
    xs, ys, ts = _ALL_X(root), _ALL_Y(root), _ALL_T(root)
    total = sum(counts)
    if len(xs) == len(ys) == len(ts) == total and all(
        p.tag == "Point" for s in stroke_elements if len(s) for p in (s[0], s[-1])
    ):
        flat = np.empty((total, 3))  # (P, 3) x, y, time
        flat[:, 0], flat[:, 1], flat[:, 2] = _to_float(xs), _to_float(ys), _to_float(ts)
        return np.split(flat, np.cumsum(counts)[:-1]) if counts else []
    # slow path (a point lacks an attribute, or a stroke holds other elements): point by point
    return [
        np.array([[_attr(p, "x"), _attr(p, "y"), _attr(p, "time")] for p in s.iter("Point")],
                 dtype=np.float64).reshape(-1, 3)
        for s in stroke_elements
    ]


def _attr(element: etree._Element, name: str) -> float:
    try:
        return float(element.get(name, "nan"))
    except ValueError:
        return float("nan")


def read_transcription(path: str | Path) -> list[str]:
    """The ``CSR:`` lines of an ascii file, trailing white space stripped.

    The file is read as ISO-8859-1; CRLF, CR and LF line ends are all accepted. The ``OCR:``
    section before ``CSR:`` and the blank lines right after ``CSR:`` and at the end are skipped.
    Raises :class:`TranscriptionError` when the file has no ``CSR:`` section.
    """
    text = Path(path).read_bytes().decode("iso-8859-1")
    lines = [line.rstrip() for line in _LINE_BREAK.split(text)]
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "CSR:")
    except StopIteration:
        raise TranscriptionError(f"{path}: no 'CSR:' section") from None
    body = lines[start + 1:]
    while body and not body[0]:
        body.pop(0)
    while body and not body[-1]:
        body.pop()
    return body


@dataclass(frozen=True)
class FormHeader:
    """``<General><Form id=... writerID=...>`` of an ``original/`` file (None when absent)."""

    writer_id: str | None
    form_id: str | None


def read_form_header(path: str | Path) -> FormHeader:
    """Stream ``path`` up to ``General/Form`` (files can be huge; the rest is not read).

    A file without ``<General>`` (the strokes start first) gives ``FormHeader(None, None)``.
    Raises :class:`XMLFileError` when the file breaks before the header was found.
    """
    stream = iter_start_elements(path)
    try:
        for element in stream:
            tag = element.tag
            if tag == "Form":
                parent = element.getparent()
                if parent is not None and parent.tag == "General":
                    writer = (element.get("writerID") or "").strip() or None
                    form = (element.get("id") or "").strip() or None
                    return FormHeader(writer, form)
            elif tag in ("StrokeSet", "Stroke"):
                break
    finally:
        stream.close()
    return FormHeader(None, None)


def read_writer_id(path: str | Path) -> str | None:
    """Attribute ``writerID`` of ``General/Form`` in an ``original/`` file; None when absent."""
    return read_form_header(path).writer_id


def read_split_list(path: str | Path) -> list[str]:
    """Form ids of one official split list (one per line, leading/trailing spaces removed)."""
    text = Path(path).read_bytes().decode("iso-8859-1")
    return [line.strip() for line in _LINE_BREAK.split(text) if line.strip()]


def read_split_lists(root: str | Path) -> dict[str, list[str]]:
    """The official lists present in ``root``: ``{"trainset": [...], "testset_v": [...], ...}``."""
    root = Path(root)
    return {name: read_split_list(root / f"{name}.txt") for name in SPLIT_LISTS
            if (root / f"{name}.txt").is_file()}


def _normalise_key(key: str) -> str:
    key = Path(str(key)).name
    return key if key.endswith(".xml") else f"{key}.xml"


def load_segmentation(path: str | Path) -> dict[str, dict[str, Any]]:
    """Character-Queries ground truth: ``{"<line id>.xml": entry}``.

    ``path`` may be one JSON file keyed by line (the published ``*_segmented.json``), a
    directory of such files, or a directory of per-line files (the converted form, each an
    object with ``key`` and ``gt_segmentation``). Keys are normalised to ``<line id>.xml``.
    A key given twice with different content is an error.
    """
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise FileNotFoundError(f"{path}: no segmentation JSON found")
    out: dict[str, dict[str, Any]] = {}
    for file in files:
        try:
            data = json.loads(file.read_bytes())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{file}: unreadable segmentation JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{file}: segmentation JSON must be an object")
        entries = {data["key"]: data} if "key" in data and "gt_segmentation" in data else data
        for key, entry in entries.items():
            k = _normalise_key(key)
            if k in out and out[k] != entry:
                raise ValueError(f"{file}: segmentation for {k} given twice, differently")
            out[k] = entry
    return out


# --------------------------------------------------------------------------- segmentation


def _int_field(rng: Mapping[str, Any], name: str) -> int:
    value = rng.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise SegmentationError("segmentation_malformed", f"inkRange field {name}={value!r}")
    return int(value)


def ink_ranges_to_char_points(
    entry: Mapping[str, Any], text: str, stroke_lengths: Sequence[int]
) -> list[np.ndarray]:
    """Per character of ``text``, the flat point indices (over all strokes in file order).

    ``entry`` is one Character-Queries value (``gt_segmentation.segments[]``, one segment per
    character; a segment without ``inkRanges`` owns no ink). Ranges are inclusive; strokes
    between ``startStroke`` and ``endStroke`` are fully included. Raises
    :class:`SegmentationError` when the entry does not fit the line.
    """
    gt = entry.get("gt_segmentation", entry) if isinstance(entry, Mapping) else None
    segments = gt.get("segments") if isinstance(gt, Mapping) else None
    if not isinstance(segments, list):
        raise SegmentationError("segmentation_malformed", "no gt_segmentation.segments list")
    other_text = entry.get("text", entry.get("ctc_spike_symbols"))
    if isinstance(other_text, str) and other_text.rstrip() != text:
        raise SegmentationError("segmentation_text_mismatch",
                                f"segmentation text {other_text!r} != transcription {text!r}")
    if len(segments) != len(text):
        raise SegmentationError("segmentation_length_mismatch",
                                f"{len(segments)} segments for {len(text)} characters")
    lengths = np.asarray(stroke_lengths, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n_strokes = len(lengths)
    chars: list[np.ndarray] = []
    for i, segment in enumerate(segments):
        if not isinstance(segment, Mapping):
            raise SegmentationError("segmentation_malformed", f"segment {i} is not an object")
        for key in _SEGMENT_LABEL_KEYS:
            label = segment.get(key)
            if isinstance(label, str) and len(label) == 1 and label != text[i]:
                raise SegmentationError("segmentation_text_mismatch",
                                        f"segment {i} labelled {label!r}, text has {text[i]!r}")
        ranges = segment.get("inkRanges") or []
        if not isinstance(ranges, list):
            raise SegmentationError("segmentation_malformed", f"segment {i}: inkRanges")
        parts = []
        for rng in ranges:
            if not isinstance(rng, Mapping):
                raise SegmentationError("segmentation_malformed", f"segment {i}: inkRange")
            s0, p0 = _int_field(rng, "startStroke"), _int_field(rng, "startPoint")
            s1, p1 = _int_field(rng, "endStroke"), _int_field(rng, "endPoint")
            where = f"char {i} ({text[i]!r}) range stroke {s0}.{p0} .. {s1}.{p1}"
            if not (0 <= s0 <= s1 < n_strokes):
                raise SegmentationError("segmentation_out_of_range",
                                        f"{where}: line has {n_strokes} strokes")
            if not (0 <= p0 < lengths[s0] and 0 <= p1 < lengths[s1]):
                raise SegmentationError(
                    "segmentation_out_of_range",
                    f"{where}: strokes have {lengths[s0]} and {lengths[s1]} points")
            first, last = offsets[s0] + p0, offsets[s1] + p1
            if last < first:
                raise SegmentationError("segmentation_out_of_range", f"{where}: end before start")
            parts.append(np.arange(first, last + 1, dtype=np.int64))
        if len(parts) > 1:
            chars.append(np.unique(np.concatenate(parts)))
        else:
            chars.append(parts[0] if parts else np.zeros(0, np.int64))
    return chars


# --------------------------------------------------------------------------- line records


@dataclass
class LineResult:
    """A line parsed into a record (or ``None``) plus its review rows ``(action, reason, detail)``."""

    record: InkRecord | None
    rows: list[tuple[str, str, str]] = field(default_factory=list)


def build_line_record(
    *,
    strokes: Sequence[np.ndarray],
    text: str,
    writer_id: str,
    sample_id: str,
    source: str,
    segmentation: Mapping[str, Any] | None,
    segmentation_expected: bool,
    options: ParseConfig,
    meta: dict[str, str] | None = None,
) -> LineResult:
    """Clean one line's strokes (file order, ``(n, 3)`` x y time) and build its record."""
    rows: list[tuple[str, str, str]] = []
    lengths = np.array([len(s) for s in strokes], dtype=np.int64)
    flat = np.concatenate(strokes) if len(strokes) else np.zeros((0, 3))  # (P, 3)
    stroke_of = np.repeat(np.arange(len(lengths)), lengths)  # (P,) original stroke index

    char_points: list[np.ndarray] | None = None
    if segmentation is not None:
        try:
            char_points = ink_ranges_to_char_points(segmentation, text, lengths)
        except SegmentationError as exc:
            if options.bad_segmentation == "reject":
                return LineResult(None, [("rejected", exc.reason, exc.detail)])
            rows.append(("fixed", exc.reason, f"segmentation dropped: {exc.detail}"))
    elif segmentation_expected:
        rows.append(("warning", "no_segmentation", "line missing from the segmentation GT"))

    keep = np.isfinite(flat[:, :2]).all(axis=1)  # (P,)
    if not keep.all():
        rows.append(("fixed", "nan_points_dropped", f"{int((~keep).sum())} points"))
    kept_per_stroke = np.bincount(stroke_of[keep], minlength=len(lengths))
    short = (kept_per_stroke < max(options.min_points_per_stroke, 1)) & (kept_per_stroke > 0)
    empty = int((kept_per_stroke == 0).sum())
    if empty:
        rows.append(("fixed", "empty_strokes_dropped", f"{empty} strokes without usable points"))
    if short.any():
        keep &= ~short[stroke_of]
        rows.append(("fixed", "short_strokes_dropped",
                     f"{int(short.sum())} strokes < {options.min_points_per_stroke} points"))
    if not keep.any():
        return LineResult(None, [*rows, ("rejected", "no_points", "no usable point")])

    points = np.ascontiguousarray(flat[keep, :2])  # (N, 2)
    _, stroke_index = np.unique(stroke_of[keep], return_inverse=True)
    time: np.ndarray | None = flat[keep, 2]
    if not np.isfinite(time).all():
        rows.append(("fixed", "bad_time", "non-finite timestamps: time channel dropped"))
        time = None
    elif np.any(np.diff(time) < 0):
        rows.append(("warning", "time_backwards",
                     f"{int((np.diff(time) < 0).sum())} backward steps (kept in file order)"))

    if char_points is not None:
        new_index = np.cumsum(keep) - 1  # (P,) old flat index -> new index (valid where kept)
        remapped = []
        for i, idx in enumerate(char_points):
            idx = new_index[idx[keep[idx]]]
            if text[i].isspace() and len(idx):
                rows.append(("fixed", "space_with_ink", f"char {i}: {len(idx)} points unassigned"))
                idx = idx[:0]
            remapped.append(idx)
        char_points = remapped

    record = InkRecord(
        dataset=DATASET,
        writer_id=writer_id,
        sample_id=sample_id,
        text=text,
        points=points,
        stroke_index=stroke_index.astype(np.int32),
        time=None if time is None else np.ascontiguousarray(time),
        char_points=None if char_points is None else tuple(char_points),
        source=source,
        meta=dict(meta or {}),
    )
    return LineResult(record, rows)


def _placeholder_key(text: str) -> str:
    """Lower case, single spaces, no surrounding spaces or trailing dots/colons."""
    return " ".join(text.split()).lower().rstrip(".: ")


def transcription_problem(text: str, options: ParseConfig) -> tuple[str, str] | None:
    """``(reason, detail)`` when a CSR line cannot be used as a transcription, else None."""
    if not text.strip():
        return "empty_transcription", "empty CSR line"
    key = _placeholder_key(text)
    listed = {_placeholder_key(t) for t in (*KNOWN_PLACEHOLDERS, *options.placeholder_texts)}
    if key in listed or not any(c.isalnum() for c in text):
        return "placeholder_transcription", repr(text)
    if options.percent_runs == "reject" and _PERCENT_RUN.search(text):
        return "percent_run", repr(text)
    return None


# --------------------------------------------------------------------------- forms


@dataclass(frozen=True)
class FormTask:
    """Everything one worker needs to parse one form (all paths absolute or root-relative)."""

    root: str
    top: str  # "a01"
    folder: str  # "a01-000"
    form_id: str  # "a01-000u" (or "a01-003")
    lines: tuple[tuple[int, str], ...]  # (line number, file name), sorted
    segmentation: Mapping[str, Any] | None  # this form's GT entries; None = no GT configured
    split: str | None
    options: ParseConfig


def _suffix(form_id: str, folder: str) -> str:
    if form_id.startswith(folder):
        return form_id[len(folder):]
    match = re.search(r"[A-Za-z]*$", form_id)
    return match.group(0) if match else ""


def parse_form(task: FormTask) -> tuple[list[InkRecord], ReviewReport]:
    """Parse one form's lines: its records (in line order) and its review report."""
    report = ReviewReport(stage="parse", dataset=DATASET)
    records: list[InkRecord] = []
    root = Path(task.root)
    rel = Path(task.top) / task.folder
    line_paths = [(n, f"lineStrokes/{rel.as_posix()}/{name}") for n, name in task.lines]
    report.seen += len(line_paths)

    def reject_all(file: str, reason: str, detail: str) -> tuple[list[InkRecord], ReviewReport]:
        for _, lp in line_paths:
            report.reject(file, Path(lp).stem, reason, detail)
        return records, report

    original = f"original/{rel.as_posix()}/strokes{_suffix(task.form_id, task.folder)}.xml"
    if not (root / original).is_file():
        return reject_all(original, "missing_writer_id", "original strokes file not found")
    try:
        header = read_form_header(root / original)
    except XMLFileError as exc:
        return reject_all(original, "missing_writer_id", exc.problem)
    if header.writer_id is None:
        return reject_all(original, "missing_writer_id", "no General/Form@writerID")
    if header.form_id is not None and header.form_id != task.form_id:
        report.warn(original, task.form_id, "form_id_attribute_differs",
                    f"Form@id={header.form_id!r}; keyed on the path ({task.form_id})")

    ascii_file = f"ascii/{rel.as_posix()}/{task.form_id}.txt"
    if not (root / ascii_file).is_file():
        return reject_all(ascii_file, "missing_transcription", "ascii file not found")
    try:
        csr = read_transcription(root / ascii_file)
    except TranscriptionError:
        return reject_all(ascii_file, "missing_transcription", "no CSR: section")
    numbers = [n for n, _ in task.lines]
    if len(csr) != len(numbers) or numbers != list(range(1, len(numbers) + 1)):
        return reject_all(ascii_file, "csr_xml_count_mismatch",
                          f"{len(csr)} CSR lines, {len(numbers)} line files numbered"
                          f" {numbers[0]}..{numbers[-1]}")

    meta = {"form_id": task.form_id, **({"split_list": task.split} if task.split else {})}
    for n, line_path in line_paths:
        line_id = Path(line_path).stem
        text = csr[n - 1]
        problem = transcription_problem(text, task.options)
        if problem is not None:
            report.reject(line_path, line_id, *problem)
            continue
        try:
            strokes = read_line_strokes(root / line_path)
        except XMLFileError as exc:
            report.reject(line_path, line_id, "truncated_xml", exc.problem)
            continue
        seg = None if task.segmentation is None else task.segmentation.get(f"{line_id}.xml")
        result = build_line_record(
            strokes=strokes, text=text, writer_id=header.writer_id, sample_id=line_id,
            source=line_path, segmentation=seg, segmentation_expected=task.segmentation is not None,
            options=task.options, meta={**meta, "line": str(n)},
        )
        for action, reason, detail in result.rows:
            report.add(line_path, line_id, action, reason, detail)
        if result.record is not None:
            records.append(result.record)
            report.kept += 1
    return records, report


def _scan(root: Path, report: ReviewReport) -> list[tuple[str, str, str, list[tuple[int, str]]]]:
    """``[(top, folder, form_id, [(line number, file name)])]`` sorted; odd names reported."""
    base = root / "lineStrokes"
    forms: dict[tuple[str, str, str], list[tuple[int, str]]] = {}
    for top in sorted(e.name for e in os.scandir(base) if e.is_dir()):
        for folder in sorted(e.name for e in os.scandir(base / top) if e.is_dir()):
            for name in sorted(e.name for e in os.scandir(base / top / folder) if e.is_file()):
                match = _LINE_FILE.match(name)
                if match is None:
                    report.seen += 1
                    report.reject(f"lineStrokes/{top}/{folder}/{name}", name,
                                  "unrecognised_file_name", "expected <form id>-<NN>.xml")
                    continue
                key = (top, folder, match["form"])
                forms.setdefault(key, []).append((int(match["line"]), name))
    return [(t, f, form, sorted(lines)) for (t, f, form), lines in sorted(forms.items())]


def parse_dataset(
    cfg: DatasetConfig, report: ReviewReport, workers: int = 1,
    options: ParseConfig | None = None,
) -> list[InkRecord]:
    """Parse an IAM-OnDB tree at ``cfg.root`` into records (sorted by form, then line)."""
    options = options or ParseConfig()
    root = Path(cfg.root)
    if not (root / "lineStrokes").is_dir():
        raise FileNotFoundError(f"{root}: no lineStrokes/ folder (is this an IAM-OnDB root?)")
    segmentation = load_segmentation(root / cfg.segmentation) if cfg.segmentation else None
    splits = {form: name for name, forms in read_split_lists(root).items() for form in forms}
    tasks = []
    for top, folder, form_id, lines in _scan(root, report):
        seg = None  # only this form's entries travel to the worker
        if segmentation is not None:
            keys = (f"{Path(name).stem}.xml" for _, name in lines)
            seg = {k: segmentation[k] for k in keys if k in segmentation}
        tasks.append(FormTask(str(root), top, folder, form_id, tuple(lines), seg,
                              splits.get(form_id), options))
    records: list[InkRecord] = []
    for form_records, form_report in run_ordered(parse_form, tasks, workers, f"parse {DATASET}"):
        records.extend(form_records)
        report.extend(form_report)
    return records
