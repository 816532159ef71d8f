"""scripts/setup.sh picks the torch build: the CPU wheel from the torch project's CPU index,
PyPI's default (CUDA) wheel on a GPU machine, or what TORCH_SPEC says."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _command(tmp_path: Path, gpu: bool, **env: str) -> subprocess.CompletedProcess:
    """setup.sh's torch command (TORCH_DRY_RUN), on a PATH whose ``nvidia-smi`` finds a GPU
    or none."""
    bin_dir = tmp_path / ("gpu" if gpu else "nogpu")
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\nexit {0 if gpu else 9}\n")
    fake.chmod(0o755)
    path = f"{bin_dir}:{os.environ['PATH']}"
    return subprocess.run(["bash", str(REPO / "scripts/setup.sh")], capture_output=True,
                          text=True, env={**os.environ, "PATH": path, "TORCH_DRY_RUN": "1",
                                          **env}, timeout=60)


def test_the_torch_build_follows_the_machine_and_the_choice(tmp_path):
    cpu = "pip install torch==2.13.0+cpu --extra-index-url https://download.pytorch.org/whl/cpu"
    cuda = "pip install torch==2.13.0\n"
    assert _command(tmp_path, gpu=False).stdout == cpu + "\n"
    assert _command(tmp_path, gpu=True).stdout == cuda
    assert _command(tmp_path, gpu=True, TORCH="cpu").stdout == cpu + "\n"
    assert _command(tmp_path, gpu=False, TORCH="cuda").stdout == cuda
    spec = "torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126"
    assert _command(tmp_path, gpu=False, TORCH_SPEC=spec).stdout == f"pip install {spec}\n"


def test_an_unknown_torch_build_is_refused(tmp_path):
    done = _command(tmp_path, gpu=False, TORCH="rocm")
    assert done.returncode == 2
    assert "TORCH=rocm is not one of auto, cpu, cuda" in done.stderr
