"""Compare the pipeline as Snakemake sees it with the pipeline as DVC sees it.

``python -m workflow.check_views [ROOT]`` prints every disagreement (stage missing on one side,
different command, inputs, outputs or tracked params) and exits 1 if there is any. The two
views are read by the tools themselves: Snakemake's parsed workflow and DVC's stage index; this
module shares no code with the adapter in ``workflow/dag.py`` except the rule-name convention.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class StageView:
    cmd: str
    inputs: frozenset[str]
    outputs: frozenset[str]
    directories: frozenset[str]
    params: str  # canonical JSON of tracked params

    def to_json(self) -> dict:
        return {
            "cmd": self.cmd,
            "inputs": sorted(self.inputs),
            "outputs": sorted(self.outputs),
            "directories": sorted(self.directories),
            "params": self.params,
        }


def rule_name(dvc_addressing: str) -> str:
    return re.sub(r"\W", "_", dvc_addressing.replace("@", "__"))


def _canon(path: str) -> str:
    return os.path.normpath(path).replace(os.sep, "/")


def snakemake_view(root: Path) -> dict[str, StageView]:
    """Rules as parsed by Snakemake (the ``all`` target excluded)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import OutputSettings, ResourceSettings

    view = {}
    cwd = os.getcwd()
    try:
        with SnakemakeApi(OutputSettings()) as api:
            workflow = api.workflow(
                resource_settings=ResourceSettings(cores=1),
                snakefile=root / "Snakefile",
                workdir=root,
            )
            for rule in workflow._workflow.rules:
                if rule.name == "all":
                    continue
                params = dict(rule.params.items())
                tracked = json.loads(params.get("tracked", "{}"))
                outputs = [str(o) for o in rule.output]
                view[rule.name] = StageView(
                    cmd=str(params.get("cmd", rule.shellcmd or "")),
                    inputs=frozenset(_canon(str(i)) for i in rule.input),
                    outputs=frozenset(_canon(o) for o in outputs),
                    directories=frozenset(
                        _canon(str(o)) for o in rule.output if o.is_directory
                    ),
                    params=json.dumps(tracked, sort_keys=True),
                )
    finally:
        os.chdir(cwd)
    return view


def dvc_view(root: Path) -> dict[str, StageView]:
    """Stages as indexed by DVC (persisted outputs excluded: Snakemake must not own them).

    DVC orders a stage after every stage whose outputs lie inside one of its dependency
    folders; Snakemake needs those outputs named. So a dependency folder that holds other
    stages' outputs stands here for those outputs (what the Snakemake rule must list).
    """
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    raw = {}
    with Repo(str(root)) as repo:
        for stage in repo.index.stages:
            params: dict = {}
            inputs = []
            for dep in stage.deps:
                if isinstance(dep, ParamsDependency):
                    params.update(dep.read_params())
                else:
                    inputs.append(_canon(dep.def_path))
            outs = [_canon(o.def_path) for o in stage.outs if not o.persist]
            raw[rule_name(stage.name)] = (stage.cmd, inputs, outs,
                                          json.dumps(params, sort_keys=True, default=str))
    view = {}
    for name, (cmd, inputs, outs, params) in raw.items():
        expanded = set()
        for dep in inputs:
            inside = {o for other, (_, _, o_outs, _) in raw.items() if other != name
                      for o in o_outs if o.startswith(dep.rstrip("/") + "/")}
            expanded |= inside or {dep}
        view[name] = StageView(
            cmd=cmd,
            inputs=frozenset(expanded),
            outputs=frozenset(outs),
            directories=frozenset(o for o in outs if "." not in Path(o).name),
            params=params,
        )
    return view


def diff_views(snake: dict[str, StageView], dvc: dict[str, StageView]) -> list[str]:
    """Human-readable disagreements; empty when the two views match."""
    problems = []
    for name in sorted(set(snake) | set(dvc)):
        if name not in snake:
            problems.append(f"{name}: in dvc.yaml but not a Snakemake rule")
            continue
        if name not in dvc:
            problems.append(f"{name}: a Snakemake rule but not a DVC stage")
            continue
        s, d = snake[name], dvc[name]
        for field in ("cmd", "inputs", "outputs", "directories", "params"):
            a, b = getattr(s, field), getattr(d, field)
            if a != b:
                if isinstance(a, frozenset):
                    problems.append(
                        f"{name}: {field} differ: only Snakemake {sorted(a - b)},"
                        f" only DVC {sorted(b - a)}"
                    )
                else:
                    problems.append(f"{name}: {field} differ: Snakemake {a!r} vs DVC {b!r}")
    return problems


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    root = Path(argv[0] if argv else ".").resolve()
    problems = diff_views(snakemake_view(root), dvc_view(root))
    for p in problems:
        print(p)
    if not problems:
        print(f"Snakemake and DVC agree on {len(dvc_view(root))} stages")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
