"""Parameter profiles: named overlays over ``params.yaml`` (``params.profiles/<name>.yaml``).

A profile holds only the keys it changes: ``gpu`` (the demo's model at GPU batch sizes, CUDA
graphs, the train stage on the GPU) and ``paper`` (the paper's model, schedule and decoding).
Applying one writes its keys over the params file and keeps every other key, the datasets and
experiments among them, with their comments (``cashg params profile NAME``; with a dataset
example, ``cashg params use EXAMPLE --root PATH --profile NAME``). Mappings merge key by key;
any other value (a number, a string, a list, null) replaces the params file's.
"""

from __future__ import annotations

import copy
import io
from pathlib import Path

import yaml

PROFILES_DIR = "params.profiles"


class ProfileError(ValueError):
    """A profile that does not exist or cannot be applied (the message says which and why)."""


def profiles_folder(params_path: str | Path) -> Path:
    """The profiles folder beside a params file."""
    return Path(params_path).resolve().parent / PROFILES_DIR


def profile_path(name: str, folder: Path) -> Path:
    """The overlay file of profile ``name`` (a name in ``folder``, with or without ``.yaml``)."""
    stem = name[:-5] if name.endswith(".yaml") else name
    path = folder / f"{stem}.yaml"
    if not path.is_file():
        have = ", ".join(sorted(p.stem for p in folder.glob("*.yaml"))) or "none"
        raise ProfileError(f"no profile {name!r} in {folder} (have: {have})")
    return path


def overlay(base: dict, layer: dict) -> dict:
    """``base`` with ``layer`` written over it: mappings merged key by key, other values
    replaced (plain data; :func:`apply_profile` keeps the text's comments)."""
    out = copy.deepcopy(base)
    for key, value in layer.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = overlay(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def resolved(params_path: str | Path, name: str) -> dict:
    """The raw params of ``params_path`` with profile ``name`` over them."""
    base = yaml.safe_load(Path(params_path).read_text(encoding="utf-8")) or {}
    path = profile_path(name, profiles_folder(params_path))
    return overlay(base, yaml.safe_load(path.read_text(encoding="utf-8")) or {})


def apply_profile(params_text: str, profile_text: str, source: str = "profile") -> str:
    """``params.yaml``'s text with the profile's keys written over it; the rest, comments
    included, as it was."""
    from ruamel.yaml import YAML

    y = YAML()
    y.preserve_quotes = True
    y.width = 100
    doc, layer = y.load(params_text), y.load(profile_text)
    if not isinstance(layer, dict):
        raise ProfileError(f"{source}: not a mapping of params sections")
    _merge_into(doc, layer, source)
    out = io.StringIO()
    y.dump(doc, out)
    return out.getvalue()


def _merge_into(doc, layer, where: str) -> None:
    for key, value in layer.items():
        if isinstance(value, dict):
            if key not in doc or doc[key] is None:
                doc[key] = {}
            if not isinstance(doc[key], dict):
                raise ProfileError(f"{where}: {key} is a mapping in the profile but not in the"
                                   " params file")
            _merge_into(doc[key], value, f"{where}: {key}")
        else:
            doc[key] = value
