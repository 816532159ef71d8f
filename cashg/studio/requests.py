"""A write request, checked: the parsed JSON body becomes a :class:`WriteRequest` or a
:class:`BadRequest` naming what is wrong (the app answers it as 4xx JSON).

Body: ``{"text": str, "writer": str}`` or ``{"text": str, "drawing": {"height": px,
"glyphs": [{"char": str, "strokes": [[[x, y], ...], ...]}, ...]}}``, plus optional
``"neatness"`` (0 loose .. 1 neat; absent: the run's tuned decoding), ``"seed"`` (int) and
``"check"`` (bool: check each letter with the run's glyph reader; absent: the studio's
default).
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from cashg.studio.limits import Limits
from cashg.studio.references import DrawnGlyph

KEYS = {"text", "writer", "drawing", "neatness", "seed", "check"}
MAX_SEED = 2**31 - 1


class BadRequest(ValueError):
    """Input the studio refuses: ``status`` (4xx) and a message for the user."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class WriteRequest:
    """A checked request: the text, and either a known ``writer`` or drawn ``glyphs``."""

    text: str
    writer: str | None
    glyphs: list[DrawnGlyph] | None
    neatness: float | None
    seed: int
    check: bool | None = None  # None: the studio's default


def parse_json(body: bytes) -> object:
    """The JSON value of a body; malformed JSON or text is a :class:`BadRequest`."""
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadRequest(f"the body is not valid JSON ({exc})") from exc


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value)


def check_text(text: object, limits: Limits, inventory: Collection[str] | None) -> str:
    """The text to write, or a :class:`BadRequest`: empty, too long, or with characters the
    model never saw in training (named)."""
    if not isinstance(text, str) or not text.strip():
        raise BadRequest("type a text to write (it is empty)")
    if len(text) > limits.max_text_chars:
        raise BadRequest(f"the text has {len(text)} characters; at most "
                         f"{limits.max_text_chars} are written at once")
    if inventory is not None:
        unknown = sorted(set(text) - set(inventory))
        if unknown:
            shown = " ".join(repr(c) for c in unknown)
            raise BadRequest(f"the model cannot write {shown}: these characters are not in its "
                             f"alphabet (it knows: {''.join(sorted(inventory))})", 422)
    return text


def check_drawing(drawing: object, limits: Limits) -> list[DrawnGlyph]:
    """The drawn glyphs (non-empty boxes only), or a :class:`BadRequest`."""
    if not isinstance(drawing, dict):
        raise BadRequest("'drawing' must be an object {height, glyphs}")
    height, boxes = drawing.get("height"), drawing.get("glyphs")
    if not _finite(height) or height <= 0:
        raise BadRequest("'drawing.height' must be a positive number (the box height in px)")
    if not isinstance(boxes, list):
        raise BadRequest("'drawing.glyphs' must be a list of boxes")
    if len(boxes) > limits.max_boxes:
        raise BadRequest(f"{len(boxes)} drawn boxes; at most {limits.max_boxes}")
    glyphs, total = [], 0
    for i, box in enumerate(boxes):
        strokes = box.get("strokes") if isinstance(box, dict) else None
        if not isinstance(strokes, list):
            raise BadRequest(f"drawn box {i + 1}: 'strokes' must be a list of point lists")
        arrays = []
        for stroke in strokes:
            if not isinstance(stroke, list):
                raise BadRequest(f"drawn box {i + 1}: a stroke must be a list of [x, y] points")
            total += len(stroke)
            if total > limits.max_points:
                raise BadRequest(f"the drawing has more than {limits.max_points} points; "
                                 f"draw fewer or smaller glyphs", 413)
            if not all(isinstance(p, list) and len(p) == 2 and _finite(p[0]) and _finite(p[1])
                       for p in stroke):
                raise BadRequest(f"drawn box {i + 1}: points must be [x, y] finite numbers")
            if stroke:
                arrays.append(np.asarray(stroke, np.float64))
        if arrays:
            char = box.get("char", "")
            glyphs.append(DrawnGlyph(arrays, float(height), char if isinstance(char, str) else ""))
    if not glyphs:
        raise BadRequest("the drawing is empty: draw a few letters in the boxes, or pick a "
                         "writer")
    return glyphs


def check_write(payload: object, limits: Limits, inventory: Collection[str] | None,
                writers: Collection[str]) -> WriteRequest:
    """A :class:`WriteRequest` from a parsed body, or a :class:`BadRequest` (module docstring)."""
    if not isinstance(payload, dict):
        raise BadRequest("the body must be a JSON object")
    unknown = sorted(set(payload) - KEYS)
    if unknown:
        raise BadRequest(f"unknown field(s) {', '.join(unknown)} (known: "
                         f"{', '.join(sorted(KEYS))})")
    text = check_text(payload.get("text"), limits, inventory)
    writer, drawing = payload.get("writer"), payload.get("drawing")
    if (writer is None) == (drawing is None):
        raise BadRequest("give either 'writer' (a writer of the run) or 'drawing' (your own "
                         "glyphs), not both or neither")
    glyphs = None
    if writer is not None:
        if not isinstance(writer, str) or writer not in writers:
            raise BadRequest(f"unknown writer {writer!r} (GET /api/info lists the run's "
                             f"writers)", 404)
    else:
        glyphs = check_drawing(drawing, limits)
    neatness = payload.get("neatness")
    if neatness is not None and (not _finite(neatness) or not 0 <= neatness <= 1):
        raise BadRequest("'neatness' must be a number from 0 (loose) to 1 (neat)")
    seed = payload.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise BadRequest(f"'seed' must be an integer from 0 to {MAX_SEED}")
    check = payload.get("check")
    if check is not None and not isinstance(check, bool):
        raise BadRequest("'check' must be true or false")
    return WriteRequest(text, writer, glyphs, None if neatness is None else float(neatness),
                        seed, check)
