"""``cashg params use EXAMPLE --root PATH``: switch ``params.yaml`` to a real dataset;
``cashg params profile NAME``: apply a profile (the GPU's, the paper's) to it.

    cashg params use deepwriting --root /data/deepwriting [--iam-ondb-root /data/iam_ondb]
    cashg params use merged --root iam=/data/IAM-OnDB --root brush=/data/BRUSH
    cashg params use brush --root /data/BRUSH --check     # survey only, change nothing
    cashg params use iam_ondb --root /data/IAM-OnDB --profile paper   # both at once
    cashg params use                                      # list the examples
    cashg params profile gpu                              # the GPU profile over params.yaml
    cashg params profile                                  # list the profiles

Each file of ``params.examples/`` holds the blocks of ``params.yaml`` that choose the data and
what is trained on it. This command writes the example's blocks into ``params.yaml`` (keeping
every other section and its comments): ``datasets`` (with the roots given), ``subsets.
benchmarks``, ``experiments``, ``ablation``, ``recognizer.benchmarks``, ``new_text.experiments``,
``baselines`` and ``collage.benchmarks``. Before it writes, it checks the result as every stage
will (:func:`cashg.core.params.load_params`) and surveys each root
(:func:`cashg.core.dataset_roots.survey_root`: the files the format needs, the writers the
split rule puts in each split) and prints the survey; a root that cannot be used, or a
params error, is exit status 2 and nothing is written. Then it prints what it changed as a
unified diff (``git diff params.yaml`` shows the same) and the command to run next.
The by-hand path, block by block: docs/datasets.md.

A profile (``params.profiles/<name>.yaml``, :mod:`cashg.core.profiles`) holds only the keys it
changes; ``profile`` writes them over ``params.yaml``, keeping the datasets, the experiments
and every other key, checks the result and prints the diff, as ``use`` does. ``use --profile``
applies the profile after the example's blocks.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

BLOCKS = (("datasets",), ("subsets", "benchmarks"), ("experiments",), ("ablation",),
          ("recognizer", "benchmarks"), ("new_text", "experiments"), ("baselines",),
          ("collage", "benchmarks"))


class UseError(ValueError):
    """The example, a root or the resulting params cannot be used (the message says why)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    use = sub.add_parser("use", help="write an example's dataset blocks into params.yaml",
                         description=__doc__.splitlines()[0])
    use.add_argument("example", nargs="?", default=None,
                     help="a file of params.examples/ (e.g. deepwriting or deepwriting.yaml),"
                          " or a path; none: list the examples")
    use.add_argument("--root", action="append", default=[], metavar="[KEY=]PATH",
                     help="where a dataset lies: PATH for an example with one dataset,"
                          " KEY=PATH (repeated) for each dataset key of the example")
    use.add_argument("--iam-ondb-root", type=Path, default=None,
                     help="DeepWriting: your IAM-OnDB copy (the IAM-origin chunks' span)")
    use.add_argument("--params", type=Path, default=Path("params.yaml"))
    use.add_argument("--examples", type=Path, default=None,
                     help="the examples folder (default: params.examples/ next to --params)")
    use.add_argument("--check", action="store_true",
                     help="survey the roots and check the result; write nothing")
    use.add_argument("--profile", default=None,
                     help="then apply this profile of params.profiles/ (e.g. gpu, paper)")
    prof = sub.add_parser("profile", help="write a profile's keys over params.yaml",
                          description="apply a profile of params.profiles/ to params.yaml")
    prof.add_argument("name", nargs="?", default=None,
                      help="a profile (e.g. gpu or paper); none: list the profiles")
    prof.add_argument("--params", type=Path, default=Path("params.yaml"))
    prof.add_argument("--check", action="store_true",
                      help="check the result and print the diff; write nothing")


def _yaml():
    from ruamel.yaml import YAML

    y = YAML()  # round trip: comments, order and quoting kept
    y.preserve_quotes = True
    y.width = 100
    return y


