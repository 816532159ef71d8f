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


def read_review_csv(path: str | Path) -> list[ReviewRow]:
    with Path(path).open(newline="", encoding="utf-8") as fh:
        return [ReviewRow(**row) for row in csv.DictReader(fh)]
