"""What a run folder says about itself: ``config.yaml``, ``versions.json`` and ``train.log``.

Every training run writes, next to its metrics and checkpoints:

- ``config.yaml``: the resolved :class:`~agentgym.rl.config.Args` (config file + command-line flags), which
  ``--config runs/<exp>/config.yaml`` loads back into the same Args;
- ``versions.json``: python, torch, transformers, agentgym, the git commit of the checkout (if any, with a
  ``dirty`` flag) and the device, so a figure can be traced to what produced it;
- ``train.log``: one line per iteration (SFT: per epoch; success, return, losses, time) through :mod:`logging`,
  always; the same lines go to the console when the progress bar is off (``--no-progress``, batch jobs) and,
  as SFT shows no bar, always for SFT.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

#: The package logger of training runs; ``train.log`` and (without a progress bar) stderr get its lines.
log = logging.getLogger("agentgym.train")

#: Metrics shown in each iteration's line (those present), in this order.
LINE_KEYS = (
    ("charts/success_rate", "success"),
    ("charts/episodic_return", "return"),
    ("losses/policy_loss", "policy_loss"),
    ("losses/value_loss", "value_loss"),
    ("losses/approx_kl", "kl"),
    ("rollout/invalid_action_rate", "invalid"),
    ("charts/SPS", "SPS"),
    ("losses/sft_loss", "sft_loss"),
    ("val/success_rate", "val_success"),
    ("val/invalid_action_rate", "val_invalid"),
    ("time/iteration_s", "s"),
)


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def cpu_name() -> str:
    """The CPU's model name and the vector width torch's kernels use (``AMD EPYC, torch AVX512``): float results, so
    a one-thread run's weights, can differ between CPUs of the same versions (the platform string does not tell)."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch

        return f"{model}, torch {torch.backends.cpu.get_cpu_capability()}"
    except ImportError:
        return model


def versions(device: str | None = None) -> dict[str, Any]:
    """Versions of what a run depends on, the checkout's git commit (None outside a git checkout), the device."""
    import importlib.metadata as md

    import agentgym

    out: dict[str, Any] = {"python": platform.python_version(), "agentgym": agentgym.__version__}
    for name in ("torch", "transformers", "numpy", "gymnasium", "accelerate", "vllm"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    root = Path(agentgym.__file__).resolve().parents[1]
    commit = _git(root, "rev-parse", "HEAD")
    out["git_commit"] = commit
    out["git_dirty"] = bool(_git(root, "status", "--porcelain", "--untracked-files=no")) if commit else None
    if device is None:
        try:
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            device = "cpu"
    out["device"] = device
    if device.startswith("cuda"):
        import torch

        out["device_name"] = torch.cuda.get_device_name(0)
        out["cuda"] = torch.version.cuda
    else:
        out["device_name"] = cpu_name()
    out["platform"] = platform.platform()
    out["argv"] = sys.argv
    return out


def config_dict(args: Any) -> dict[str, Any]:
    """The resolved Args as plain YAML-able values (paths as strings, tuples as lists)."""
    return json.loads(json.dumps(dataclasses.asdict(args), default=str))


def write_config(run_dir: Path, args: Any) -> Path:
    import yaml

    path = Path(run_dir) / "config.yaml"
    header = f"# Resolved {type(args).__name__} of this run; rerun with: --config {path}\n"
    path.write_text(header + yaml.safe_dump(config_dict(args), sort_keys=False, allow_unicode=True))
    return path


class RunInfo:
    """Writes the run folder's self-description and logs one line per iteration.

    Args:
        run_dir: the run folder.
        args: the resolved Args.
        device: the device training runs on (``versions.json``).
        console: also log iteration lines to stderr (when no progress bar is shown).
        enabled: False on non-main ranks (nothing written).
        unit: what one step of the run is called in its lines (``iteration``; SFT: ``epoch``).
        provenance: more for ``versions.json`` (the SFT: which privileged text its rows are in).
    """

    def __init__(
        self,
        run_dir: str | Path,
        args: Any,
        *,
        device: str | None = None,
        console: bool = False,
        enabled: bool = True,
        unit: str = "iteration",
        provenance: dict[str, Any] | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.enabled = enabled
        self.unit = unit
        self._handlers: list[logging.Handler] = []
        if not enabled:
            return
        self.run_dir.mkdir(parents=True, exist_ok=True)
        write_config(self.run_dir, args)
        info = {**versions(device), **(provenance or {})}
        (self.run_dir / "versions.json").write_text(json.dumps(info, indent=2) + "\n")
        fmt = logging.Formatter("%(asctime)s %(message)s", datefmt="%Y-%m-%d %H:%M:%S")
        file_handler = logging.FileHandler(self.run_dir / "train.log", encoding="utf-8")  # appends on resume
        file_handler.setFormatter(fmt)
        self._handlers.append(file_handler)
        if console:
            stream = logging.StreamHandler(sys.stderr)
            stream.setFormatter(fmt)
            self._handlers.append(stream)
        for h in self._handlers:
            log.addHandler(h)
        log.setLevel(logging.INFO)
        self._propagate = log.propagate
        log.propagate = False  # the lines go where this run says, not twice through the root logger
        log.info("run %s (%s) in %s", args.exp_name, type(args).__module__, self.run_dir)

    def iteration(self, it: int, total: int, metrics: dict[str, float]) -> None:
        """Log iteration ``it`` of ``total`` (1-based) with the headline metrics."""
        if not self.enabled:
            return
        parts = [f"{label}={metrics[k]:.4g}" for k, label in LINE_KEYS if k in metrics]
        log.info("%s %d/%d %s", self.unit, it, total, " ".join(parts))

    def close(self) -> None:
        if self._handlers:
            log.propagate = self._propagate
        for h in self._handlers:
            log.removeHandler(h)
            h.close()
        self._handlers.clear()
