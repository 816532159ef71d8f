"""The layers of docs/architecture.md, asserted from the code's own imports.

Every ``import`` in ``cashg/``, ``preprocessing/`` and ``workflow/`` counts, the ones inside
functions too (a lazy import is still a dependency). Rules:

- ``cashg.core`` (the contracts) imports nothing of the project above it;
- ``preprocessing`` imports ``cashg.core`` and nothing else of ``cashg``;
- nothing in ``cashg`` imports ``preprocessing``;
- the model imports nothing from training, generation, evaluation, recognition or the report;
- the module graph has no circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cashg", "preprocessing", "workflow")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _imported(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """Project modules ``path`` imports (``from a.b import c`` names ``a.b.c`` when that is a
    module, else ``a.b``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _project_modules()
    return {name: _imported(path, name, modules) for name, path in modules.items()}


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _violations(graph: dict[str, set[str]], importer: str, allowed, forbidden) -> list[str]:
    return sorted(f"{src} -> {dst}" for src, dsts in graph.items() if _in(src, importer)
                  for dst in dsts if forbidden(dst) and not allowed(dst))


def test_graph_sees_the_project(graph):
    assert "cashg.core.params" in graph and "preprocessing.stages.parse" in graph
    assert "cashg.core.params" in graph["preprocessing.stages.parse"]


def test_contracts_import_nothing_above_them(graph):
    assert _violations(graph, "cashg.core", lambda m: _in(m, "cashg.core"),
                       lambda m: not _in(m, "cashg.core")) == []


def test_preprocessing_imports_only_the_contracts_of_cashg(graph):
    assert _violations(graph, "preprocessing", lambda m: _in(m, "cashg.core"),
                       lambda m: _in(m, "cashg")) == []


def test_cashg_never_imports_preprocessing(graph):
    assert _violations(graph, "cashg", lambda m: False,
                       lambda m: _in(m, "preprocessing")) == []


@pytest.mark.parametrize("above", ["cashg.training", "cashg.generation", "cashg.evaluation",
                                   "cashg.recognition", "cashg.report", "cashg.cli"])
def test_model_imports_nothing_above_it(graph, above):
    assert _violations(graph, "cashg.model", lambda m: False, lambda m: _in(m, above)) == []


def test_module_graph_has_no_circle(graph):
    """Depth-first search; a back edge is a circle, reported as its modules in order."""
    state: dict[str, int] = {}
    stack: list[str] = []
    circles: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                circles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert circles == []


def test_checker_finds_a_planted_violation(tmp_path):
    """The rules above can fail: a module that imports upwards is caught."""
    modules = {"cashg.core.x": tmp_path / "x.py", "cashg.training.y": tmp_path / "y.py"}
    modules["cashg.core.x"].write_text("def f():\n    from cashg.training import y\n")
    modules["cashg.training.y"].write_text("import cashg.core.x\n")
    graph = {name: _imported(path, name, modules) for name, path in modules.items()}
    assert graph == {"cashg.core.x": {"cashg.training.y"}, "cashg.training.y": {"cashg.core.x"}}
    assert _violations(graph, "cashg.core", lambda m: _in(m, "cashg.core"),
                       lambda m: True) == ["cashg.core.x -> cashg.training.y"]


def _closure(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    return seen


def _stage_entry_module(cmd: str) -> str | None:
    """The module a dvc.yaml command runs: ``python -m X`` or a ``cashg SUBCOMMAND``."""
    from cashg.cli import SUBCOMMANDS

    words = cmd.split()
    if words[:2] == ["python", "-m"]:
        return words[2]
    if words[0] == "cashg":
        return SUBCOMMANDS[words[1]][0]
    return None


def test_every_stage_depends_on_the_code_it_runs(graph):
    """A stage's code dependencies (dvc.yaml ``deps``) cover every project module its command
    imports, directly or not, so that DVC and Snakemake rerun it when that code changes."""
    import yaml

    modules = _project_modules()
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]
    missing = []
    for name, stage in stages.items():
        body = stage.get("do", stage)
        entry = _stage_entry_module(body["cmd"])
        assert entry in graph, f"{name}: cannot tell which module {body['cmd']!r} runs"
        deps = [str(d) for d in body.get("deps", []) if not str(d).startswith(("results", "$"))]
        for module in sorted(_closure(graph, entry)):
            path = modules[module].relative_to(ROOT).as_posix()
            if not module.startswith("workflow") and not any(
                    path == d or path.startswith(d.rstrip("/") + "/") for d in deps):
                missing.append(f"{name}: {path}")
    assert missing == []


@pytest.mark.parametrize("above", ["cashg.training", "cashg.evaluation", "cashg.report",
                                   "cashg.cli"])
def test_generation_imports_nothing_above_it(graph, above):
    """Training draws sample lines with the generation code, never the other way round."""
    assert _violations(graph, "cashg.generation", lambda m: False,
                       lambda m: _in(m, above)) == []


def test_the_studio_is_a_leaf(graph):
    """``cashg studio`` builds on generation and the contracts; nothing else imports the web
    app (``cashg.cli`` loads it by name, only when its subcommand runs)."""
    users = _violations(graph, "cashg", lambda m: False, lambda m: _in(m, "cashg.studio"))
    assert [u for u in users if not u.startswith("cashg.studio")] == []
    assert _violations(graph, "cashg.studio", lambda m: False,
                       lambda m: _in(m, "cashg.training") or _in(m, "cashg.evaluation")) == []


def test_the_importers_are_a_leaf(graph):
    """``cashg import`` (other methods' outputs) builds on the contracts and, to infer a
    segmentation, the recognizer; nothing else imports it (``cashg.cli`` loads it by name) and
    it never reaches the model, training, generation or evaluation."""
    users = _violations(graph, "cashg", lambda m: False, lambda m: _in(m, "cashg.baselines"))
    assert [u for u in users if not u.startswith("cashg.baselines")] == []
    assert _violations(graph, "cashg.baselines", lambda m: False,
                       lambda m: any(_in(m, f"cashg.{p}") for p in
                                     ("model", "training", "generation", "evaluation"))) == []