def example_path(example: str, folder: Path) -> Path:
    """The example file of ``example`` (a name in ``folder``, with or without ``.yaml``, or a
    path)."""
    path = Path(example)
    if path.is_file():
        return path
    name = example if example.endswith(".yaml") else f"{example}.yaml"
    path = folder / name
    if not path.is_file():
        have = ", ".join(p.stem for p in sorted(folder.glob("*.yaml"))) or "none"
        raise UseError(f"no example {example!r} in {folder} (have: {have})")
    return path


def parse_roots(given: list[str], keys: list[str], example: Path) -> dict[str, Path]:
    """``{dataset key: root}`` from ``--root`` values: one bare PATH for an example with one
    dataset, else ``KEY=PATH`` for every key."""
    roots: dict[str, Path] = {}
    for item in given:
        key, sep, path = item.partition("=")
        if not sep or (len(keys) == 1 and key not in keys):
            if len(keys) != 1:
                raise UseError(f"{example.name} has datasets {', '.join(keys)}: give each as"
                               f" --root KEY=PATH")
            key, path = keys[0], item
        if key not in keys:
            raise UseError(f"--root {item}: {key!r} is not a dataset of {example.name}"
                           f" ({', '.join(keys)})")
        roots[key] = Path(path).expanduser().resolve()
    missing = [k for k in keys if k not in roots]
    if missing:
        raise UseError(f"{example.name}: no root for {', '.join(missing)} (--root"
                       f" {'KEY=PATH' if len(keys) > 1 else 'PATH'})")
    return roots


def apply_example(params_text: str, example_text: str, roots: dict[str, Path],
                  iam_ondb_root: Path | None) -> str:
    """``params.yaml``'s text with the example's :data:`BLOCKS` (roots set), the rest as it
    was (comments included)."""
    y = _yaml()
    doc, ex = y.load(params_text), y.load(example_text)
    for path in BLOCKS:
        src, dst = ex, doc
        for part in path[:-1]:
            src, dst = src[part], dst[part]
        dst[path[-1]] = src[path[-1]]
    for key, root in roots.items():
        doc["datasets"][key]["root"] = str(root)
        if "iam_ondb_root" in doc["datasets"][key]:
            doc["datasets"][key]["iam_ondb_root"] = (str(iam_ondb_root.expanduser().resolve())
                                                     if iam_ondb_root is not None else "")
    out = io.StringIO()
    y.dump(doc, out)
    return out.getvalue()


def survey(params_path: Path):
    """The :class:`~cashg.core.dataset_roots.RootSurvey` of every dataset of a params file,
    against the split rules of the benchmarks that use it."""
    from cashg.core.dataset_roots import survey_root
    from cashg.core.params import load_params

    params = load_params(params_path)
    benchmarks = params["subsets"].benchmarks
    return [survey_root(key, cfg, [b.sources[key] for b in benchmarks.values()
                                   if key in b.sources])
            for key, cfg in params["datasets"].items()]


