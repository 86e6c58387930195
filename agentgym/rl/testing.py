"""Checks every baseline's smoke test runs: tiny model, 2 iterations, parameters move, metrics finite, exact resume.

Used by ``tests/baselines/test_*.py`` (and usable by any new baseline): a baseline module exposes ``Args``,
``compute_advantages`` and a loss (``policy_loss``/``ppo_loss``/``sapo_loss``);
:func:`smoke_and_resume` trains it for two iterations in one go, then again as one iteration + stop +
``--resume`` for the second, and checks that both runs end with identical parameters and identical
second-iteration metrics.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from agentgym.rl.trainer import Trainer

#: EchoBandit words: the tiny model samples only these (one token each), so success starts near 1/3.
ECHO_WORDS = ["apple", "river", "stone", "cloud", "green", "light", "table", "music"]

#: Metric keys that depend on wall-clock time (never compared across runs).
TIME_KEYS = ("time/", "charts/SPS")


def param_vector(model: Any) -> torch.Tensor:
    """All parameters flattened into one CPU vector (runs are compared with it)."""
    return torch.cat([p.detach().float().reshape(-1).cpu() for p in model.parameters()])


def tiny_echo_args(cls: type, run_dir: str | Path, **overrides: Any):
    """``cls`` Args for a tiny-model EchoBandit run in ``run_dir`` (few episodes, one-token answers)."""
    run_dir = Path(run_dir)
    kw: dict[str, Any] = dict(
        exp_name=run_dir.name,
        output_dir=str(run_dir.parent),
        model="tiny",
        env_id="agentgym/EchoBandit-v0",
        prompt_style="bare",
        restrict_vocab=list(ECHO_WORDS),
        allow_eos=False,
        max_new_tokens=1,
        num_tasks=2,
        group_size=2,
        total_iterations=2,
        learning_rate=1e-3,
        micro_batch_size=4,
        progress=False,
        plot=False,
    )
    kw.update(overrides)
    return cls(**kw)


def _fit(module: Any, args: Any, loss_name: str, algo: str, **trainer_kw: Any) -> tuple[Trainer, dict[str, float]]:
    trainer = Trainer(args, algo=algo, **trainer_kw)
    metrics = trainer.fit(module.compute_advantages, getattr(module, loss_name))
    return trainer, metrics


class one_thread:
    """Run torch on one thread inside the block: tiny models on a shared 2-core CPU run several times faster."""

    def __enter__(self):
        self.n = torch.get_num_threads()
        torch.set_num_threads(1)

    def __exit__(self, *exc):
        torch.set_num_threads(self.n)


def smoke_and_resume(
    module: Any, tmp_path: str | Path, *, loss_name: str, algo: str, trainer_kw: dict | None = None, **overrides: Any
) -> dict[str, Any]:
    """Run the smoke + resume check of a baseline; raises AssertionError on failure.

    Returns:
        ``{"metrics": last metrics of the uninterrupted run, "moved": parameter change norm}``.
    """
    with one_thread():
        return _smoke_and_resume(module, tmp_path, loss_name=loss_name, algo=algo, trainer_kw=trainer_kw, **overrides)


def _smoke_and_resume(
    module: Any, tmp_path: str | Path, *, loss_name: str, algo: str, trainer_kw: dict | None = None, **overrides: Any
) -> dict[str, Any]:
    trainer_kw = dict(trainer_kw or {})
    tmp_path = Path(tmp_path)
    args = tiny_echo_args(module.Args, tmp_path / "straight", **overrides)
    straight = Trainer(args, algo=algo, **trainer_kw)
    start = param_vector(straight.model)
    m_straight = straight.fit(module.compute_advantages, getattr(module, loss_name))
    end = param_vector(straight.model)
    moved = float((end - start).norm())
    assert moved > 0, "parameters did not move after two iterations"
    bad = {k: v for k, v in m_straight.items() if not math.isfinite(v)}
    assert not bad, f"non-finite metrics: {bad}"
    # Interrupted run: one iteration, stop (as if killed after the checkpoint), resume for the second.
    args_b = tiny_echo_args(module.Args, tmp_path / "resumed", stop_after=1, **overrides)
    first, _ = _fit(module, args_b, loss_name, algo, **trainer_kw)
    assert first.iteration == 1
    args_c = tiny_echo_args(module.Args, tmp_path / "resumed", resume=True, **overrides)
    resumed, m_resumed = _fit(module, args_c, loss_name, algo, **trainer_kw)
    assert resumed.iteration == 2
    assert torch.equal(param_vector(resumed.model), end), "resumed run ended with different parameters"
    for k, v in m_straight.items():
        if not k.startswith(TIME_KEYS):
            assert m_resumed[k] == v, f"{k}: resumed {m_resumed[k]} != uninterrupted {v}"
    return {"metrics": m_straight, "moved": moved}


CONFIG_DIR = Path(__file__).resolve().parents[2] / "baselines" / "configs" / "small"


def learning_run(
    module: Any, tmp_path: str | Path, *, loss_name: str, algo: str, trainer_kw: dict | None = None, **overrides: Any
) -> dict[str, Any]:
    """Train a baseline with its ``configs/small/<algo>_tiny_echo.yaml`` and validate at temperature 0.4 at the end.

    Returns:
        ``{"history": metrics rows, "start": mean success of the first 3 iterations,
        "end": mean success of the last 5, "val": final validation success}``.
    """
    from agentgym.rl.config import load_config_file, make_args

    name = algo.split("-")[0]
    cfg = load_config_file(CONFIG_DIR / f"{name}_tiny_echo.yaml")
    tmp_path = Path(tmp_path)
    cfg.update(output_dir=str(tmp_path), exp_name=name, progress=False, plot=True, save_every=0)
    cfg.update(val_tasks=64, val_temperature=0.4)
    cfg.update(overrides)
    cfg["val_every"] = cfg["total_iterations"]
    args = make_args(module.Args, cfg)
    with one_thread():
        trainer = Trainer(args, algo=algo, **dict(trainer_kw or {}))
        trainer.fit(module.compute_advantages, getattr(module, loss_name))
    hist = trainer.logger.history
    succ = [r["charts/success_rate"] for r in hist]
    return {
        "history": hist,
        "start": sum(succ[:3]) / 3,
        "end": sum(succ[-5:]) / 5,
        "val": hist[-1]["val/success_rate"],
        "curve": tmp_path / name / "learning_curve.png",
    }
