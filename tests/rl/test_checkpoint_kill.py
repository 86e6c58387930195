"""A training run SIGKILLed inside a checkpoint write: the previous checkpoint loads, and ``--resume`` ends
exactly where an uninterrupted run ends (same weights, same metrics, no iteration logged twice)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from agentgym.rl.checkpoint import PAUSE_STAGES, latest_checkpoint, list_checkpoints, load_checkpoint  # noqa: E402
from agentgym.rl.testing import TIME_KEYS, one_thread, param_vector, tiny_echo_args  # noqa: E402
from agentgym.rl.trainer import Trainer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ITERATIONS = 3
#: stage -> the iteration whose checkpoint write is killed (pruning first happens at 3: keep=2)
KILL_AT = {"write": 2, "fsync": 2, "replace": 2, "prune": 3}


def _args(run_dir: Path, **kw):
    from baselines import grpo

    return tiny_echo_args(grpo.Args, run_dir, total_iterations=ITERATIONS, save_every=1, **kw)


def _fit(args) -> Trainer:
    from baselines import grpo

    with one_thread():
        trainer = Trainer(args, algo="grpo")
        trainer.fit(grpo.compute_advantages, grpo.policy_loss)
    return trainer


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    trainer = _fit(_args(tmp_path_factory.mktemp("straight") / "run"))
    return param_vector(trainer.model), trainer.logger.history


def _killed_run(run_dir: Path, stage: str, iteration: int) -> None:
    """Train in a subprocess that stops inside the checkpoint write of ``iteration``; SIGKILL it there."""
    args = _args(run_dir)
    config = run_dir.parent / "config.json"
    fields = ("exp_name", "output_dir", "model", "env_id", "prompt_style", "restrict_vocab", "allow_eos")
    fields += ("max_new_tokens", "num_tasks", "group_size", "total_iterations", "learning_rate", "micro_batch_size")
    fields += ("progress", "plot", "save_every")
    config.write_text(json.dumps({f: getattr(args, f) for f in fields}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env["AGENTGYM_CHECKPOINT_PAUSE"] = f"{stage}:{iteration}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentgym", "train", "grpo", "--config", str(config)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    marker = run_dir / f".paused-{stage}"
    deadline = time.monotonic() + 300
    while not marker.exists():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before pausing: {proc.stderr.read().decode()[-2000:]}")
        assert time.monotonic() < deadline, "the run never reached the pause"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stderr.close()


# ~12 s each (a subprocess run): the default run kills mid-write and mid-prune, the slow run every stage
STAGES = [pytest.param(s, marks=pytest.mark.slow) if s in ("fsync", "replace") else s for s in PAUSE_STAGES]


@pytest.mark.parametrize("stage", STAGES)
def test_a_kill_inside_a_checkpoint_write_loses_nothing(stage, tmp_path, straight):
    end, history = straight
    run_dir = tmp_path / "run"
    _killed_run(run_dir, stage, KILL_AT[stage])
    # what the kill left: the newest complete checkpoint loads; anything half-written is not listed
    ckpt = latest_checkpoint(run_dir)
    expected = KILL_AT[stage] if stage in ("replace", "prune") else KILL_AT[stage] - 1
    assert ckpt is not None and ckpt.name == f"ckpt_{expected:06d}"
    assert load_checkpoint(ckpt, restore_rng=False)["iteration"] == expected
    assert all(load_checkpoint(c, restore_rng=False) for c in list_checkpoints(run_dir))
    # --resume finishes the run exactly as if it had never been killed
    resumed = _fit(_args(run_dir, resume=True))
    assert resumed.iteration == ITERATIONS
    assert torch.equal(param_vector(resumed.model), end)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [float(i) for i in range(1, ITERATIONS + 1)]
    for got, want in zip(resumed.logger.history, history):
        assert {k: v for k, v in got.items() if not k.startswith(TIME_KEYS)} == {
            k: v for k, v in want.items() if not k.startswith(TIME_KEYS)
        }
    assert not list(run_dir.glob(".tmp_ckpt_*")) and not list(run_dir.glob(".old_ckpt_*"))
