"""The project speaks of the system, not of how it was built: no file names a work item (by
number or by title), a borrowed machine or a measuring call's time limit."""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEXT = {".py", ".md", ".sh", ".yaml", ".yml", ".toml", ".smk", ".cff", ".txt", ".cfg"}
SKIP = {".git", ".venv", ".dvc", "results", "logs", ".snakemake", "__pycache__",
        "measurements", "node_modules", ".pytest_cache", ".ruff_cache"}
PROCESS_WORDS = re.compile(
    r"\bissues?\s*(#\s*\d+|\d+\b|\"[^\"]+\")"        # issue #15, issue 28, issue "Placement"
    r"|\(issue\b"                                    # (issue ...)
    r"|\bwork items?\b"
    r"|\blent (gpu|machine|device)s?\b|\ba lent\b"   # a borrowed accelerator
    r"|\bdevice tool\b|\bdevice sessions?\b|\bgpu sessions?\b"
    r"|\b(first|second|third|\w+teenth|\w+tieth) session\b"
    r"|\bten-minute (call|window)\b|\bmeasuring window\b",
    re.IGNORECASE)


def _files():
    for folder, dirs, names in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in SKIP]
        for name in names:
            path = Path(folder) / name
            if path.suffix in TEXT or name == "Snakefile":
                yield path.relative_to(REPO), path


def test_no_file_speaks_of_how_the_project_was_built():
    found = []
    for rel, path in _files():
        if rel == Path("tests/test_wording.py"):
            continue
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if PROCESS_WORDS.search(line):
                found.append(f"{rel}:{n}: {line.strip()[:120]}")
    assert not found, "process wording:\n" + "\n".join(found)


def test_the_pattern_catches_what_it_is_for():
    for text in ('issue #15 item 3', '(issue "Placement")', 'issue 28', 'on a lent GPU',
                 'the device tool', 'thirteenth session', 'a ten-minute call'):
        assert PROCESS_WORDS.search(text), text
    for text in ("the issues a user files", "a training session's seconds",
                 "start_new_session", "an issue tracker"):
        assert not PROCESS_WORDS.search(text), text
