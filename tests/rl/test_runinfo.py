"""Run folders explain themselves: config.yaml (loadable with --config), versions.json, train.log."""

from __future__ import annotations

import json
import logging

import pytest

pytest.importorskip("torch")

from agentgym.rl.config import parse_args, to_dict  # noqa: E402
from agentgym.rl.testing import one_thread, tiny_echo_args  # noqa: E402
from agentgym.rl.trainer import Trainer  # noqa: E402


def test_a_training_run_writes_config_versions_and_one_log_line_per_iteration(tmp_path, caplog):
    import baselines.grpo as grpo

    args = tiny_echo_args(grpo.Args, tmp_path / "run", total_iterations=2, progress=False)
    with one_thread():
        Trainer(args, algo="grpo").fit(grpo.compute_advantages, grpo.policy_loss)
    run = tmp_path / "run"

    # config.yaml is the resolved Args: --config gives them back, and later flags still override.
    again = parse_args(grpo.Args, ["--config", str(run / "config.yaml")])
    assert to_dict(again) == to_dict(args)
    assert parse_args(grpo.Args, ["--config", str(run / "config.yaml"), "--seed", "7"]).seed == 7

    v = json.loads((run / "versions.json").read_text())
    import torch
    import transformers

    assert v["torch"] == torch.__version__.split("+")[0] or v["torch"] == torch.__version__
    assert v["transformers"] == transformers.__version__
    assert v["python"] and v["agentgym"] and v["device"] == "cpu"
    assert "git_commit" in v  # None outside a git checkout, else 40 hex digits
    assert v["git_commit"] is None or len(v["git_commit"]) == 40

    lines = (run / "train.log").read_text().splitlines()
    its = [ln for ln in lines if " iteration " in ln]
    assert len(its) == 2 and "iteration 1/2" in its[0] and "iteration 2/2" in its[1]
    assert "success=" in its[1] and "return=" in its[1]
    # The run's handlers are gone afterwards: a later run in the same process does not write into this log.
    log = logging.getLogger("agentgym.train")
    assert not [h for h in log.handlers if getattr(h, "baseFilename", None) == str(run / "train.log")]
    assert log.propagate


def test_no_progress_bar_logs_iterations_to_the_console(tmp_path, capsys):
    import baselines.grpo as grpo

    args = tiny_echo_args(grpo.Args, tmp_path / "run", total_iterations=1, progress=False)
    with one_thread():
        Trainer(args, algo="grpo").fit(grpo.compute_advantages, grpo.policy_loss)
    assert "iteration 1/1 success=" in capsys.readouterr().err


def test_a_bad_config_is_one_line_naming_the_file(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]

    def train(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "agentgym", "train", "grpo", *argv], capture_output=True, text=True, cwd=root,
            timeout=300,
        )  # fmt: skip

    out = train("--config", str(tmp_path / "nosuch.yaml"))
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "nosuch.yaml" in out.stderr and "does not exist" in out.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("no_such_field: 1\n")
    out = train("--config", str(bad))
    assert out.returncode != 0 and "Traceback" not in out.stderr and "no_such_field" in out.stderr
