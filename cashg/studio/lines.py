"""Finished lines kept for download, and their files in the four formats of ``cashg
generate`` (written by :func:`cashg.generation.outputs.write_output`, the one writer)."""

from __future__ import annotations

import secrets
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from cashg.core.ink import InkSentence

FORMATS = {"png": "image/png", "svg": "image/svg+xml", "inkml": "application/inkml+xml",
           "h5": "application/x-hdf5"}
_RENDER = threading.Lock()  # matplotlib's pyplot (the PNG renderer) is not thread-safe


class LineStore:
    """The ``capacity`` most recent finished lines by id (the oldest dropped first)."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._lines: OrderedDict[str, InkSentence] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, sentence: InkSentence) -> str:
        """Keep a line; its new id (random, URL-safe)."""
        line_id = secrets.token_urlsafe(9)
        with self._lock:
            self._lines[line_id] = sentence
            while len(self._lines) > self.capacity:
                self._lines.popitem(last=False)
        return line_id

    def get(self, line_id: str) -> InkSentence | None:
        with self._lock:
            return self._lines.get(line_id)


def export(sentence: InkSentence, fmt: str) -> bytes:
    """The bytes of a line as ``fmt`` (a key of :data:`FORMATS`)."""
    from cashg.generation.outputs import write_output

    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (use one of {', '.join(FORMATS)})")
    with tempfile.TemporaryDirectory(prefix="cashg-studio-") as tmp:
        out = Path(tmp) / f"line.{fmt}"
        with _RENDER:
            write_output([sentence], out)
        return out.read_bytes()
