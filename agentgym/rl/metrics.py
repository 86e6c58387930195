"""Training metrics: TensorBoard (always), Weights & Biases (``--track``, extra ``wandb``), metrics.jsonl, a curve.

Keys shared by every baseline (DESIGN.md section 5) are listed in :data:`SHARED_KEYS`; algorithms add
their own (``losses/entropy``, ``losses/kl_ref``, ``time/logprob_s``...).
"""

from __future__ import annotations

import json
import math
import os
import secrets
from pathlib import Path
from typing import Any

SHARED_KEYS: tuple[str, ...] = (
    "charts/episodic_return",
    "charts/success_rate",
    "charts/SPS",
    "losses/policy_loss",
    "losses/value_loss",
    "losses/approx_kl",
    "losses/clipfrac",
    "rollout/invalid_action_rate",
    "rollout/response_length",
    "time/generation_s",
    "time/update_s",
)


def _nonfinite(v: object) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


class MetricsLogger:
    """Writes one dict of scalars per iteration to TensorBoard, wandb and ``metrics.jsonl``.

    Args:
        run_dir: run folder (``tb/`` and ``metrics.jsonl`` go there).
        track: also log to wandb (:func:`wandb_run`).
        project, config: wandb project and run config.
        history: rows logged before a resume (kept so the curve covers the whole run).
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        track: bool = False,
        project: str = "agentgym",
        config: dict[str, Any] | None = None,
        history: list[dict[str, float]] | None = None,
        enabled: bool = True,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.enabled = enabled
        self.history: list[dict[str, float]] = list(history or [])
        self.writer = None
        self.wandb = None
        if not enabled:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if history is not None:
            self._rewrite_jsonl()
        try:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.run_dir / "tb"))
        except ImportError:  # tensorboard is in the train extra; keep jsonl logging without it
            self.writer = None
        if track:
            self.wandb = wandb_run(self.run_dir, project, config or {})

    def _rewrite_jsonl(self) -> None:
        """A resumed run's metrics.jsonl holds exactly its checkpoint's history: rows that a killed process
        logged after its last checkpoint are dropped (they are played again), so no iteration appears twice."""
        path = self.run_dir / "metrics.jsonl"
        if not path.exists():
            return
        tmp = path.with_suffix(".jsonl.tmp")
        with open(tmp, "w") as f:
            for row in self.history:
                f.write(json.dumps({k: (None if _nonfinite(v) else v) for k, v in row.items()}) + "\n")
        os.replace(tmp, path)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        """Record ``metrics`` for iteration ``step`` (non-finite values are kept in jsonl as null)."""
        row = {"iteration": float(step), **{k: float(v) for k, v in metrics.items()}}
        self.history.append(row)
        if not self.enabled:
            return
        if self.writer is not None:
            for k, v in metrics.items():
                if math.isfinite(float(v)):
                    self.writer.add_scalar(k, float(v), step)
            self.writer.flush()
        if self.wandb is not None:
            self.wandb.log(dict(metrics), step=step)
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps({k: (v if math.isfinite(v) else None) for k, v in row.items()}) + "\n")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.wandb is not None:
            self.wandb.finish()


def wandb_run(run_dir: Path, project: str, config: dict[str, Any]) -> Any:
    """A wandb run for ``run_dir``: named after the folder, its files under ``run_dir/wandb/``, the resolved Args as
    its config; a resumed run (``--resume``) continues the same wandb run (its id is kept in ``run_dir/wandb_id``).

    ``WANDB_MODE=offline`` logs without an account or network; ``wandb sync run_dir/wandb/offline-run-*`` uploads
    it later.
    """
    try:
        import wandb
    except ImportError as exc:
        raise ImportError(
            '--track logs to Weights & Biases: pip install "agentgym[wandb]", then `wandb login` (or set '
            "WANDB_MODE=offline to keep the wandb run in the run folder and `wandb sync` it later)"
        ) from exc
    id_file = run_dir / "wandb_id"
    run_id = id_file.read_text().strip() if id_file.is_file() else secrets.token_hex(8)  # wandb ids: [a-z0-9]
    id_file.write_text(run_id + "\n")
    return wandb.init(project=project, name=run_dir.name, id=run_id, config=config, dir=str(run_dir), resume="allow")


def plot_learning_curve(history: list[dict[str, float]], path: str | Path, *, title: str = "") -> Path | None:
    """PNG of success rate and return per iteration (matplotlib, Agg); None when there is nothing to plot."""
    rows = [r for r in history if "charts/success_rate" in r]
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    it = [r["iteration"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    axes[0].plot(it, [r["charts/success_rate"] for r in rows], label="train")
    val = [(r["iteration"], r["val/success_rate"]) for r in history if "val/success_rate" in r]
    if val:
        axes[0].plot([v[0] for v in val], [v[1] for v in val], "o-", label="validation")
    axes[0].set_ylabel("success rate")
    axes[0].set_ylim(-0.02, 1.02)
    axes[0].legend()
    axes[1].plot(it, [r.get("charts/episodic_return", float("nan")) for r in rows])
    axes[1].set_ylabel("episodic return (shaped)")
    for ax in axes:
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
