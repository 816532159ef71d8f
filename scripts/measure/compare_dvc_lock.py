"""Compare the output hashes of two ``dvc.lock`` files, output path by output path.

Usage: ``python scripts/measure/compare_dvc_lock.py OLD_LOCK NEW_LOCK``

For a refactoring that should not change behaviour: every output path recorded in both files
is listed as same or changed (with both stage names, so a renamed stage is visible), and the
paths only one side has are listed too. Outputs are matched by path, not by stage name, so a
stage renamed without moving its outputs still compares. Exit status 0 when no common output
changed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml


def output_hashes(lock_path: Path) -> dict[str, tuple[str, str]]:
    """``{output path: (stage name, md5)}`` of every output recorded in ``lock_path``."""
    data = yaml.safe_load(lock_path.read_text(encoding="utf-8")) or {}
    found: dict[str, tuple[str, str]] = {}
    for stage, entry in (data.get("stages") or {}).items():
        for out in entry.get("outs") or []:
            if out["path"] in found:  # a stale entry of a stage dvc.yaml no longer has
                raise SystemExit(f"{lock_path}: {out['path']} is recorded by both "
                                 f"{found[out['path']][0]} and {stage}; drop the stale entry")
            found[out["path"]] = (stage, str(out.get("md5") or out.get("hash") or ""))
    return found


def compare(old: dict[str, tuple[str, str]], new: dict[str, tuple[str, str]]) -> dict[str, list]:
    """Common paths split into same / changed, plus the paths only one side records."""
    result: dict[str, list] = {"same": [], "changed": [], "only_old": [], "only_new": []}
    for path in sorted(set(old) | set(new)):
        if path not in new:
            result["only_old"].append((path, old[path][0]))
        elif path not in old:
            result["only_new"].append((path, new[path][0]))
        else:
            key = "same" if old[path][1] == new[path][1] else "changed"
            result[key].append((path, old[path][0], new[path][0]))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    result = compare(output_hashes(args.old), output_hashes(args.new))
    for path, old_stage, new_stage in result["changed"]:
        renamed = "" if old_stage == new_stage else f" (stage {old_stage} -> {new_stage})"
        print(f"changed   {path}{renamed}")
    for path, stage in result["only_old"]:
        print(f"only old  {path} ({stage})")
    for path, stage in result["only_new"]:
        print(f"only new  {path} ({stage})")
    renamed = sum(1 for _, a, b in result["same"] if a != b)
    print(f"{len(result['same'])} outputs the same ({renamed} under a renamed stage), "
          f"{len(result['changed'])} changed, {len(result['only_old'])} only in {args.old}, "
          f"{len(result['only_new'])} only in {args.new}")
    return 1 if result["changed"] else 0


if __name__ == "__main__":
    sys.exit(main())
