"""Every relative link of the README and docs/ points at a file that exists, and every
``#anchor`` at a heading of its target (GitHub's heading slugs), so that moving a section
between pages cannot leave a newcomer with a dead link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
         ROOT / "params.examples" / "README.md", ROOT / "scripts" / "measure" / "README.md"]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(h) for h in re.findall(r"(?m)^#{1,6} (.+)$", text)}


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8")))


def test_slug_follows_github():
    assert slug("Legibility: a recognizer-based CER / WER") == "legibility-a-recognizer-based-cer--wer"
    assert slug("The ink interchange format (`cashg-ink`, version 1)") == (
        "the-ink-interchange-format-cashg-ink-version-1")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path):
    broken = []
    for target in links(page):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = page if not path else (page.parent / path).resolve()
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_readme_indexes_every_file_of_docs():
    """The README's documentation index links every page of docs/ and every file of its
    sub-folders (or the folder), so a newcomer finds each from the front page."""
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(ROOT / "README.md")
              if not re.match(r"^[a-z]+:", target)}
    missing = []
    for path in sorted((ROOT / "docs").rglob("*")):
        if path.is_file() and path.resolve() not in linked and \
                not any(parent.resolve() in linked for parent in path.parents
                        if parent != ROOT / "docs" and ROOT / "docs" in parent.parents):
            missing.append(str(path.relative_to(ROOT)))
    assert not missing, f"README.md's index lacks {missing}"


# a repository path named in prose or a comment: a top folder of the project, then a path
# (no glob, no placeholder); results/ and the like are a run's outputs, not the tree's
NAMED_PATH = re.compile(r"(?<![\w./-])((?:cashg|preprocessing|workflow|scripts|docs|tests|"
                        r"params\.profiles|params\.examples|profiles)/[\w./-]*[\w/])")
SOURCE_GLOBS = ("cashg/**/*.py", "preprocessing/**/*.py", "workflow/**/*.py", "workflow/**/*.smk",
                "scripts/**/*.py", "scripts/**/*.sh", "tests/*.py", "Snakefile", "dvc.yaml",
                "params.yaml", "params.profiles/*.yaml", "README.md", "docs/*.md",
                "scripts/measure/README.md", "params.examples/README.md")


def named_paths(path: Path) -> list[str]:
    """The repository paths a file names (a path followed by a placeholder or a glob, or whose
    name is an upper-case placeholder, is a pattern, not a file)."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in NAMED_PATH.finditer(text):
        name = m.group(1).rstrip(".")
        after = text[m.end():m.end() + 1]
        if (after and after in "<*{$") or name.split("/")[-1].split(".")[0].isupper():
            continue  # a pattern, or a placeholder such as params.examples/EXAMPLE.yaml
        out.append(name)
    return out


def test_every_path_named_in_docs_and_code_exists():
    """A file or folder of the project named in a doc, a docstring or a comment exists, so a
    reader sent there finds it (the names are checked from the repository root). The results
    log is left out: each of its rows names the commands as they were at the row's commit."""
    files = sorted({p for g in SOURCE_GLOBS for p in ROOT.glob(g) if p.is_file()}
                   - {ROOT / "docs" / "results-log.md"})
    dead = sorted({f"{p.relative_to(ROOT)}: {name}" for p in files for name in named_paths(p)
                   if not (ROOT / name).exists()})
    assert not dead, dead
