"""Test-only writers of CASIA-OLHWDB files (``.pot``, ``.ptts``, ``.wptt``) in the real layout.

Production code only reads these formats; the writers here build small fixtures byte by byte
from the documented layout (docs/formats.md; byte tables in the ``preprocessing.parsers.casia``
docstring), independently of the parser's code.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

Point = tuple[int, int]
STROKE_END = (-1, 0)
CHAR_END = (-1, -1)


def pot_tag(char: str) -> bytes:
    """The 4-byte tag: GBK code ``[hi, lo]`` stored byte-swapped as ``[lo, hi, 0, 0]``.

    An ASCII character is the high byte with a zero low byte, so ``"!"`` gives ``00 21 00 00``.
    """
    code = char.encode("gbk").ljust(2, b"\x00")
    return bytes([code[1], code[0], 0, 0])


def pot_record(
    char: str | bytes,
    strokes: Sequence[Sequence[Point]],
    *,
    sample_size: int | None = None,
    stroke_count: int | None = None,
) -> bytes:
    """One ``.pot`` record; ``char`` may be a raw 4-byte tag. Sizes can be forced (corruption)."""
    tag = char if isinstance(char, bytes) else pot_tag(char)
    body = b"".join(
        b"".join(struct.pack("<hh", x, y) for x, y in stroke) + struct.pack("<hh", *STROKE_END)
        for stroke in strokes
    ) + struct.pack("<hh", *CHAR_END)
    size = 8 + len(body) if sample_size is None else sample_size
    count = len(strokes) if stroke_count is None else stroke_count
    return struct.pack("<H", size) + tag + struct.pack("<H", count) + body


def text_code(char: str | bytes, code_length: int = 2) -> bytes:
    """A character code of a text-line file, natural byte order (``b"\\xff\\xff"`` = unknown)."""
    if isinstance(char, bytes):
        return char
    return char.encode("gbk").ljust(code_length, b"\x00")


def _fixed(text: str, n: int) -> bytes:
    return text.encode("ascii").ljust(n, b"\x00")[:n]


def text_page(
    strokes: Sequence[Sequence[Point]],
    lines: Sequence[tuple[Sequence[int], Sequence[tuple[str | bytes, Sequence[int]]]]],
    *,
    segmented: bool,
    illustration: str = "#CASIA-OLHWDB2 fixture",
    code_type: str = "GB",
    code_length: int = 2,
    data_type: str = "unsigned short",
    page_index: int = 16,
    header_size: int | None = None,
) -> bytes:
    """A ``.ptts`` (``segmented``) or ``.wptt`` page.

    ``lines``: per line its page stroke indices and its characters as ``(char, stroke ids)``
    (the stroke ids are written only for ``.ptts``).
    """
    illus = illustration.encode("gbk") + b"\x00"
    size = 54 + len(illus) if header_size is None else header_size
    head = (
        struct.pack("<I", size)
        + _fixed("PTTS" if segmented else "WPTT", 8)
        + illus
        + _fixed(code_type, 20)
        + struct.pack("<H", code_length)
        + _fixed(data_type, 20)
    )
    body = b"".join(
        struct.pack("<H", len(s)) + b"".join(struct.pack("<HH", x, y) for x, y in s)
        for s in strokes
    )
    tail = struct.pack("<H", len(lines))
    for stroke_ids, chars in lines:
        tail += struct.pack("<H", len(stroke_ids)) + struct.pack(
            f"<{len(stroke_ids)}H", *stroke_ids
        )
        tail += struct.pack("<H", len(chars))
        for char, ids in chars:
            tail += text_code(char, code_length)
            if segmented:
                tail += struct.pack("<H", len(ids)) + struct.pack(f"<{len(ids)}H", *ids)
    sample_length = len(body) + len(tail)
    return head + struct.pack("<III", sample_length, page_index, len(strokes)) + body + tail


# The committed fixtures (tests/fixtures/casia/) are exactly these bytes.

FIXTURE_POT = pot_record("A", [[(10, 20), (12, 24)], [(15, 20)]]) + pot_record(
    "中", [[(100, 200), (110, 205), (120, 210)], [(115, 190), (115, 230)]]
)

FIXTURE_STROKES = [
    [(0, 10), (5, 12)],  # 0: 日 part 1
    [(6, 10), (6, 20)],  # 1: 日 part 2
    [(20, 10), (30, 10), (25, 20)],  # 2: 本
    [(0, 60), (8, 60)],  # 3: line 2, "1"
    [(12, 60), (20, 62)],  # 4: line 2, "号"
]
FIXTURE_LINES = [
    ([0, 1, 2], [("日", [0, 1]), ("本", [2])]),
    ([3, 4], [("1", [3]), ("号", [4])]),
]
FIXTURE_PTTS = text_page(FIXTURE_STROKES, FIXTURE_LINES, segmented=True)
FIXTURE_WPTT = text_page(FIXTURE_STROKES, FIXTURE_LINES, segmented=False)
