"""Writers for the IAM-OnDB on-disk format (docs/formats.md), quirks included.

- ``lineStrokes/<grp>/<text id>/<form id>-NN.xml``: ISO-8859-1 XML; ``<Point .../>`` lines end
  in CRLF, every other line in LF; integer x, y (y down); absolute times with 2 decimals.
- ``ascii/<grp>/<text id>/<form id>.txt``: ``OCR:`` section, then ``CSR:`` and a blank line,
  then one transcription line per lineStrokes file; CRLF (some files LF), trailing spaces.
- ``original/<grp>/<text id>/strokes<letter>.xml``: ``<General><Form id writerID/></General>``.
- split lists and the Character-Queries segmentation JSON at the tree root.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

XML_DECL = '<?xml version="1.0" encoding="ISO-8859-1"?>\n'
ENCODING = "iso-8859-1"


@dataclass(frozen=True)
class IamLine:
    """One whiteboard line ready to be written.

    Attributes:
        line_id: e.g. ``a01-000u-01``.
        text: the transcription (no trailing spaces).
        xy: ``(N, 2)`` int64 whiteboard coordinates, y down.
        time_cs: ``(N,)`` int64 absolute time in centiseconds (written with 2 decimals).
        stroke_index: ``(N,)`` int32 stroke of each point (non-decreasing from 0).
        char_index: ``(N,)`` int32 character of each point.
    """

    line_id: str
    text: str
    xy: np.ndarray
    time_cs: np.ndarray
    stroke_index: np.ndarray
    char_index: np.ndarray


def form_parts(form_id: str) -> tuple[str, str, str]:
    """``a01-000u`` -> (``a01``, ``a01-000``, ``u``); ``a01-003`` -> (``a01``, ``a01-003``, ``""``)."""
    group, number = form_id.split("-", 1)
    digits = number.rstrip("abcdefghijklmnopqrstuvwxyz")
    return group, f"{group}-{digits}", number[len(digits):]


def linestrokes_path(root: Path, line_id: str) -> Path:
    form_id = line_id.rsplit("-", 1)[0]
    group, text_id, _ = form_parts(form_id)
    return root / "lineStrokes" / group / text_id / f"{line_id}.xml"


def ascii_path(root: Path, form_id: str) -> Path:
    group, text_id, _ = form_parts(form_id)
    return root / "ascii" / group / text_id / f"{form_id}.txt"


def original_path(root: Path, form_id: str) -> Path:
    group, text_id, letter = form_parts(form_id)
    return root / "original" / group / text_id / f"strokes{letter}.xml"


def _time(cs: int) -> str:
    return f"{cs // 100}.{cs % 100:02d}"


def _description(bbox: tuple[int, int, int, int]) -> str:
    """The ``<WhiteboardDescription>`` block for a form's bounding box (xmin, ymin, xmax, ymax)."""
    xmin, ymin, xmax, ymax = bbox
    return (
        "  <WhiteboardDescription>\n"
        '    <SensorLocation corner="top_left"/>\n'
        f'    <DiagonallyOppositeCoords x="{xmax}" y="{ymax}"/>\n'
        f'    <VerticallyOppositeCoords x="{xmin}" y="{ymax}"/>\n'
        f'    <HorizontallyOppositeCoords x="{xmax}" y="{ymin}"/>\n'
        "  </WhiteboardDescription>\n"
    )


def linestrokes_xml(line: IamLine, bbox: tuple[int, int, int, int]) -> bytes:
    """The lineStrokes XML of one line, encoded ISO-8859-1 (Point lines CRLF, others LF)."""
    parts = [XML_DECL, "<WhiteboardCaptureSession>\n", _description(bbox), "  <StrokeSet>\n"]
    bounds = np.flatnonzero(np.diff(line.stroke_index)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [len(line.stroke_index)]])
    xs, ys, ts = line.xy[:, 0].tolist(), line.xy[:, 1].tolist(), line.time_cs.tolist()
    for a, b in zip(starts.tolist(), ends.tolist()):
        parts.append(f'    <Stroke colour="black" start_time="{_time(ts[a])}"'
                     f' end_time="{_time(ts[b - 1])}">\n')
        parts.extend(f'      <Point x="{xs[i]}" y="{ys[i]}" time="{_time(ts[i])}"/>\r\n'
                     for i in range(a, b))
        parts.append("    </Stroke>\n")
    parts.append("  </StrokeSet>\n</WhiteboardCaptureSession>\n")
    return "".join(parts).encode(ENCODING)


def ascii_text(csr_lines: Sequence[str], crlf: bool, trailing: Sequence[bool]) -> bytes:
    """The ``ascii/`` transcription file: OCR section (text re-wrapped), then CSR lines."""
    nl = "\r\n" if crlf else "\n"
    ocr = textwrap.wrap(" ".join(csr_lines), width=48) or [""]
    csr = [t + (" " if pad else "") for t, pad in zip(csr_lines, trailing)]
    lines = ["OCR:", "", *ocr, "", "CSR:", "", *csr]
    return (nl.join(lines) + nl).encode(ENCODING)


def original_xml(form_id_attr: str, writer_id: str, bbox: tuple[int, int, int, int],
                 with_general: bool = True) -> bytes:
    """The ``original/`` form file holding the writer id (``<General>`` may be missing)."""
    parts = [XML_DECL, "<WhiteboardCaptureSession>\n", _description(bbox)]
    if with_general:
        parts.append("  <General>\n"
                     f"    <Form id={quoteattr(form_id_attr)} writerID={quoteattr(writer_id)}/>\n"
                     "  </General>\n")
    parts.append("</WhiteboardCaptureSession>\n")
    return "".join(parts).encode(ENCODING)


def split_list(form_ids: Sequence[str]) -> bytes:
    """An official split list: one form id per line with a leading space."""
    return "".join(f" {f}\n" for f in form_ids).encode("ascii")


def segmentation_entry(line: IamLine) -> dict:
    """The Character-Queries ground truth of one line (value keyed by ``"<line id>.xml"``).

    One segment per character with ``substring``; ``inkRanges`` are inclusive
    ``{startStroke, startPoint, endStroke, endPoint}`` (stroke = order of ``<Stroke>``,
    point = index inside the stroke); spaces have no ``inkRanges``.
    ``ctc_spike_positions`` gives one global point index per character (the middle point of
    its ink; for a space the last point before it) - an approximation of the real spikes.
    """
    stroke = line.stroke_index
    starts = np.concatenate([[0], np.flatnonzero(np.diff(stroke)) + 1])
    local = np.arange(len(stroke)) - starts[stroke]
    segments, spikes = [], []
    last = 0
    for c, char in enumerate(line.text):
        idx = np.flatnonzero(line.char_index == c)
        seg: dict = {"substring": char}
        if len(idx):
            runs = np.split(idx, np.flatnonzero(np.diff(idx) != 1) + 1)
            seg["inkRanges"] = [
                {"startStroke": int(stroke[r[0]]), "startPoint": int(local[r[0]]),
                 "endStroke": int(stroke[r[-1]]), "endPoint": int(local[r[-1]])}
                for r in runs]
            spikes.append(int(idx[len(idx) // 2]))
            last = int(idx[-1])
        else:
            spikes.append(last)
        segments.append(seg)
    return {"ctc_spike_symbols": line.text, "ctc_spike_positions": spikes,
            "gt_segmentation": {"segments": segments}}


def write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