def use(args: argparse.Namespace) -> int:
    from cashg.core.params import ParamsError

    folder = args.examples or args.params.resolve().parent / "params.examples"
    if args.example is None:
        print(f"examples in {folder}:")
        for path in sorted(folder.glob("*.yaml")):
            print(f"  {path.stem}")
        print("use: cashg params use EXAMPLE --root PATH")
        return 0
    example = example_path(args.example, folder)
    if not args.params.is_file():
        raise UseError(f"{args.params}: no params file (run from the repository root, or pass"
                       " --params)")
    ex = _yaml().load(example.read_text(encoding="utf-8"))
    missing = [".".join(b) for b in BLOCKS
               if not (b[0] in ex and (len(b) == 1 or b[1] in ex[b[0]]))]
    if missing:
        raise UseError(f"{example}: not a dataset example (no {', '.join(missing)})")
    roots = parse_roots(args.root, list(ex["datasets"]), example)
    before = args.params.read_text(encoding="utf-8")
    after = apply_example(before, example.read_text(encoding="utf-8"), roots,
                          args.iam_ondb_root)
    if args.profile is not None:
        after = with_profile(after, args.profile, args.params)
    # checked as the stages will read it, in the params file's folder (relative paths)
    with candidate_params(args.params, after, ".params-use-") as tmp:
        try:
            surveys = survey(tmp)
        except ParamsError as exc:
            raise UseError(f"{example.name} does not give a valid params file: {exc}") from exc
        print(f"{example.name}: surveying {len(surveys)} dataset root(s)")
        for s in surveys:
            print("\n".join(s.lines()))
        bad = [s for s in surveys if not s.ok]
        if bad:
            print(f"cashg params use: {len(bad)} root(s) cannot be used as {example.name}"
                  f" configures them (PROBLEM lines above); {args.params} is unchanged",
                  file=sys.stderr)
            return 2
        if args.check:
            print(f"--check: {args.params} is unchanged")
            return 0
        os.replace(tmp, args.params)
    diff = difflib.unified_diff(before.splitlines(keepends=True),
                                after.splitlines(keepends=True),
                                f"a/{args.params.name}", f"b/{args.params.name}")
    sys.stdout.writelines(diff)
    profile = f" and the {args.profile} profile" if args.profile else ""
    print(f"\n{args.params}: the {example.stem} blocks are in ({', '.join('.'.join(b) for b in BLOCKS)})"
          f"{profile}; next: snakemake --cores all")
    return 0


@contextlib.contextmanager
def candidate_params(params_path: Path, text: str, prefix: str) -> Iterator[Path]:
    """``text`` written to a temporary file beside ``params_path`` (so relative paths resolve
    as the stages' will), for the caller to check and ``os.replace`` over the params file;
    removed if it is still there at the end."""
    fd, tmp = tempfile.mkstemp(suffix=".yaml", prefix=prefix, dir=params_path.resolve().parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        yield Path(tmp)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def with_profile(params_text: str, name: str, params_path: Path) -> str:
    """``params_text`` with profile ``name`` (beside ``params_path``) applied."""
    from cashg.core.profiles import apply_profile, profile_path, profiles_folder

    path = profile_path(name, profiles_folder(params_path))
    return apply_profile(params_text, path.read_text(encoding="utf-8"), str(path))


def profile(args: argparse.Namespace) -> int:
    from cashg.core.params import ParamsError, load_params
    from cashg.core.profiles import profiles_folder

    folder = profiles_folder(args.params)
    if args.name is None:
        print(f"profiles in {folder}:")
        for path in sorted(folder.glob("*.yaml")):
            print(f"  {path.stem}")
        print("use: cashg params profile NAME")
        return 0
    if not args.params.is_file():
        raise UseError(f"{args.params}: no params file (run from the repository root, or pass"
                       " --params)")
    before = args.params.read_text(encoding="utf-8")
    after = with_profile(before, args.name, args.params)
    with candidate_params(args.params, after, ".params-profile-") as tmp:
        try:
            load_params(tmp)
        except ParamsError as exc:
            raise UseError(f"the {args.name} profile does not give a valid params file:"
                           f" {exc}") from exc
        if not args.check:
            os.replace(tmp, args.params)
    sys.stdout.writelines(difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True),
        f"a/{args.params.name}", f"b/{args.params.name}"))
    state = "--check: unchanged" if args.check else f"the {args.name} profile is in"
    print(f"\n{args.params}: {state}; next: snakemake --cores all")
    return 0


def run(args: argparse.Namespace) -> int:
    from cashg.core.profiles import ProfileError

    actions = {"use": use, "profile": profile}
    if args.action not in actions:
        print("cashg params: the action is 'use' or 'profile' (cashg params use --help)",
              file=sys.stderr)
        return 2
    try:
        return actions[args.action](args)
    except (UseError, ProfileError, OSError) as exc:
        print(f"cashg params {args.action}: {exc}", file=sys.stderr)
        return 2
