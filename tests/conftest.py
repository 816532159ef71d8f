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
