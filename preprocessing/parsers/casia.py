"""CASIA-OLHWDB parsers: ``.pot`` isolated characters (1.0-1.2) and ``.ptts`` / ``.wptt`` text
lines (2.0-2.2). Raw files in, :class:`~cashg.core.records.InkRecord` out; read only.

Formats (docs/formats.md, checked against the NLPR format tables and public readers):

``.pot`` (one file per writer, records concatenated, little-endian)::

    uint16 sample_size            bytes of the whole record, markers included
    4 bytes tag                   [lo, hi, 0, 0] of the GBK code: decode bytes([hi, lo])
    uint16 stroke_count
    int16 (x, y) ...              (-1, 0) ends a stroke, (-1, -1) ends the character

``.ptts`` / ``.wptt`` (one file per page)::

    uint32 header_size            = 54 + len(illustration)
    8 bytes format code, illustration (header_size - 54 bytes, NUL-terminated text),
    20 bytes code type, uint16 code_length, 20 bytes data type
    uint32 sample_length, uint32 page_index, uint32 stroke_count
    stroke_count x (uint16 n_points, n_points x (uint16 x, uint16 y))
    uint16 line_count, per line: uint16 n_strokes, n_strokes x uint16 stroke index,
        uint16 n_chars, per character: code (code_length bytes, natural byte order,
        FF FF = unknown) and, in .ptts only, uint16 n_char_strokes + that many uint16 indices

Decisions (every drop is a review row, counts reconcile ``seen == kept + rejected``):

- ``.pot`` framing trusts ``sample_size`` when the record it frames ends with the character-end
  marker and has no earlier one. Otherwise the record is rejected (``sample_size_mismatch``)
  and reading resumes after the character-end marker, or at ``sample_size``, whichever leads to
  a plausible next record; if neither does, reading stops (``unrecoverable_framing``). A record
  cut by the end of the file is rejected (``truncated_record``) and reading stops.
  ``stroke_count`` disagreeing with the markers is a warning (the markers define the strokes).
  Undecodable tags are rejected (``undecodable_code``), parsing continues.
- A text line is one record; its points are its strokes in time (= stored index) order, so a
  stroke added later to an earlier line keeps its true position in pen order.
- ``.ptts`` lines are segmented: each character owns the points of its strokes. A line with an
  unknown character code (``FF FF``) is rejected (``unknown_char_code``): keeping it would put a
  wrong text under the ink. ``.wptt`` lines are unsegmented (``char_points = None``).
- Writer id: the first run of digits in the file name, without leading zeros
  (``1001-c.pot`` -> ``1001``, ``001-P16.ptts`` -> ``1``).
- The paper's Chinese-protocol validation (duration sum, boundaries within +-3 points of a
  stroke end) runs in preprocessing; it reads per-character point counts from ``char_points``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cashg.core.config.data import DatasetConfig
from cashg.core.dataset_roots import casia_writer_id
from cashg.core.records import InkRecord, record_from_strokes
from preprocessing.parsers.pool import run_ordered
from preprocessing.review import ProblemSink, ReviewReport

POT_SUFFIX = ".pot"
PTTS_SUFFIX = ".ptts"
WPTT_SUFFIX = ".wptt"
SUFFIXES = {"casia_pot": POT_SUFFIX, "casia_ptts": PTTS_SUFFIX, "casia_wptt": WPTT_SUFFIX}

_POT_HEAD = 8  # uint16 size + 4-byte tag + uint16 stroke count
_POT_MIN_SIZE = _POT_HEAD + 4  # a record holds at least its character-end marker
_TEXT_FIXED_HEADER = 54  # header bytes besides the illustration
_UNKNOWN_CODE = b"\xff\xff"


class CasiaFormatError(ValueError):
    """A CASIA file that cannot be read as its format (raised in strict mode, no report)."""


def _sink(report: ReviewReport | None, source: str) -> ProblemSink:
    return ProblemSink(report, source, CasiaFormatError)


def writer_id_from_name(path: str | Path) -> str:
    """Writer id from a CASIA file name: first digit run, leading zeros removed
    (:func:`cashg.core.dataset_roots.casia_writer_id`, the one definition).

    ``1001.pot`` and ``1001-c.pot`` give ``"1001"``; ``001-P16.ptts`` gives ``"1"``. A name
    without digits gives its stem.
    """
    return casia_writer_id(path)


# --------------------------------------------------------------------------------------------
# .pot


def decode_pot_tag(tag: bytes) -> str:
    """The character of a 4-byte ``.pot`` tag ``[lo, hi, 0, 0]`` (GBK, byte-swapped).

    ASCII characters come out of the same rule (``21 00`` or ``00 21`` both give ``"!"``).
    Raises ``ValueError`` when the code is not one GBK character.
    """
    if len(tag) != 4:
        raise ValueError(f"tag must be 4 bytes, got {len(tag)}")
    if tag[2] or tag[3]:
        raise ValueError(f"tag {tag.hex()} has non-zero high bytes")
    text = bytes([tag[1], tag[0]]).replace(b"\x00", b"").decode("gbk")
    if len(text) != 1:
        raise ValueError(f"tag {tag.hex()} decodes to {text!r}, not one character")
    return text


def _pot_points(body: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, bool, int]:
    """Points and stroke numbers of ``(M, 2)`` int16 pairs (character-end marker excluded).

    Returns ``points`` ``(N, 2)`` float64, ``stroke_index`` ``(N,)`` int32 (0, 1, ... over the
    non-empty strokes), the number of strokes the markers delimit (empty ones included),
    whether points followed the last stroke-end marker (an unterminated stroke, kept) and how
    many empty strokes were dropped.
    """
    is_end = (body[:, 0] == -1) & (body[:, 1] == 0)
    keep = ~is_end
    raw_stroke = np.cumsum(is_end)[keep]  # markers before each point
    unterminated = bool(len(body)) and bool(keep[-1])
    n_marked = int(is_end.sum()) + int(unterminated)
    if len(raw_stroke):
        new = np.concatenate([[True], raw_stroke[1:] != raw_stroke[:-1]])
        stroke_index = (np.cumsum(new) - 1).astype(np.int32)
        n_strokes = int(stroke_index[-1]) + 1
    else:
        stroke_index = np.zeros(0, np.int32)
        n_strokes = 0
    points = body[keep].astype(np.float64)
    return points, stroke_index, n_marked, unterminated, n_marked - n_strokes


@dataclass(frozen=True)
class PotSample:
    """One ``.pot`` record: its order in the file, byte offset, character and ink."""

    index: int
    offset: int
    char: str
    points: np.ndarray  # (N, 2) float64 absolute x, y
    stroke_index: np.ndarray  # (N,) int32

    @property
    def strokes(self) -> list[np.ndarray]:
        """The points split into strokes, each ``(n, 2)`` float64."""
        cuts = np.flatnonzero(np.diff(self.stroke_index)) + 1
        return np.split(self.points, cuts)


def iter_pot(data: bytes, source: str, report: ReviewReport | None = None) -> Iterator[PotSample]:
    """Walk the records of one ``.pot`` file's bytes (see the module docstring for framing)."""
    sink = _sink(report, source)
    n = len(data)
    i16 = np.frombuffer(data, dtype="<i2", count=n // 2)  # all fields are 2-byte aligned
    u16 = struct.Struct("<H")

    def char_end_at(end: int) -> bool:  # is the pair ending at byte `end` the (-1, -1) marker?
        return end >= 4 and end <= n and i16[end // 2 - 2] == -1 and i16[end // 2 - 1] == -1

    def plausible(pos: int) -> bool:
        if pos == n:
            return True
        if pos + _POT_HEAD > n:
            return False
        size = u16.unpack_from(data, pos)[0]
        return size >= _POT_MIN_SIZE and size % 2 == 0 and char_end_at(pos + size)

    def first_char_end(pos: int) -> int | None:
        """Byte offset just after the first (-1, -1) pair at or after ``pos``."""
        start = pos // 2
        # sample_size is a uint16, so a record's marker lies within 65536 bytes of its start
        m = (min(n // 2, start + 32768) - start) // 2
        pairs = i16[start : start + 2 * m].reshape(-1, 2)
        hits = np.flatnonzero((pairs[:, 0] == -1) & (pairs[:, 1] == -1))
        return None if not len(hits) else pos + 4 * int(hits[0]) + 4

    off = 0
    index = 0
    while off < n:
        sample = f"record {index} @ byte {off}"
        if data[off : off + 2] == b"\x00\x00" and not data[off:].strip(b"\x00"):
            # zero padding after the last record is not a record
            sink.warn("*", "trailing_padding", f"{n - off} zero bytes at the end")
            return
        sink.count(seen=1)
        if off + _POT_HEAD > n:
            sink.reject(sample, "truncated_record", f"{n - off} bytes left, header needs 8")
            return
        size = u16.unpack_from(data, off)[0]
        tag = data[off + 2 : off + 6]
        stroke_count = u16.unpack_from(data, off + 6)[0]
        end = off + size
        framed = size >= _POT_MIN_SIZE and size % 2 == 0 and char_end_at(end)
        if framed:
            pairs = i16[(off + _POT_HEAD) // 2 : end // 2].reshape(-1, 2)
            body = pairs[:-1]
            framed = not bool(np.any((body[:, 0] == -1) & (body[:, 1] == -1)))
        if not framed:
            marker_end = first_char_end(off + _POT_HEAD)
            if marker_end is None and end > n:
                sink.reject(sample, "truncated_record", f"sample_size {size}, {n - off} bytes left")
                return
            if marker_end is not None and plausible(marker_end):
                nxt = marker_end
            elif end > off and end <= n and plausible(end):
                nxt = end
            else:
                sink.reject(
                    sample, "unrecoverable_framing", f"sample_size {size}; {n - off} bytes unread"
                )
                return
            sink.reject(
                sample,
                "sample_size_mismatch",
                f"sample_size {size}, character-end marker ends the record at"
                f" {None if marker_end is None else marker_end - off}; resuming at byte {nxt}",
            )
            off = nxt
            index += 1
            continue
        try:
            char = decode_pot_tag(tag)
        except (ValueError, UnicodeDecodeError) as exc:
            sink.reject(sample, "undecodable_code", f"tag {tag.hex()}: {exc}")
            off, index = end, index + 1
            continue
        points, stroke_index, n_marked, unterminated, empty = _pot_points(body)
        if not len(points):
            sink.reject(sample, "empty_sample", f"char {char!r} has no points")
            off, index = end, index + 1
            continue
        if unterminated:
            sink.warn(sample, "unterminated_stroke", "points after the last stroke-end marker")
        if empty:
            sink.fix(sample, "empty_stroke_dropped", f"{empty} empty stroke(s)")
        if n_marked != stroke_count:
            sink.warn(
                sample,
                "stroke_count_mismatch",
                f"header says {stroke_count}, markers give {n_marked}",
            )
        sink.count(kept=1)
        yield PotSample(index, off, char, points, stroke_index)
        off, index = end, index + 1


def read_pot(
    path: str | Path, report: ReviewReport | None = None
) -> Iterator[tuple[str, list[np.ndarray]]]:
    """Yield ``(char, strokes)`` per record of a ``.pot`` file; strokes are ``(n, 2)`` float64.

    With a ``report`` problems become rows and reading goes on; without one the first rejected
    record raises :class:`CasiaFormatError` naming the file, the record and the reason.
    """
    path = Path(path)
    for s in iter_pot(path.read_bytes(), str(path), report):
        yield s.char, s.strokes


def pot_records(
    path: str | Path,
    report: ReviewReport | None = None,
    source: str | None = None,
    dataset: str = "casia_pot",
) -> Iterator[InkRecord]:
    """Records (one per glyph, segmented: the glyph owns all its points) of a ``.pot`` file."""
    path = Path(path)
    source = str(path) if source is None else source
    writer = writer_id_from_name(path)
    stem = path.name.split(".")[0]
    for s in iter_pot(path.read_bytes(), source, report):
        yield InkRecord(
            dataset=dataset,
            writer_id=writer,
            sample_id=f"{stem}-{s.index:05d}",
            text=s.char,
            points=s.points,
            stroke_index=s.stroke_index,
            char_points=(np.arange(len(s.points), dtype=np.int64),),
            source=source,
        )


# --------------------------------------------------------------------------------------------
# .ptts / .wptt


class _Truncated(Exception):
    pass


class _Cursor:
    """Little-endian reads over a bytes object; ``_Truncated`` past the end."""

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, k: int) -> bytes:
        if self.pos + k > len(self.data):
            raise _Truncated(f"need {k} bytes at {self.pos}, file has {len(self.data)}")
        out = self.data[self.pos : self.pos + k]
        self.pos += k
        return out

    def u16(self) -> int:
        return struct.unpack("<H", self.take(2))[0]

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u16_array(self, k: int) -> np.ndarray:
        """``(k,)`` uint16."""
        raw = self.take(2 * k)
        return np.frombuffer(raw, dtype="<u2").astype(np.int64)


@dataclass(frozen=True)
class TextHeader:
    """The page header of a ``.ptts`` / ``.wptt`` file."""

    header_size: int
    format_code: str
    illustration: str
    code_type: str
    code_length: int
    data_type: str
    sample_length: int
    page_index: int
    stroke_count: int


def _cstr(raw: bytes) -> str:
    return raw.split(b"\x00", 1)[0].decode("gbk", errors="replace").strip()


def _read_text_header(cur: _Cursor) -> tuple[TextHeader, bool]:
    """Parse the header; returns it and whether ``header_size`` had to be ignored.

    ``header_size`` defines the illustration length (``header_size - 54``). When that yields
    an impossible ``code_length``, the NUL-terminated illustration is used instead.
    """
    data = cur.data
    header_size = cur.u32()
    format_code = _cstr(cur.take(8))
    candidates = []
    if header_size >= _TEXT_FIXED_HEADER:
        candidates.append(header_size - _TEXT_FIXED_HEADER)
    nul = data.find(b"\x00", 12)
    if nul >= 0:
        candidates.append(nul - 12 + 1)
    for illus_len in candidates:
        c = _Cursor(data, 12)
        illustration = _cstr(c.take(illus_len))
        code_type = _cstr(c.take(20))
        code_length = c.u16()
        data_type = _cstr(c.take(20))
        if code_length not in (1, 2, 4):
            continue
        sample_length, page_index, stroke_count = c.u32(), c.u32(), c.u32()
        cur.pos = c.pos
        header = TextHeader(
            header_size,
            format_code,
            illustration,
            code_type,
            code_length,
            data_type,
            sample_length,
            page_index,
            stroke_count,
        )
        return header, illus_len != header_size - _TEXT_FIXED_HEADER
    raise ValueError(f"header_size {header_size}: no illustration length gives a valid code length")


def decode_text_code(code: bytes) -> str | None:
    """One character code of a text-line file (natural byte order); ``None`` for unknown.

    ``FF FF`` (any length, all bytes 0xFF) is the unknown-character code. Raises
    ``ValueError`` when the code is not exactly one GBK character.
    """
    if code and all(b == 0xFF for b in code):
        return None
    raw = code.replace(b"\x00", b"")
    try:
        text = raw.decode("gbk")
    except UnicodeDecodeError:
        text = raw.decode("gb18030")
    if len(text) != 1:
        raise ValueError(f"code {code.hex()} decodes to {text!r}, not one character")
    return text


@dataclass(frozen=True)
class TextLine:
    """One line of a text page as stored (indices refer to the page's strokes)."""

    index: int
    stroke_ids: np.ndarray  # (s,) int64 page stroke indices, as stored
    codes: list[bytes]
    char_stroke_ids: list[np.ndarray] | None  # .ptts: per character (k,) int64, else None


def parse_text_page(
    data: bytes, source: str, segmented: bool, report: ReviewReport | None = None
) -> tuple[TextHeader | None, list[np.ndarray], list[TextLine]]:
    """Low-level read of one ``.ptts`` (``segmented``) or ``.wptt`` page.

    Returns the header, the page strokes (each ``(n, 2)`` float64) and the lines that could be
    read. Counts: each declared line is one ``seen`` sample; lines lost to truncation are
    rejected rows; a page whose strokes cannot be read counts as one rejected sample ``*``.
    """
    sink = _sink(report, source)
    cur = _Cursor(data)
    try:
        header, fallback = _read_text_header(cur)
        if fallback:
            sink.warn("*", "header_size_inconsistent", "illustration read up to its NUL")
        spans: list[tuple[int, int]] = []
        for _ in range(header.stroke_count):
            k = cur.u16()
            spans.append((cur.pos, k))
            cur.take(4 * k)
        line_count = cur.u16()
    except (_Truncated, ValueError) as exc:
        sink.count(seen=1)
        reason = "truncated_file" if isinstance(exc, _Truncated) else "bad_header"
        sink.reject("*", reason, str(exc))
        return None, [], []
    strokes = [
        np.frombuffer(data, dtype="<u2", count=2 * k, offset=pos).reshape(k, 2).astype(np.float64)
        for pos, k in spans
    ]
    lines: list[TextLine] = []
    sink.count(seen=line_count)
    for li in range(line_count):
        try:
            ids = cur.u16_array(cur.u16())
            n_chars = cur.u16()
            codes: list[bytes] = []
            char_ids: list[np.ndarray] = []
            for _ in range(n_chars):
                codes.append(cur.take(header.code_length))
                if segmented:
                    char_ids.append(cur.u16_array(cur.u16()))
        except _Truncated as exc:
            stem = Path(source).name.split(".")[0]
            for lj in range(li, line_count):
                sink.reject(f"{stem}-L{lj:02d}", "truncated_file", str(exc))
            return header, strokes, lines
        lines.append(TextLine(li, ids, codes, char_ids if segmented else None))
    if cur.pos != len(data):
        sink.warn("*", "trailing_bytes", f"{len(data) - cur.pos} bytes after the last line")
    return header, strokes, lines


def _line_record(
    line: TextLine,
    header: TextHeader,
    strokes: list[np.ndarray],
    sink: ProblemSink,
    *,
    dataset: str,
    writer: str,
    stem: str,
) -> InkRecord | None:
    """Build the record of one line, or report why it is rejected (returns ``None``)."""
    sample = f"{stem}-L{line.index:02d}"
    n_page = len(strokes)
    ids = line.stroke_ids
    if not len(ids):
        sink.reject(sample, "empty_line", "line has no strokes")
        return None
    if ids.max() >= n_page:
        sink.reject(sample, "stroke_index_out_of_range", f"max {ids.max()} >= {n_page} strokes")
        return None
    order = np.unique(ids)  # time order = stored page order
    if len(order) != len(ids) or np.any(np.diff(ids) < 0):
        sink.fix(sample, "line_strokes_reordered", "line strokes put in page (time) order")
    chars: list[str] = []
    for k, code in enumerate(line.codes):
        try:
            ch = decode_text_code(code)
        except (ValueError, UnicodeDecodeError) as exc:
            sink.reject(sample, "undecodable_code", f"char {k}: {exc}")
            return None
        if ch is None:
            sink.reject(sample, "unknown_char_code", f"char {k} has code {code.hex()}")
            return None
        chars.append(ch)
    text = "".join(chars)
    if not text:
        sink.reject(sample, "empty_text", "line has no characters")
        return None
    line_strokes = [strokes[i] for i in order]
    char_points: list[np.ndarray] | None = None
    if line.char_stroke_ids is not None:
        lengths = np.array([len(s) for s in line_strokes], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        pos_of = {int(s): j for j, s in enumerate(order)}
        owner_count = np.zeros(len(order), dtype=np.int64)
        char_points = []
        for k, cids in enumerate(line.char_stroke_ids):
            missing = [int(s) for s in cids if int(s) not in pos_of]
            if missing:
                sink.reject(sample, "char_stroke_not_in_line", f"char {k} strokes {missing}")
                return None
            js = np.unique([pos_of[int(s)] for s in cids]).astype(np.int64)
            owner_count[js] += 1
            char_points.append(
                np.concatenate([np.arange(starts[j], starts[j] + lengths[j]) for j in js])
                if len(js)
                else np.zeros(0, np.int64)
            )
            if not len(js):
                sink.warn(sample, "char_without_strokes", f"char {k} {chars[k]!r}")
        if np.any(owner_count > 1):
            sink.warn(sample, "char_strokes_shared", f"{int(np.sum(owner_count > 1))} stroke(s)")
        if np.any(owner_count == 0):
            sink.warn(
                sample,
                "unassigned_strokes",
                f"{int(np.sum(owner_count == 0))} stroke(s) in no char",
            )
    return record_from_strokes(
        dataset=dataset,
        writer_id=writer,
        sample_id=sample,
        text=text,
        strokes=line_strokes,
        char_points=char_points,
        source=sink.source,
        meta={"page_index": str(header.page_index), "line_index": str(line.index)},
    )


def text_line_records(
    path: str | Path,
    segmented: bool,
    report: ReviewReport | None = None,
    source: str | None = None,
    dataset: str | None = None,
) -> Iterator[InkRecord]:
    """Records (one per text line) of a ``.ptts`` (``segmented``) or ``.wptt`` page."""
    path = Path(path)
    source = str(path) if source is None else source
    dataset = dataset or ("casia_ptts" if segmented else "casia_wptt")
    sink = _sink(report, source)
    header, strokes, lines = parse_text_page(path.read_bytes(), source, segmented, report)
    if header is None:
        return
    writer = writer_id_from_name(path)
    stem = path.name.split(".")[0]
    for line in lines:
        rec = _line_record(line, header, strokes, sink, dataset=dataset, writer=writer, stem=stem)
        if rec is not None:
            sink.count(kept=1)
            yield rec


def read_ptts(path: str | Path, report: ReviewReport | None = None) -> Iterator[InkRecord]:
    """Segmented text-line records of a ``.ptts`` page (strict without ``report``)."""
    return text_line_records(path, True, report)


def read_wptt(path: str | Path, report: ReviewReport | None = None) -> Iterator[InkRecord]:
    """Unsegmented text-line records of a ``.wptt`` page (strict without ``report``)."""
    return text_line_records(path, False, report)


# --------------------------------------------------------------------------------------------
# dataset


def list_files(root: Path, suffix: str) -> list[Path]:
    """Files under ``root`` (or ``root`` itself) with ``suffix`` (any case), sorted by path."""
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() == suffix)


def _parse_file(job: tuple[str, str, str, str, str]) -> tuple[list[InkRecord], ReviewReport]:
    fmt, path, source, stage, dataset = job
    report = ReviewReport(stage=stage, dataset=dataset)
    if fmt == "casia_pot":
        records = list(pot_records(path, report, source))
    else:
        records = list(text_line_records(path, fmt == "casia_ptts", report, source, fmt))
    return records, report


def parse_dataset(cfg: DatasetConfig, report: ReviewReport, workers: int = 1) -> list[InkRecord]:
    """Parse every CASIA file of ``cfg.format`` under ``cfg.root``, in sorted path order.

    ``workers > 1`` parses files in a process pool (same records and rows, same order).
    Sources in records and report rows are paths relative to ``cfg.root``.
    """
    if cfg.format not in SUFFIXES:
        raise ValueError(f"casia parser cannot read format {cfg.format!r}")
    root = Path(cfg.root)
    if not root.exists():
        raise FileNotFoundError(f"{cfg.format}: root {root} does not exist")
    files = list_files(root, SUFFIXES[cfg.format])
    if not files:
        raise FileNotFoundError(f"{cfg.format}: no *{SUFFIXES[cfg.format]} files under {root}")
    base = root if root.is_dir() else root.parent
    jobs = [
        (cfg.format, str(p), p.relative_to(base).as_posix(), report.stage, report.dataset)
        for p in files
    ]
    records: list[InkRecord] = []
    for recs, rep in run_ordered(_parse_file, jobs, workers, f"parse {cfg.format}"):
        records.extend(recs)
        report.extend(rep)
    return records
