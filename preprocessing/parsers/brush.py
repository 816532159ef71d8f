"""BRUSH parser (Kotani et al., DSD): ``<root>/<writer_id>/<drawing_id>`` pickles -> records.

Each file is a pickle of ``[sentence, drawing, label]``: ``sentence`` a str of length M,
``drawing`` ``(N, 3)`` ``[x, y, eos]`` (absolute pixels, y down, ``eos = 1`` on the last point of
a stroke), ``label`` ``(N, M)`` one-hot: the character each point belongs to. The variants
``<id>_resample20`` / ``<id>_resample25`` (5x scaled, resampled, no timing) sit next to the
original; ``DatasetConfig.variant`` selects one (``original`` = files without a suffix).

Files are loaded with :mod:`cashg.core.safe_pickle` (pickles execute code otherwise).
Review reasons: ``known_bad`` (listed in ``DatasetConfig.known_bad`` as ``<writer>/<drawing>``,
which covers all variants of that drawing, or as an exact ``<writer>/<file name>``),
``unsafe_pickle``, ``corrupt_pickle``, ``unexpected_structure`` (types or shapes not as above),
``label_length_mismatch`` (M != len(sentence)), ``bad_label`` (label rows that are not one-hot
or all-zero), ``nan_points`` (non-finite coordinates), ``empty_transcription``, ``no_points``.
Points labelled with a space character are left unassigned (``fixed``: spaces own no ink);
all-zero label rows leave points unassigned (``warning``).
"""

from __future__ import annotations

import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cashg.core.config.data import DatasetConfig, ParseConfig
from cashg.core.records import InkRecord
from cashg.core.safe_pickle import UnsafePickleError, safe_load
from preprocessing.parsers.pool import run_ordered
from preprocessing.review import ReviewReport

DATASET = "brush"
VARIANT_SUFFIXES = {"resample20": "_resample20", "resample25": "_resample25"}


