"""Review reports: every rejected, dropped or fixed item is one row with a reason.

Parsers and preprocessing never lose data silently. Each problem becomes a row
``(stage, dataset, file, sample, action, reason, detail)``; the report also counts what was seen
and kept so that ``seen == kept + rejected`` can be checked and printed.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

ACTIONS = ("rejected", "dropped", "fixed", "warning")


@dataclass(frozen=True)
class ReviewRow:
    stage: str
    dataset: str
    file: str
    sample: str
    action: str  # one of ACTIONS
    reason: str  # short machine-readable reason code, e.g. "truncated_xml"
    detail: str = ""


@dataclass
class ReviewReport:
    """Accumulates review rows and the seen/kept counts of one stage run."""

    stage: str
    dataset: str
    rows: list[ReviewRow] = field(default_factory=list)
    seen: int = 0
    kept: int = 0

    def add(self, file: str, sample: str, action: str, reason: str, detail: str = "") -> None:
        if action not in ACTIONS:
            raise ValueError(f"unknown review action {action!r}")
        self.rows.append(
            ReviewRow(self.stage, self.dataset, str(file), str(sample), action, reason, detail)
        )

    def reject(self, file: str, sample: str, reason: str, detail: str = "") -> None:
        """A sample that does not reach the output (counts against ``seen``)."""
        self.add(file, sample, "rejected", reason, detail)

    def fix(self, file: str, sample: str, reason: str, detail: str = "") -> None:
        """A sample kept after a correction."""
        self.add(file, sample, "fixed", reason, detail)

    def warn(self, file: str, sample: str, reason: str, detail: str = "") -> None:
        """A sample kept as is, with something a user should know."""
        self.add(file, sample, "warning", reason, detail)

    def extend(self, other: ReviewReport) -> None:
        self.rows.extend(other.rows)
        self.seen += other.seen
        self.kept += other.kept

    @property
    def rejected(self) -> int:
        return sum(1 for r in self.rows if r.action in ("rejected", "dropped"))

    def reasons(self, actions: tuple[str, ...] = ("rejected", "dropped")) -> dict[str, int]:
        return dict(sorted(Counter(r.reason for r in self.rows if r.action in actions).items()))

    def reconciles(self) -> bool:
        return self.seen == self.kept + self.rejected

    def check(self) -> None:
        """Raise when the counts do not reconcile (a bug: something was lost silently)."""
        if not self.reconciles():
            raise AssertionError(
                f"{self.stage}/{self.dataset}: seen {self.seen} != kept {self.kept}"
                f" + rejected {self.rejected}"
            )

    def summary_line(self) -> str:
        reasons = ", ".join(f"{k}={v}" for k, v in self.reasons().items()) or "none"
        return (
            f"[{self.stage}] {self.dataset}: seen {self.seen}, kept {self.kept},"
            f" rejected {self.rejected} ({reasons}); fixed {len(self.reasons(('fixed',)))} kinds,"
            f" warnings {sum(self.reasons(('warning',)).values())}"
        )

    def summary(self) -> dict:
        return {
            "seen": self.seen,
            "kept": self.kept,
            "rejected": self.rejected,
            "rejected_by_reason": self.reasons(),
            "fixed_by_reason": self.reasons(("fixed",)),
            "warnings_by_reason": self.reasons(("warning",)),
        }

    def write(self, csv_path: str | Path, json_path: str | Path | None = None) -> None:
        """Write the rows as CSV and (optionally) the counts as JSON."""
        csv_path = Path(csv_path)
        csv_path.parent.mkdir(parents=True, exist_ok=True)
        with csv_path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(ReviewRow.__dataclass_fields__))
            writer.writeheader()
            for row in self.rows:
                writer.writerow(asdict(row))
        if json_path is not None:
            Path(json_path).write_text(json.dumps(self.summary(), indent=2) + "\n")


class ProblemSink:
    """Routes one file's problems to a review report, or raises ``error`` when there is none.

    Parsers take an optional report: with one, every problem is a row and parsing goes on;
    without one (library use), the first rejection raises an error naming file and sample.
    """

    def __init__(self, report: ReviewReport | None, source: str,
                 error: type[Exception] = ValueError) -> None:
        self.report = report
        self.source = source
        self.error = error

    def reject(self, sample: str, reason: str, detail: str = "") -> None:
        if self.report is None:
            raise self.error(f"{self.source}: {sample}: {reason}: {detail}")
        self.report.reject(self.source, sample, reason, detail)

    def warn(self, sample: str, reason: str, detail: str = "") -> None:
        if self.report is not None:
            self.report.warn(self.source, sample, reason, detail)

    def fix(self, sample: str, reason: str, detail: str = "") -> None:
        if self.report is not None:
            self.report.fix(self.source, sample, reason, detail)

    def count(self, seen: int = 0, kept: int = 0) -> None:
        if self.report is not None:
            self.report.seen += seen
            self.report.kept += kept


class LowYieldError(RuntimeError):
    """A stage kept none, or too small a share, of its input (see :func:`check_yield`)."""


# What a user can do when most items are dropped for a reason. ``{key}`` is the dataset key.
YIELD_FIXES: dict[str, str] = {
    "unsegmented": (
        "the records carry no character segmentation: for IAM-OnDB set"
        " datasets.{key}.segmentation to the Character-Queries segmentation JSON (a path"
        " relative to datasets.{key}.root); CASIA .wptt lines have none (use the .ptts files)"),
    "known_bad": "check datasets.{key}.known_bad",
    "missing_writer_id": (
        "writer ids come from original/<aNN>/<form>/strokes*.xml: check that datasets.{key}.root"
        " holds the original/ folder"),
    "missing_transcription": "check that datasets.{key}.root holds the ascii/ folder",
    "csr_xml_count_mismatch": "check that ascii/ and lineStrokes/ come from the same release",
}


def check_yield(report: ReviewReport, min_share: float, key: str, setting: str,
                review_csv: str | Path) -> None:
    """Raise :class:`LowYieldError` when ``report`` kept nothing or less than ``min_share``.

    A stage that drops (almost) everything is a wrong setting or wrong data, not a result: it
    must not pass quietly (README, "Review reports": large counts of one reason usually mean a
    wrong root, format, language or split rule). The message names the stage, the dataset, the counts,
    the leading drop reasons, a fix where one is known (:data:`YIELD_FIXES`), the threshold's
    params setting (``setting``) and the review file.
    """
    if report.seen == 0:
        return
    share = report.kept / report.seen
    if report.kept > 0 and share >= min_share:
        return
    reasons = sorted(report.reasons().items(), key=lambda kv: (-kv[1], kv[0]))
    top = "; ".join(f"{r} {n}" for r, n in reasons[:3]) or "none recorded"
    fixes = [YIELD_FIXES[r].format(key=key) for r, _ in reasons[:3] if r in YIELD_FIXES]
    raise LowYieldError(
        f"{report.stage}: dataset {key!r} kept {report.kept} of {report.seen}"
        f" ({100 * share:.1f}%, below {setting} = {min_share:g}); dropped by reason: {top}."
        + (f" Fix: {' / '.join(fixes)}." if fixes else "")
        + f" Every drop is listed in {review_csv}.")


def read_review_csv(path: str | Path) -> list[ReviewRow]:
    with Path(path).open(newline="", encoding="utf-8") as fh:
        return [ReviewRow(**row) for row in csv.DictReader(fh)]
