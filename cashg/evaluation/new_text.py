"""New text: lines the model never trained on, written in test writers' styles and read back.

Generated test lines (``evaluate@``) repeat sentences of the benchmark's own corpus: on the
demo, words and names the model has written thousands of times in training. The ``new_text@``
stage asks for text of the project's own (``new_text.sentences``, e.g.
``resources/new_text/en.txt``) that appears nowhere in the training lines, in the styles of
writers of the benchmark's test split, and lets the benchmark's recognizer read it: CER / WER
and the error share by character class (``ERR_<class>``, the generated side of
:data:`cashg.evaluation.protocols.CLASS_ERROR_KEYS`) of text outside the corpus.

The functions here are pure (no model, no files but the ones named); the stage
(:mod:`cashg.evaluation.new_text_stage`) chains them:

1. :func:`read_sentences` reads the sentences file;
2. :func:`training_lines` rebuilds the training lines from the train split's sentence windows;
3. :func:`usable_sentences` keeps the sentences that occur in no training line and use only
   characters the model trained on (the checkpoint's ``char_inventory``) and the recognizer
   can write, and names each one it leaves out with the reason (:func:`check_kept_out` and
   :func:`check_characters` raise instead, for callers that must not skip);
4. :func:`pick_writers` and :func:`deal_prompts` decide who writes what, deterministically;
5. after generation and transcription, :func:`score_lines` gives the metrics and the rows of
   ``lines.csv``, and :func:`write_new_text_outputs` writes the folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cashg.core.ink import InkSentence, write_ink
from cashg.evaluation.protocols import CLASS_ERROR_KEYS
from cashg.generation.split import Prompt
from cashg.metrics.placement import PlacementSummary, line_placement, summarize_sets
from cashg.recognition.scoring import CHAR_CLASSES, char_class_errors, error_counts

__all__ = [
    "NewTextError",
    "check_characters",
    "check_kept_out",
    "deal_prompts",
    "found_in_training",
    "pick_writers",
    "read_sentences",
    "score_lines",
    "score_placement",
    "training_lines",
    "usable_sentences",
    "write_new_text_outputs",
]

COMMENT = "#"


class NewTextError(ValueError):
    """Sentences that cannot be used as new text (the message names file, sentence or
    character)."""


def read_sentences(path: str | Path) -> tuple[str, ...]:
    """The sentences of a new-text file: UTF-8, one a line, surrounding whitespace stripped;
    blank lines and lines starting with ``#`` skipped. An empty list or a sentence listed
    twice is an error naming the file (and the line)."""
    path = Path(path)
    if not path.is_file():
        raise NewTextError(f"{path}: sentences file not found")
    seen: dict[str, int] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(COMMENT):
            continue
        if line in seen:
            raise NewTextError(f"{path}:{number}: {line!r} is listed twice (first on line"
                               f" {seen[line]})")
        seen[line] = number
    if not seen:
        raise NewTextError(f"{path}: no sentences (one a line; '#' starts a comment)")
    return tuple(seen)


def training_lines(windows: Iterable[tuple[str, int, str]]) -> dict[str, str]:
    """``{sentence id: text}`` of the whole training lines, rebuilt from sentence windows
    ``(sentence_id, char_offset, text)`` (:meth:`cashg.core.subsets.readers.SentenceReader.texts`):
    each window's text placed at its offset; a position no window covers (a space between
    two windows) reads as a space."""
    chars: dict[str, dict[int, str]] = {}
    for sid, offset, text in windows:
        line = chars.setdefault(sid, {})
        for k, ch in enumerate(text):
            line[offset + k] = ch
    return {sid: "".join(line.get(i, " ") for i in range(max(line) + 1))
            for sid, line in chars.items() if line}


def _squeeze(text: str) -> str:
    return " ".join(text.split())


def found_in_training(sentences: Sequence[str], lines: Mapping[str, str]) -> dict[str, str]:
    """``{sentence: id of a training line that contains it}`` for each sentence that occurs in
    a training line (exact, case-sensitive substring; runs of whitespace count as one space)."""
    squeezed = {sid: _squeeze(text) for sid, text in sorted(lines.items())}
    found = {}
    for sentence in sentences:
        needle = _squeeze(sentence)
        hit = next((sid for sid, text in squeezed.items() if needle in text), None)
        if hit is not None:
            found[sentence] = hit
    return found


def check_kept_out(sentences: Sequence[str], lines: Mapping[str, str], where: str) -> None:
    """Fail if a sentence occurs in the training ``lines`` (``where``: what they are), naming
    each such sentence and a line that holds it: new text must be new to the model."""
    found = found_in_training(sentences, lines)
    if found:
        listed = "; ".join(f"{s!r} (in training line {sid})" for s, sid in found.items())
        raise NewTextError(f"{len(found)} sentence(s) occur in the training lines of {where}:"
                           f" {listed}. New text must appear nowhere in the training data:"
                           " edit the sentences file")


def check_characters(sentences: Sequence[str], inventory: Iterable[str], whose: str) -> None:
    """Fail if the sentences hold characters outside ``inventory``, naming each character and
    the sentences that use it (``whose``: e.g. "the characters checkpoint X trained on")."""
    known = set(inventory)
    missing = sorted({ch for s in sentences for ch in s} - known)
    if missing:
        uses = "; ".join(f"{ch!r} in " + ", ".join(repr(s) for s in sentences if ch in s)
                         for ch in missing)
        raise NewTextError(f"character(s) {''.join(missing)!r} are not among {whose}: {uses}."
                           " Use only characters the model and the recognizer know")


def usable_sentences(sentences: Sequence[str], lines: Mapping[str, str],
                     inventories: Sequence[tuple[Iterable[str], str]]
                     ) -> tuple[tuple[str, ...], dict[str, str]]:
    """``(kept, skipped)``: the sentences new text can write, and each one it cannot with the
    reason: it occurs in a training line (:func:`found_in_training`, naming the line), or it
    holds a character outside one of ``inventories`` (``(characters, whose)``: the model's
    training characters, the recognizer's alphabet), naming the characters. A real dataset
    need not hold every character of the project's sentences (DeepWriting has no 'Q' in some
    splits): the stage writes what it can and says what it left out, instead of failing."""
    found = found_in_training(sentences, lines)
    skipped: dict[str, str] = {}
    for sentence in sentences:
        if sentence in found:
            skipped[sentence] = f"occurs in training line {found[sentence]}"
            continue
        for known, whose in inventories:
            missing = sorted(set(sentence) - set(known))
            if missing:
                skipped[sentence] = f"character(s) {''.join(missing)!r} not among {whose}"
                break
    return tuple(s for s in sentences if s not in skipped), skipped


def pick_writers(writers: Sequence[str], n: int) -> list[str]:
    """``n`` writers evenly spaced over the sorted ``writers`` (all of them when there are
    ``n`` or fewer): deterministic, and spread over the split rather than its first ids."""
    ordered = sorted(writers)
    if len(ordered) <= n:
        return ordered
    return [ordered[int(i)] for i in np.linspace(0, len(ordered) - 1, n).round()]


def deal_prompts(sentences: Sequence[str], writers: Sequence[str],
                 per_writer: int) -> list[Prompt]:
    """``per_writer`` prompts per writer, writer by writer, the sentences dealt in file order
    (cyclically when there are more lines than sentences): line ``j`` is sentence
    ``j % len(sentences)`` by writer ``j // per_writer``. Ids ``<writer>-new<sentence>``,
    e.g. ``brush:52-new03``."""
    prompts = []
    for j in range(len(writers) * per_writer):
        k = j % len(sentences)
        writer = writers[j // per_writer]
        prompts.append(Prompt(f"{writer}-new{k:02d}", writer, sentences[k]))
    return prompts


def score_lines(refs: Sequence[str], hyps: Sequence[str]) -> tuple[dict[str, Any], list[dict]]:
    """``(metrics, per-line rows)`` of recognizer readings ``hyps`` of lines asked to write
    ``refs``. Metrics: ``CER``, ``WER`` and ``ERR_<class>`` (totals over the lines, as
    ``evaluate@`` computes them for generated lines), then the counts behind them (``lines``,
    ``chars``, ``char_edits``, ``words``, ``word_edits``, per class ``class_wrong`` and
    ``class_total``, ``insertions``). Rows: ``text``, ``decoded``, ``cer``, ``wer``."""
    total = error_counts(refs, hyps)
    classes = char_class_errors(refs, hyps)
    metrics: dict[str, Any] = {"CER": total.cer, "WER": total.wer,
                               **dict(zip(CLASS_ERROR_KEYS, classes.rates().values())),
                               "lines": len(refs), "chars": total.chars,
                               "char_edits": total.char_edits, "words": total.words,
                               "word_edits": total.word_edits,
                               "class_wrong": dict(zip(CHAR_CLASSES, classes.wrong)),
                               "class_total": dict(zip(CHAR_CLASSES, classes.total)),
                               "insertions": classes.insertions}
    rows = []
    for ref, hyp in zip(refs, hyps):
        line = error_counts([ref], [hyp])
        rows.append({"text": ref, "decoded": hyp, "cer": line.cer, "wer": line.wer})
    return metrics, rows


def score_placement(generated: Iterable[InkSentence],
                    reference: Iterable[InkSentence]) -> PlacementSummary:
    """Baseline drift and word gaps (:mod:`cashg.metrics.placement`) of the new lines, against
    those of ``reference``: the same writers' real test lines, since nobody wrote the new
    sentences by hand (so the two sides are medians over different lines)."""
    return summarize_sets(((s.sentence_id, line_placement(s.text, s.xy, s.char_index))
                           for s in generated),
                          (line_placement(r.text, r.xy, r.char_index) for r in reference))


def write_new_text_outputs(out: Path, prompts: Sequence[Prompt], generated: Sequence[InkSentence],
                           rows: Sequence[Mapping[str, Any]], metrics: Mapping[str, Any],
                           details: Mapping[str, Any]) -> None:
    """Write ``metrics.json``, ``lines.csv`` (writer, sentence id, text asked, recognizer
    reading, per-line CER / WER), ``lines.png`` (each line under the text it was asked to
    write), ``generated.h5`` (cashg-ink; root attributes: the string values of ``details``)
    and ``details.json`` (how the lines were made) into ``out``."""
    import pandas as pd

    from cashg.evaluation.plots import plot_asked_lines

    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(dict(metrics), indent=2) + "\n",
                                      encoding="utf-8")
    (out / "details.json").write_text(json.dumps(dict(details), indent=2, sort_keys=True)
                                      + "\n", encoding="utf-8")
    table = pd.DataFrame([{"writer": p.writer_id, "sentence_id": p.sentence_id, **row}
                          for p, row in zip(prompts, rows)],
                         columns=["writer", "sentence_id", "text", "decoded", "cer", "wer"])
    table.to_csv(out / "lines.csv", index=False)
    write_ink(out / "generated.h5", generated,
              **{k: v for k, v in details.items() if isinstance(v, str)})
    plot_asked_lines([(p.text, f"{p.writer_id}   read: {row['decoded']}", s)
                      for p, row, s in zip(prompts, rows, generated)], out / "lines.png",
                     empty=str(details.get("no_lines", "no lines")))