class BrushFormatError(ValueError):
    """A BRUSH file whose content is not ``[str, (N, 3) array, (N, M) array]``."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def variant_of(name: str) -> str:
    """``original``, ``resample20`` or ``resample25`` from a file name."""
    for variant, suffix in VARIANT_SUFFIXES.items():
        if name.endswith(suffix):
            return variant
    return "original"


def drawing_id_of(name: str) -> str:
    """The drawing id of a file name, variant suffix removed."""
    for suffix in VARIANT_SUFFIXES.values():
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _numeric_array(value: Any, name: str) -> np.ndarray:
    if not isinstance(value, np.ndarray) or value.ndim != 2:
        raise BrushFormatError("unexpected_structure",
                               f"{name}: expected a 2-D numpy array, got {_describe(value)}")
    if value.dtype.kind not in "biuf":
        raise BrushFormatError("unexpected_structure", f"{name}: dtype {value.dtype}")
    return value.astype(np.float64)


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"ndarray {value.shape} {value.dtype}"
    return type(value).__name__


def check_sample(obj: Any) -> tuple[str, np.ndarray, np.ndarray]:
    """Type-check one loaded pickle; returns ``(sentence, drawing (N, 3), label (N, M))``."""
    if not isinstance(obj, (list, tuple)) or len(obj) != 3:
        raise BrushFormatError("unexpected_structure",
                               f"expected [sentence, drawing, label], got {_describe(obj)}"
                               + (f" of length {len(obj)}" if isinstance(obj, (list, tuple))
                                  else ""))
    sentence, drawing, label = obj
    if isinstance(sentence, bytes):
        sentence = sentence.decode("latin-1")
    if not isinstance(sentence, str):
        raise BrushFormatError("unexpected_structure",
                               f"sentence: expected str, got {_describe(sentence)}")
    drawing = _numeric_array(drawing, "drawing")
    label = _numeric_array(label, "label")
    if drawing.shape[1] != 3:
        raise BrushFormatError("unexpected_structure", f"drawing shape {drawing.shape}, not (N, 3)")
    if label.shape[0] != drawing.shape[0]:
        raise BrushFormatError("unexpected_structure",
                               f"label has {label.shape[0]} rows, drawing {drawing.shape[0]}")
    if label.shape[1] != len(sentence):
        raise BrushFormatError("label_length_mismatch",
                               f"label has {label.shape[1]} columns, sentence {len(sentence)}"
                               f" characters ({sentence!r})")
    return sentence, drawing, label


@dataclass(frozen=True)
class BrushTask:
    root: str
    writer: str
    name: str  # file name (variant suffix included)
    known_bad: bool


def parse_file(task: BrushTask) -> tuple[InkRecord | None, ReviewReport]:
    """Parse one BRUSH file into a record (or None) with its review rows."""
    report = ReviewReport(stage="parse", dataset=DATASET)
    report.seen = 1
    rel = f"{task.writer}/{task.name}"
    drawing_id = drawing_id_of(task.name)
    sample_id = f"{task.writer}_{drawing_id}"
    if task.known_bad:
        report.reject(rel, sample_id, "known_bad", "listed in datasets.<key>.known_bad")
        return None, report
    try:
        sentence, drawing, label = check_sample(safe_load(Path(task.root) / rel))
    except UnsafePickleError as exc:
        report.reject(rel, sample_id, "unsafe_pickle", str(exc))
        return None, report
    except (pickle.UnpicklingError, OSError) as exc:
        report.reject(rel, sample_id, "corrupt_pickle", str(exc))
        return None, report
    except BrushFormatError as exc:
        report.reject(rel, sample_id, exc.reason, exc.detail)
        return None, report
    if not sentence.strip():
        report.reject(rel, sample_id, "empty_transcription", repr(sentence))
        return None, report
    if len(drawing) == 0:
        report.reject(rel, sample_id, "no_points", "empty drawing")
        return None, report
    if not np.isfinite(drawing).all() or not np.isfinite(label).all():
        report.reject(rel, sample_id, "nan_points", "non-finite values in drawing or label")
        return None, report
    eos = drawing[:, 2]
    if not np.isin(eos, (0.0, 1.0)).all():
        report.reject(rel, sample_id, "unexpected_structure", "eos column not 0/1")
        return None, report
    row_sum = label.sum(axis=1)  # (N,)
    one_hot = np.isin(label, (0.0, 1.0)).all(axis=1) & (row_sum <= 1)
    if not one_hot.all():
        report.reject(rel, sample_id, "bad_label",
                      f"{int((~one_hot).sum())} label rows are not one-hot")
        return None, report
    # stroke index: a new stroke starts after every eos = 1 point
    stroke_index = np.concatenate([[0], np.cumsum(eos[:-1] > 0)]).astype(np.int32)  # (N,)
    if eos[-1] != 1:
        report.fix(rel, sample_id, "missing_final_eos", "last point ends the last stroke")
    owner = np.where(row_sum > 0, label.argmax(axis=1), -1)  # (N,) char index or -1
    unlabelled = int((owner < 0).sum())
    if unlabelled:
        report.warn(rel, sample_id, "unlabelled_points", f"{unlabelled} points in no character")
    spaces = np.array([c.isspace() for c in sentence], dtype=bool)
    on_space = (owner >= 0) & spaces[np.maximum(owner, 0)]
    if on_space.any():
        report.fix(rel, sample_id, "space_with_ink",
                   f"{int(on_space.sum())} points labelled as a space left unassigned")
        owner = np.where(on_space, -1, owner)
    char_points = tuple(np.flatnonzero(owner == c).astype(np.int64) for c in range(len(sentence)))
    record = InkRecord(
        dataset=DATASET,
        writer_id=task.writer,
        sample_id=sample_id,
        text=sentence,
        points=np.ascontiguousarray(drawing[:, :2]),
        stroke_index=stroke_index,
        time=None,
        char_points=char_points,
        source=rel,
        meta={"drawing_id": drawing_id, "variant": variant_of(task.name)},
    )
    report.kept = 1
    return record, report


def _writer_key(name: str) -> tuple[int, int | str]:
    return (0, int(name)) if name.isdigit() else (1, name)


def list_files(root: Path, variant: str) -> list[tuple[str, str]]:
    """``[(writer, file name)]`` of the chosen variant, sorted (writers numerically)."""
    out = []
    writers = sorted((e.name for e in os.scandir(root) if e.is_dir()
                      and not e.name.startswith(".")), key=_writer_key)
    for writer in writers:
        names = sorted(e.name for e in os.scandir(root / writer)
                       if e.is_file() and not e.name.startswith("."))
        out.extend((writer, n) for n in names if variant_of(n) == variant)
    return out


def parse_dataset(
    cfg: DatasetConfig, report: ReviewReport, workers: int = 1,
    options: ParseConfig | None = None,
) -> list[InkRecord]:
    """Parse a BRUSH tree at ``cfg.root`` (variant ``cfg.variant``) into records."""
    del options  # BRUSH has no parse options beyond the dataset config
    root = Path(cfg.root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: BRUSH root not found")
    bad = {entry.strip().strip("/") for entry in cfg.known_bad}
    # an entry names a drawing (all its variants) or one exact file
    tasks = [BrushTask(str(root), w, n, f"{w}/{drawing_id_of(n)}" in bad or f"{w}/{n}" in bad)
             for w, n in list_files(root, cfg.variant)]
    records = []
    for record, part in run_ordered(parse_file, tasks, workers, f"parse {DATASET}"):
        if record is not None:
            records.append(record)
        report.extend(part)
    return records
