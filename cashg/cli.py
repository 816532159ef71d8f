"""The ``cashg`` command: one subcommand per user task, each implemented in its own module.

Each subcommand module exposes ``add_arguments(parser)`` and ``run(args) -> int``; modules are
imported only when their subcommand runs, so ``cashg --help`` stays fast (no torch import).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "evaluate": ("cashg.evaluation.cli", "score a prediction ink file against ground truth"),
    "generate": ("cashg.generation.cli", "generate handwriting for a text in a writer's style"),
    "train": ("cashg.training.cli", "train with the three-stage curriculum"),
    "report": ("cashg.report", "assemble the results report from stage outputs"),
    "import": ("cashg.baselines.cli", "read another method's outputs as cashg-ink"),
    "studio": ("cashg.studio.cli", "web app: write a sentence in a writer's or your own style"),
    "params": ("cashg.params_cli", "switch params.yaml to a real dataset (params use EXAMPLE)"),
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser (``cashg --help``); each subcommand parses its own arguments."""
    parser = argparse.ArgumentParser(prog="cashg", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        module_name = SUBCOMMANDS[argv[0]][0]
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                print(f"cashg {argv[0]}: not available in this build ({exc})", file=sys.stderr)
                return 2
            raise
        parser = argparse.ArgumentParser(prog=f"cashg {argv[0]}",
                                         description=SUBCOMMANDS[argv[0]][1])
        module.add_arguments(parser)
        return int(module.run(parser.parse_args(argv[1:])) or 0)
    build_parser().parse_args(argv)
    return 2


if __name__ == "__main__":
    sys.exit(main())
