"""What a peer method's output holds once read: one :class:`ImportedSample` per generated item.

Every layout reader (:mod:`cashg.baselines.layouts`) turns the peer's own file layout into
these, in the project's conventions and nothing more: absolute coordinates, **y downwards**,
the peer's own units (evaluation normalises each line by its height, paper Sec. 4.1), and a
per-point pen-lift flag. What the peer's output does not carry stays ``None`` (its writer, its
text, its sentence id, its character segmentation): matching to the ground truth
(:mod:`cashg.baselines.matching`) and segmentation inference
(:mod:`cashg.baselines.segmentation`) fill those in, and say so.

Pen states (:mod:`cashg.core.records`) follow from the lift flags and a segmentation
(:func:`pen_states`): a character's last point is ``EOC`` when the pen lifts after it and
``CURSIVE_EOC`` when it stays down into the next character; any other stroke end is ``PU``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from cashg.core.ink import InkSentence, make_sentence
from cashg.core.records import CURSIVE_EOC, EOC, PM, PU

__all__ = ["ImportedSample", "LayoutError", "Unmatched", "pen_states", "to_ink"]


class LayoutError(ValueError):
    """A file (or an item in it) that does not follow the layout its reader expects."""

    def __init__(self, path: str | Path, problem: str, item: str | None = None):
        self.path, self.item, self.problem = Path(path), item, problem
        where = f"{path}" if item is None else f"{path}: {item}"
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True, eq=False)
class ImportedSample:
    """One generated item of a peer's output, converted to the project's conventions.

    ``xy`` (N, 2) float64 absolute, y down; ``lift`` (N,) bool, the pen leaves the paper after
    the point (True on every stroke's last point, and on the last point). ``char_index`` (N,)
    int into ``text``: the method's own segmentation when its output carries one, else None.
    ``reference_xy`` / ``reference_lift``: the real sample the peer stored next to its output
    (SDT's ``coords_gt``), used to pair the two; None elsewhere.
    """

    path: Path  # the file it came from
    item: str  # where in that file (key, array name, index): named in every message
    xy: np.ndarray
    lift: np.ndarray
    text: str | None = None
    writer_id: str | None = None
    sentence_id: str | None = None
    char_index: np.ndarray | None = None
    reference_xy: np.ndarray | None = None
    reference_lift: np.ndarray | None = None

    def where(self) -> str:
        return f"{self.path}: {self.item}"

    def check(self) -> None:
        """Raise :class:`LayoutError` for an empty or non-finite trajectory, or a segmentation
        that does not fit the text."""
        xy, lift = np.asarray(self.xy), np.asarray(self.lift)
        if xy.ndim != 2 or xy.shape[1] != 2 or len(xy) == 0:
            raise LayoutError(self.path, f"empty trajectory or bad shape {xy.shape}", self.item)
        if lift.shape != (len(xy),):
            raise LayoutError(self.path, f"{lift.shape} lift flags for {len(xy)} points",
                              self.item)
        if not np.isfinite(xy).all():
            raise LayoutError(self.path, "trajectory holds NaN or inf", self.item)
        if self.char_index is not None:
            ci = np.asarray(self.char_index)
            n = len(self.text or "")
            if ci.shape != (len(xy),) or (len(ci) and (ci.min() < 0 or ci.max() >= n)):
                raise LayoutError(self.path, f"segmentation does not fit the text {self.text!r}"
                                  f" ({ci.shape} indices for {len(xy)} points)", self.item)

    def with_(self, **changes: object) -> ImportedSample:
        return replace(self, **changes)


@dataclass(frozen=True)
class Unmatched:
    """An item that was read but not imported, and why (``unmatched.csv``)."""

    item: str  # ImportedSample.where()
    reason: str


def pen_states(lift: np.ndarray, char_index: np.ndarray | None) -> np.ndarray:
    """(N,) cashg pen states from (N,) lift flags and an optional (N,) segmentation.

    Without a segmentation only strokes are known: ``PU`` at every lift, ``PM`` elsewhere.
    With one, a point whose successor belongs to another character (or the last point) ends
    its character: ``EOC`` when the pen lifts there, ``CURSIVE_EOC`` when it does not.
    """
    lift = np.asarray(lift, bool).copy()
    if len(lift):
        lift[-1] = True
    pen = np.where(lift, PU, PM).astype(np.int64)
    if char_index is None:
        return pen
    ci = np.asarray(char_index)
    ends = np.r_[ci[1:] != ci[:-1], True] if len(ci) else np.zeros(0, bool)
    pen[ends & lift] = EOC
    pen[ends & ~lift] = CURSIVE_EOC
    return pen


def to_ink(sample: ImportedSample, sentence_id: str, writer_id: str, text: str,
           char_index: np.ndarray, **attrs: object) -> InkSentence:
    """The sample as a cashg-ink sentence of the ground truth's id, writer and text."""
    xy = np.asarray(sample.xy, np.float64)
    pen = pen_states(sample.lift, char_index)
    return make_sentence(sentence_id, writer_id, text, xy, pen, char_index,
                         source_item=sample.where(), **attrs)
