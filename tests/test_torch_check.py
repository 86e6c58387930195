"""tools/torch_check.py: the check `make setup` runs so a CPU machine ends with a CPU-only torch."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import torch_check  # noqa: E402

CUDA_TORCH_DEPS = ["torch", "nvidia-cublas-cu12", "nvidia_cudnn_cu12", "cuda-toolkit", "numpy", "triton"]


def test_this_venv_is_cpu_only():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU machine: the CUDA build is the right one here")
    assert torch_check.problems(torch.version.cuda, torch_check.installed_names()) == []
    out = subprocess.run([sys.executable, str(ROOT / "tools/torch_check.py")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "CPU build" in out.stdout


def test_cuda_libraries_are_found_and_the_fix_names_them():
    found = torch_check.problems("13.0", CUDA_TORCH_DEPS)
    assert len(found) == 2
    assert "CUDA 13.0 build" in found[0]
    assert "cuda-toolkit, nvidia-cublas-cu12, nvidia-cudnn-cu12" in found[1]
    fix = torch_check.fix_command("/v/bin/python", "2.13.0", torch_check.cuda_packages(CUDA_TORCH_DEPS))
    assert fix.startswith("/v/bin/python -m pip uninstall -y torch cuda-toolkit nvidia-cublas-cu12 nvidia-cudnn-cu12")
    assert f"--index-url {torch_check.CPU_INDEX} torch==2.13.0" in fix


def test_a_cpu_torch_with_leftover_nvidia_wheels_fails():
    assert torch_check.problems(None, ["torch", "nvidia-nccl-cu12"]) == [
        "1 CUDA library package(s) installed: nvidia-nccl-cu12"
    ]
    assert torch_check.problems(None, ["torch", "numpy"]) == []


def test_an_unreachable_index_costs_seconds():
    t0 = time.perf_counter()
    assert not torch_check.reachable("http://127.0.0.1:9/whl/cpu/torch/", timeout=2)  # nothing listens on port 9
    assert time.perf_counter() - t0 < 3
