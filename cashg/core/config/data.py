"""Typed configs for the data-side sections of ``params.yaml`` (demo corpus, datasets, parsing)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from cashg.core.protocols import ProtocolName

DatasetFormat = Literal["iam_ondb", "brush", "casia_pot", "casia_ptts", "casia_wptt", "deepwriting"]


@dataclass(frozen=True)
class DemoConfig:
    """The embedded synthetic corpus, written in the real IAM-OnDB and BRUSH on-disk formats."""

    seed: int = 20261121
    writers_per_layout: int = 60
    sentences_per_writer: int = 40
    scale: float = 1.0  # multiplies sentences per writer; ~5 gives an IAM-OnDB-sized IAM tree
    glyph_lines_per_writer: int = 3  # BRUSH-style isolated-glyph lines ("aaa bbb ccc")
    defects: bool = True  # inject the documented defects (listed in DEFECTS.json per tree)
    min_chars: int = 20  # sentence length range, spaces included
    max_chars: int = 60
    brush_max_chars: int = 40  # BRUSH lines must fit the 748 px writing box
    lines_per_form_min: int = 6  # IAM-OnDB lines per whiteboard form
    lines_per_form_max: int = 10
    iam_point_spacing: float = 2.0  # IAM sampling: font units of arc per point (cap height 21)
    brush_point_spacing: float = 5.0  # BRUSH sampling: pixels of arc per point (sparser)
    brush_resample_variants: bool = False  # also write <id>_resample20 / <id>_resample25
    delayed_marks: bool = True  # i/j dots, t/f bars may be written after the word
    iam_split: tuple[float, ...] = (0.7, 0.1, 0.1, 0.1)  # writer fractions: train, v, t, f


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
    # DeepWriting: chunks of IAM-OnDB writers (subject ids in iam_subjects, inclusive) were
    # scaled with IAM-OnDB's own min/max, which the file does not store (docs/deepwriting.md).
    # Their span (x, y) in IAM-OnDB units: iam_span when given, else the min/max of every
    # point under iam_ondb_root/lineStrokes, else the documented estimate (7300, 9300).
    iam_subjects: tuple[int, int] = (10000, 99999)
    iam_span: tuple[float, float] | None = None
    iam_ondb_root: str = ""


@dataclass(frozen=True)
class ParseConfig:
    """Parsing stage options (raw files -> records; see preprocessing/parsers).

    ``min_points_per_stroke``: strokes with fewer (finite) points are dropped (a ``fixed`` row).
    ``percent_runs``: IAM-OnDB transcriptions containing a run of two or more ``%`` (annotation
    marks, not handwriting): ``reject`` the line or ``keep`` it as written.
    ``placeholder_texts``: extra transcriptions rejected as placeholders (reason
    ``placeholder_transcription``), besides texts without any letter or digit and the known
    IAM-OnDB placeholders (``preprocessing.parsers.iam_ondb.KNOWN_PLACEHOLDERS``, e.g.
    ``Please Enter Transcription here``), which are always rejected.
    ``bad_segmentation``: a line whose segmentation ground truth is invalid (out-of-range
    strokes/points, wrong length, other text) is kept ``unsegmented`` or ``reject``-ed.
    ``min_kept_share``: the stage fails (naming the leading drop reasons and their fix) when it
    keeps nothing or less than this share of what it saw (no silent empty output).
    """

    min_points_per_stroke: int = 1
    percent_runs: Literal["reject", "keep"] = "reject"
    placeholder_texts: tuple[str, ...] = ()
    bad_segmentation: Literal["unsegmented", "reject"] = "unsegmented"
    min_kept_share: float = 0.1


PREPROCESSING_SECTIONS: dict[str, type | object] = {
    "demo": DemoConfig,
    "datasets": Mapping[str, DatasetConfig],
    "parse": ParseConfig,
}


def _frozen_map(**kw: object) -> Mapping:
    from types import MappingProxyType

    return MappingProxyType(dict(kw))


@dataclass(frozen=True)
class DeskewConfig:
    """Sentence deskew (paper app. B.1): applied to datasets whose format is in ``formats``
    (IAM and CASIA 2.x text lines, not BRUSH), unless ``datasets`` (dataset key -> bool)
    overrides it; skipped when the estimated angle is below ``min_deg`` or above ``max_deg``,
    and (guards for short ink such as DeepWriting chunks, cashg/core/geometry/deskew.py)
    when the ink along the fitted line is shorter than ``min_length`` times its extent across
    it, or when the left-half-to-right-half centroid direction disagrees with the fitted angle
    by more than ``max_disagreement_deg``. Skips are counted by reason in ``summary.json``."""

    formats: tuple[str, ...] = ("iam_ondb", "casia_ptts", "casia_wptt")
    datasets: Mapping[str, bool] = field(default_factory=_frozen_map)
    min_deg: float = 2.0
    max_deg: float = 45.0
    min_length: float = 4.0
    max_disagreement_deg: float = 5.0


@dataclass(frozen=True)
class RdpConfig:
    """Weak RDP (paper app. B.2): only characters with more than ``min_points`` points;
    ``epsilon`` in sentence heights; if more than ``max_removed_fraction`` of a character's
    points would go, epsilon is halved up to ``max_halvings`` times, else RDP is skipped."""

    enabled: bool = True
    epsilon: float = 0.006
    min_points: int = 10
    max_halvings: int = 5
    max_removed_fraction: float = 0.5


@dataclass(frozen=True)
class SegmentationReviewConfig:
    """Segmentation review (app. B.1, B.4). ``strict_languages`` get the OLHWG validation
    (duration sum, every boundary within ``boundary_tolerance`` points of a stroke end)."""

    strict_languages: tuple[str, ...] = ("zh",)
    boundary_tolerance: int = 3
    max_unowned_fraction: float = 0.2


# Per-language point-density policy (preprocess.point_density; PreprocessConfig)
PointDensity = Literal["resample", "cap"]


@dataclass(frozen=True)
class PreprocessConfig:
    """Preprocessing (paper appendix B; owned by ``preprocessing/preprocess.py``).

    ``point_density``: per language, how point density is controlled (paper app. B.2, B.4):
    ``resample`` (English, app. B.2 "Resampling and RDP Settings") resamples every piece at
    ``resample_spacing`` (arc-length step in sentence heights; density harmonisation across
    datasets), widening the step for a character that would exceed ``max_points_per_char``
    (at most that many points), then applies weak RDP (``rdp``); ``cap`` (Chinese, app. B.4
    "Chinese Protocol Details") keeps the recorded points, no spacing resampling and no RDP,
    and resamples only a character recorded with more than ``max_points_per_char`` points, to
    exactly that many (as the authors' ``olhwd_cn_sent_dataset_generator.py`` does).
    ``resample: false`` turns off all resampling (the spacing and both caps) for every dataset.
    ``max_points_per_char``: per language, the point cap (100 English, 160 Chinese, app. B.4).
    ``min_kept_share``: the stage fails (naming the leading drop reasons and their fix, e.g.
    ``unsegmented`` -> set ``datasets.<key>.segmentation``) when it keeps nothing or less than
    this share of the parsed records.
    """

    deskew: DeskewConfig = DeskewConfig()
    resample: bool = True
    resample_spacing: float = 0.04
    max_points_per_char: Mapping[str, int] = field(
        default_factory=lambda: _frozen_map(en=100, zh=160))
    point_density: Mapping[str, PointDensity] = field(
        default_factory=lambda: _frozen_map(en="resample", zh="cap"))
    rdp: RdpConfig = RdpConfig()
    review: SegmentationReviewConfig = SegmentationReviewConfig()
    space_points: bool = True  # spaces as pseudo-trajectory segments (paper Sec. 3.4)
    min_kept_share: float = 0.1


@dataclass(frozen=True)
class SourceSplitConfig:
    """How one source dataset of a benchmark is split into train/validation/test.

    ``writer_range``: integer writer ids, inclusive ranges ``[first, last]`` (DSD protocol on
    BRUSH: 0-149 train / 150-169 test; OLHWG protocol on CASIA-OLHWDB 2.x: 0-1019 / 1020-1218).
    ``iam_lists``: the official IAM-OnDB form lists in the dataset root (``datasets.<key>.root``),
    one form id per line (leading space): ``trainset.txt`` train, ``testset_v.txt`` validation,
    ``testset_t.txt`` + ``testset_f.txt`` test.
    ``source_files``: by the raw file each sample came from (its path relative to the dataset
    root, matched with shell patterns): ``train_files`` / ``validation_files`` / ``test_files``
    (DeepWriting: ``deepwriting_training.npz`` train, ``deepwriting_validation.npz`` test; a
    source whose patterns are all ``["*"]`` for one split goes there whole, e.g. the ICDAR 2013
    competition set as the SDT test writers).

    A writer found in two splits is an error (``on_writer_overlap: error``), or its
    validation/test sentences are dropped (``drop_from_eval``, reported), or, for a benchmark
    whose published split shares writers (DeepWriting's random chunk split), kept and reported
    (``allow``).
    """

    rule: Literal["writer_range", "iam_lists", "source_files"] = "writer_range"
    train_writers: tuple[int, int] = (0, 149)
    test_writers: tuple[int, int] = (150, 169)
    validation_writers: tuple[int, int] | None = None
    train_lists: tuple[str, ...] = ("trainset.txt",)
    validation_lists: tuple[str, ...] = ("testset_v.txt",)
    test_lists: tuple[str, ...] = ("testset_t.txt", "testset_f.txt")
    train_files: tuple[str, ...] = ()
    validation_files: tuple[str, ...] = ()
    test_files: tuple[str, ...] = ()
    on_writer_overlap: Literal["error", "drop_from_eval", "allow"] = "error"

    def defines_split(self, split: str) -> bool:
        """Whether this rule can put sentences into ``split`` (``train``, ``validation`` or
        ``test``): a ``writer_range`` rule has train and test ranges always and a validation
        range only with ``validation_writers``; the other rules need a non-empty
        ``<split>_lists`` / ``<split>_files``. Whether it does depends on the data (the subsets
        stage leaves an empty validation split out)."""
        if self.rule == "writer_range":
            return split != "validation" or self.validation_writers is not None
        if self.rule == "iam_lists":
            return bool(getattr(self, f"{split}_lists"))
        return bool(getattr(self, f"{split}_files"))


SubsetKind = Literal["char", "bigram", "sentence", "style"]


@dataclass(frozen=True)
class BenchmarkConfig:
    """One benchmark: its protocol, its source datasets (key -> split rule), its subsets.

    ``primary`` / ``secondary`` name the one or two source datasets (keys under ``datasets``)
    as scalars, because ``dvc.yaml`` builds each benchmark's inputs from them
    (``results/preprocess/<primary>/sentences.h5``; DVC cannot iterate a mapping's keys inside
    a stage). A single-source benchmark repeats its source (``secondary == primary``).
    ``sources`` must name exactly these datasets (checked by
    :func:`cashg.core.benchmarks.check_benchmarks`).

    Paper protocols (the defaults of :data:`PAPER_BENCHMARKS`): ``dsd`` = BRUSH writers 0-149
    train / 150-169 test; ``deepwriting`` = DeepWriting's training / validation npz files;
    ``olhwg`` = CASIA 2.x writers 0-1019 / 1020-1218 with char, sentence and style subsets
    (paper appendix B.4); ``sdt_glyph`` = CASIA 1.0-1.2 train, ICDAR 2013 competition test;
    ``merged`` = IAM (lists) + BRUSH (writer ranges), each side split by its own rule.
    """

    sources: Mapping[str, SourceSplitConfig]
    subsets: tuple[SubsetKind, ...] = ("char", "bigram", "sentence", "style")
    protocol: ProtocolName = "none"
    primary: str = ""
    secondary: str = ""


@dataclass(frozen=True)
class CharSubsetConfig:
    """Representative glyphs: per writer and character the best ``glyphs_per_char`` samples."""

    glyphs_per_char: int = 1
    min_points: int = 1  # glyphs with fewer points are ineligible (reported)


@dataclass(frozen=True)
class BigramSubsetConfig:
    """Predecessor-current windows X_s (paper Eq. 2); spaces are characters (Sec. 3.4)."""

    include_spaces: bool = True  # windows whose predecessor or current character is a space


@dataclass(frozen=True)
class SentenceSubsetConfig:
    """Sentence sliding windows: at most ``max_chars`` characters and ``max_points`` points,
    starting at word starts, next start at most ``stride_chars`` after the previous one."""

    max_chars: int = 40
    max_points: int = 1500
    stride_chars: int = 20


@dataclass(frozen=True)
class StyleConfig:
    """Style references: per writer ``per_writer`` rendered glyph images, ``image_size`` square.

    ``scale: glyph`` fits each glyph's bounding box (aspect kept); ``sentence`` draws at a fixed
    scale (1.0 sentence-height unit = the inner box) so glyph sizes stay comparable.
    ``glyphs: letters`` draws the references from a writer's letters only (no punctuation
    mark, digit or other sign: a '-' or '.' says little of a hand; a writer with fewer
    letters than ``per_writer`` gets its other glyphs too); ``all`` from every glyph.
    """

    image_size: int = 64
    per_writer: int = 16
    margin: int = 4  # pixels left free on each side
    line_width: float = 2.0  # pixels; anti-aliased
    scale: Literal["glyph", "sentence"] = "glyph"
    glyphs: Literal["all", "letters"] = "all"
    seed: int = 0


def _paper_benchmarks() -> Mapping[str, BenchmarkConfig]:
    from types import MappingProxyType as M

    iam = SourceSplitConfig(rule="iam_lists")
    brush = SourceSplitConfig(rule="writer_range", train_writers=(0, 149), test_writers=(150, 169))
    casia2 = SourceSplitConfig(rule="writer_range", train_writers=(0, 1019),
                               test_writers=(1020, 1218))
    deepwriting = SourceSplitConfig(rule="source_files",
                                    train_files=("deepwriting_training.npz",),
                                    test_files=("deepwriting_validation.npz",),
                                    on_writer_overlap="allow")
    return M({
        "dsd": BenchmarkConfig(M({"brush": brush}), protocol="dsd", primary="brush",
                               secondary="brush"),
        "deepwriting": BenchmarkConfig(M({"deepwriting": deepwriting}), protocol="deepwriting",
                                       primary="deepwriting", secondary="deepwriting"),
        "olhwg": BenchmarkConfig(M({"casia2": casia2}), subsets=("char", "sentence", "style"),
                                 protocol="olhwg", primary="casia2", secondary="casia2"),
        "sdt_glyph": BenchmarkConfig(
            M({"casia1": SourceSplitConfig(rule="source_files", train_files=("*",)),
               "icdar2013": SourceSplitConfig(rule="source_files", test_files=("*",))}),
            subsets=("char", "style"), protocol="sdt_glyph", primary="casia1",
            secondary="icdar2013"),
        "merged": BenchmarkConfig(M({"iam": iam, "brush": brush}), protocol="merged",
                                  primary="iam", secondary="brush"),
    })


PAPER_BENCHMARKS = _paper_benchmarks()


@dataclass(frozen=True)
class SubsetsConfig:
    """HDF5 training subsets per benchmark split (owned by ``preprocessing/subsets``).

    ``benchmarks`` defaults to the paper's protocols (:data:`PAPER_BENCHMARKS`); the demo
    params use smaller writer ranges that fit the ~60 writers per layout of the demo corpus.
    """

    benchmarks: Mapping[str, BenchmarkConfig] = field(default_factory=_paper_benchmarks)
    char: CharSubsetConfig = CharSubsetConfig()
    bigram: BigramSubsetConfig = BigramSubsetConfig()
    sentence: SentenceSubsetConfig = SentenceSubsetConfig()
    style: StyleConfig = StyleConfig()
    compression: Literal["gzip", "lzf"] = "gzip"


PREPROCESSING_SECTIONS.update({"preprocess": PreprocessConfig, "subsets": SubsetsConfig})
