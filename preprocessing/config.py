"""Typed configs for the data-side sections of ``params.yaml`` (demo corpus, datasets, parsing)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

DatasetFormat = Literal["iam_ondb", "brush", "casia_pot", "casia_ptts", "casia_wptt", "deepwriting"]


@dataclass(frozen=True)
class DemoConfig:
    """The embedded synthetic corpus, written in the real IAM-OnDB and BRUSH on-disk formats."""

    seed: int = 20261121
    writers_per_layout: int = 60
    sentences_per_writer: int = 40
    scale: float = 1.0  # multiplies sentences per writer; ~5 gives an IAM-OnDB-sized IAM tree
    glyph_lines_per_writer: int = 3  # BRUSH-style isolated-glyph lines ("aaa bbb ccc")


@dataclass(frozen=True)
class DatasetConfig:
    """One raw data source: its on-disk format, root folder and format options."""

    format: DatasetFormat
    root: str
    language: Literal["en", "zh"] = "en"
    # IAM-OnDB: the Character-Queries segmentation JSON, relative to root ("" = none)
    segmentation: str = ""
    # BRUSH: which drawing variant to read and which files to skip
    variant: Literal["original", "resample20", "resample25"] = "original"
    known_bad: tuple[str, ...] = ()


@dataclass(frozen=True)
class ParseConfig:
    """Parsing stage options."""

    workers: int = 2  # process pool size; 1 parses in-process
    min_points_per_stroke: int = 1


PREPROCESSING_SECTIONS: dict[str, type | object] = {
    "demo": DemoConfig,
    "datasets": Mapping[str, DatasetConfig],
    "parse": ParseConfig,
}


@dataclass(frozen=True)
class PreprocessConfig:
    """Preprocessing (paper appendix B). Owned by preprocessing/preprocess.py; fields TBD."""


@dataclass(frozen=True)
class SubsetsConfig:
    """HDF5 training subsets and benchmark splits. Owned by preprocessing/subsets; fields TBD."""


PREPROCESSING_SECTIONS.update({"preprocess": PreprocessConfig, "subsets": SubsetsConfig})
