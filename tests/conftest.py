"""Shared pytest setup: tests run from the repository root, never touch the network."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("NUMBA_CACHE_DIR", str(REPO / ".numba_cache"))


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def profile_files(tmp_path_factory) -> dict[str, Path]:
    """Each profile as the params file a user gets: ``demo`` is params.yaml itself, ``gpu`` and
    ``paper`` params.yaml with that profile applied (``cashg params profile NAME``), written
    beside a copy of the new-text sentences so relative paths resolve as in the repository."""
    import shutil

    from cashg.core.profiles import apply_profile, profile_path, profiles_folder

    root = tmp_path_factory.mktemp("profiles")
    shutil.copytree(REPO / "resources" / "new_text", root / "resources" / "new_text")
    files = {"demo": REPO / "params.yaml"}
    text = (REPO / "params.yaml").read_text(encoding="utf-8")
    for name in ("gpu", "paper"):
        overlay = profile_path(name, profiles_folder(REPO / "params.yaml"))
        path = root / name / "params.yaml"
        path.parent.mkdir()
        path.write_text(apply_profile(text, overlay.read_text(encoding="utf-8")))
        files[name] = path
    return files


@pytest.fixture(scope="session")
def tiny_train_subsets(tmp_path_factory) -> Path:
    """Tiny training benchmark ``toy``: 6 synthetic BRUSH-style writers (0-3 train, 4-5
    test), 3 sentences each; built once per test session."""
    from cashg.core.config.data import BenchmarkConfig, SourceSplitConfig, SubsetsConfig
    from cashg.core.ink import write_ink
    from cashg.core.params import build
    from preprocessing.subsets.build import build_benchmark
    from preprocessing.subsets.synthetic import synthetic_corpus

    root = tmp_path_factory.mktemp("train_subsets")
    write_ink(root / "brush.h5", synthetic_corpus("brush", 6, 3, seed=3, words=(3, 8)))
    cfg = build(SubsetsConfig, {"sentence": {"max_chars": 20, "stride_chars": 10},
                                "style": {"per_writer": 4}})
    bench = BenchmarkConfig({"brush": SourceSplitConfig("writer_range", (0, 3), (4, 5))})
    build_benchmark("toy", bench, cfg, {"brush": root / "brush.h5"}, {}, root / "toy",
                    progress=False)
    return root / "toy"


@pytest.fixture
def one_torch_thread():
    """Training tests run on one torch thread (deterministic and fair under xdist)."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture
def subsets(tiny_train_subsets: Path) -> Path:
    """Short name of :func:`tiny_train_subsets` for the training tests (a test module's own
    ``subsets`` fixture takes precedence)."""
    return tiny_train_subsets
