"""Import one peer method's output: read its layout, pair with the ground truth, segment, write.

The result is a ``cashg-ink`` file that ``cashg evaluate`` scores like any other prediction.
Every item read is accounted for (``imported + unmatched == read``). Each sentence records
where its character segmentation comes from (attribute ``segmentation``):

- ``method``: the peer's own output carries it (SDT: one character per item; OLHWG: fixed
  rows per glyph; the authors' CASHG code: one array per character);
- ``inferred``: the output has none (DSD, DeepWriting), so a CTC forced alignment of the
  benchmark's recognizer to the known text assigns each point to a character
  (:mod:`cashg.baselines.segmentation`). The file's root attributes say so, ``cashg evaluate``
  copies that into ``metrics.json`` and the report marks the row: an inferred segmentation is
  never presented as the method's own. The same inference run on the matched ground-truth
  lines, whose true segmentation is known, gives the agreement figures recorded with it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import numpy as np

from cashg.baselines.matching import match_sentences
from cashg.baselines.samples import ImportedSample, Unmatched, to_ink
from cashg.core.ink import InkFile, InkSentence
from cashg.core.records import EOC, PU

__all__ = ["LAYOUTS", "ImportResult", "Segmenter", "drawn_line", "import_samples",
           "layout_module"]

# layout name (as `cashg import --from` takes it) -> module under cashg.baselines.layouts
LAYOUTS = {"sdt": "sdt", "dsd": "dsd", "deepwriting": "deepwriting", "olhwg": "olhwg",
           "cashg-official": "cashg_official"}
GLYPH_LAYOUTS = frozenset({"sdt"})  # one character per item: paired glyph by glyph

# (xy (N, 2), lift (N,), text) -> (N,) char_index into text
Segmenter = Callable[[np.ndarray, np.ndarray, str], np.ndarray]


def layout_module(name: str) -> ModuleType:
    """The reader module of a layout (``cashg_official`` and ``cashg-official`` both name
    the authors' code)."""
    key = name.replace("_", "-")
    if key not in LAYOUTS:
        raise ValueError(f"unknown layout {name!r} (known: {', '.join(LAYOUTS)})")
    return importlib.import_module(f"cashg.baselines.layouts.{LAYOUTS[key]}")


@dataclass
class ImportResult:
    """What one import produced; ``summary()`` is the stage's ``summary.json``."""

    layout: str
    read: int
    sentences: list[InkSentence]
    unmatched: list[Unmatched]
    segmentation: str  # method | inferred | mixed | none
    agreement: dict | None = None  # the inference on the matched ground truth
    not_generated: list[str] = field(default_factory=list)  # GT sentences nothing matched

    def summary(self) -> dict:
        reasons: dict[str, int] = {}
        for u in self.unmatched:
            key = u.reason.split(" of writer")[0].split(":")[0]
            reasons[key] = reasons.get(key, 0) + 1
        return {"layout": self.layout, "read": self.read, "imported": len(self.sentences),
                "unmatched": len(self.unmatched), "unmatched_reasons": reasons,
                "ground_truth_not_generated": len(self.not_generated),
                "segmentation": self.segmentation, "segmentation_agreement": self.agreement}


def drawn_line(sentence: InkSentence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ground-truth line as an importer sees a peer's output: (M, 2) xy of the drawn
    points (space pseudo-points dropped), (M,) lift flags, and their (M,) true char_index."""
    ink = np.array([not sentence.text[c].isspace() for c in sentence.char_index], bool)
    pen = sentence.pen[ink]
    return (np.asarray(sentence.xy[ink], np.float64), np.isin(pen, (PU, EOC)),
            sentence.char_index[ink].astype(np.int64))


def _segmentation_label(sources: Iterable[str]) -> str:
    kinds = set(sources)
    if not kinds:
        return "none"
    return kinds.pop() if len(kinds) == 1 else "mixed"


def import_samples(layout: str, samples: list[ImportedSample], gt: InkFile,
                   segmenter: Segmenter | None = None,
                   writer_map: Mapping[str, str] | None = None,
                   agreement: Callable[[list[tuple]], dict] | None = None,
                   segmentation_method: str = "") -> ImportResult:
    """Pair ``samples`` (read from a ``layout``) with ``gt`` and give each a segmentation.

    ``segmenter`` infers one where a sample has none; without it such a layout cannot be
    scored (``ValueError`` naming the layout). ``agreement`` (list of (true char_index,
    inferred char_index, text, lift) -> figures, e.g.
    :func:`cashg.baselines.segmentation.pooled_agreement`) scores the segmenter on the
    matched ground-truth lines, whose segmentation is known.
    """
    for sample in samples:
        sample.check()
    if layout.replace("_", "-") in GLYPH_LAYOUTS:
        from cashg.baselines.glyph_matching import match_glyphs

        sentences, unmatched = match_glyphs(samples, gt, writer_map)[:2]
        sentences = [_marked(s, "method", "") for s in sentences]
        got = {s.sentence_id for s in sentences}
        return ImportResult(layout, len(samples), sentences, unmatched,
                            _segmentation_label(["method"] * len(sentences)),
                            not_generated=[i for i in gt.ids() if i not in got])
    pairs, unmatched = match_sentences(samples, gt, writer_map)
    needs = [p for p in pairs if p.sample.char_index is None]
    if needs and segmenter is None:
        raise ValueError(f"the {layout} layout carries no character segmentation"
                         f" ({needs[0].sample.where()}): give a recognizer to infer one by"
                         " forced alignment (it is then marked as inferred)")
    sentences, checked, failed_on_truth = [], [], 0
    for pair in pairs:
        truth = gt[pair.sentence_id]
        sample = pair.sample
        if sample.char_index is not None:
            char_index, source = np.asarray(sample.char_index, np.int64), "method"
        else:
            assert segmenter is not None
            try:
                char_index, source = segmenter(sample.xy, sample.lift, truth.text), "inferred"
            except ValueError as exc:  # a line too short for its text, a foreign character
                unmatched.append(Unmatched(sample.where(), "no segmentation could be inferred"
                                           f" for ground-truth sentence {truth.sentence_id!r}:"
                                           f" {exc}"))
                continue
            xy, lift, true_ci = drawn_line(truth)
            try:
                checked.append((true_ci, segmenter(xy, lift, truth.text), truth.text, lift))
            except ValueError:
                failed_on_truth += 1
        sentences.append(to_ink(sample, truth.sentence_id, truth.writer_id, truth.text,
                                char_index, segmentation=source,
                                segmentation_method=segmentation_method if source ==
                                "inferred" else "the method's own output"))
    got = {s.sentence_id for s in sentences}
    figures = agreement(checked) if (checked and agreement is not None) else None
    if figures is not None:
        figures["ground_truth_lines"] = len(checked)
        figures["ground_truth_lines_failed"] = failed_on_truth
    return ImportResult(layout, len(samples), sentences, unmatched,
                        _segmentation_label(s.attrs["segmentation"] for s in sentences),
                        figures, [i for i in gt.ids() if i not in got])


def _marked(sentence: InkSentence, source: str, method: str) -> InkSentence:
    attrs = {**sentence.attrs, "segmentation": source,
             "segmentation_method": method or "the method's own output"}
    return InkSentence(sentence.sentence_id, sentence.writer_id, sentence.text,
                       sentence.points, sentence.char_index, attrs)


def read_layout(layout: str, path: Path) -> list[ImportedSample]:
    """Every item of ``path`` in ``layout`` (raises the layout's ``LayoutError``)."""
    return list(layout_module(layout).read(Path(path)))
