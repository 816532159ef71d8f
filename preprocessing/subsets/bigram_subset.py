"""Predecessor-current bigram windows (paper Eq. 2: X_s = [e_{s-1}, y_{s-1}, e_s, y_s]).

One sample per adjacent character pair (s-1, s), s >= 1, of every sentence. Spaces are
characters with pseudo-trajectories (paper Sec. 3.4: spaces are kept so spacing survives), so
windows with a space as predecessor or current character are kept by default
(``include_spaces``); they carry the word-spacing transitions. Pairs where either character has
no points are dropped (``char_without_points``). The ``s = 1`` case of the paper (window reduced
to the current character) is the char stream's job and is not duplicated here.

Stored per sample: the window's points (the predecessor's then the current character's, which
are contiguous in the sentence), ``prev_len`` = T_{s-1} (the split point), both characters,
``boundary_pen`` (the predecessor's last pen state: CURSIVE_EOC = cursive join, EOC = pen
lift), the source sentence id and the current character's position.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from cashg.core.config.data import BigramSubsetConfig
from preprocessing.review import ReviewReport
from preprocessing.subsets.inputs import SourceSentence
from preprocessing.subsets.table import SampleTable, TableBuilder

COLUMNS = {"prev_char": str, "char": str, "prev_len": np.int32, "boundary_pen": np.int8,
           "sentence_id": str, "char_pos": np.int32}
POINTS = {"xy": np.float32, "pen": np.int8}


def build_bigram_table(
    sentences: Sequence[SourceSentence], cfg: BigramSubsetConfig, report: ReviewReport
) -> SampleTable:
    """All bigram windows of one split, sorted by writer (sentence order kept within a writer).

    ``report.seen`` counts adjacent pairs, ``kept`` windows written.
    """
    builder = TableBuilder("bigram", COLUMNS, POINTS)
    for s in sentences:
        for c in range(1, len(s.text)):
            prev, cur = s.text[c - 1], s.text[c]
            report.seen += 1
            where = f"{s.sentence_id}@{c}"
            if not cfg.include_spaces and (prev.isspace() or cur.isspace()):
                report.reject(s.source, where, "space_pair_excluded", f"{prev!r}{cur!r}")
                continue
            n_prev, n_cur = s.n_points(c - 1), s.n_points(c)
            if n_prev == 0 or n_cur == 0:
                report.reject(s.source, where, "char_without_points", f"{prev!r}{cur!r}")
                continue
            sl = slice(int(s.starts[c - 1]), int(s.ends[c]))
            builder.add(
                s.writer,
                {"prev_char": prev, "char": cur, "prev_len": n_prev,
                 "boundary_pen": int(s.pen[s.ends[c - 1] - 1]), "sentence_id": s.sentence_id,
                 "char_pos": c},
                {"xy": s.xy[sl], "pen": s.pen[sl]},
            )
            report.kept += 1
    table, _ = builder.finish()
    return table
