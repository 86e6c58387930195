"""Atomic checkpoints that let ``--resume`` continue a run exactly.

A checkpoint is a folder ``ckpt_<iteration>/`` written under a temporary name, fsynced, and renamed into place
(``os.replace`` is atomic on POSIX), so a kill at any point of the write leaves the previous checkpoint intact
and loadable; only complete folders (holding ``state.pt``) are ever listed, and what a killed write left behind
is removed by the next one. ``AGENTGYM_CHECKPOINT_PAUSE=STAGE:ITERATION`` stops a write at one of
:data:`PAUSE_STAGES` (and writes ``<run_dir>/.paused-STAGE``) so tests can kill it right there. It holds
everything that decides the next iteration: model (and critic) weights, optimizer states, the Python /
NumPy / torch (CPU and CUDA) RNG states, the trainer's own task-order generator, the iteration counter
and the metrics history.

Checkpoints hold only tensors and plain Python values (the NumPy RNG state is stored as a list), so they load
with ``torch.load(weights_only=True)``: a checkpoint from someone else cannot run code when it is loaded.
"""

from __future__ import annotations

import io
import os
import pickle
import random
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

STATE_FILE = "state.pt"
#: Points of a checkpoint write where ``AGENTGYM_CHECKPOINT_PAUSE`` can stop it: half of state.pt written;
#: all written and fsynced; renamed into place (old checkpoints not yet pruned); one old checkpoint half-pruned.
PAUSE_STAGES = ("write", "fsync", "replace", "prune")


def _pause(stage: str, run_dir: Path, iteration: int) -> None:
    """Stop here for good when ``AGENTGYM_CHECKPOINT_PAUSE`` names this stage and iteration (fault tests)."""
    if os.environ.get("AGENTGYM_CHECKPOINT_PAUSE") == f"{stage}:{iteration}":
        (run_dir / f".paused-{stage}").write_text(str(os.getpid()))
        while True:  # the test kills the process now
            time.sleep(1)


def _fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (a power cut after it must not bring the old name back)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some file systems refuse fsync on a directory
        pass
    finally:
        os.close(fd)


def rng_state() -> dict[str, Any]:
    """Global RNG states (Python, NumPy, torch CPU and every CUDA device)."""
    name, keys, pos, has_gauss, gauss = np.random.get_state()
    numpy_state = [str(name), [int(k) for k in keys], int(pos), int(has_gauss), float(gauss)]  # no pickled arrays
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    name, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run_dir: str | Path, iteration: int, state: dict[str, Any], *, keep: int = 2) -> Path:
    """Write ``state`` (a dict of state_dicts and plain values) as ``ckpt_<iteration>`` atomically.

    Args:
        run_dir: the run folder.
        iteration: number of finished iterations.
        state: what to save; ``rng`` is added here.
        keep: how many most recent checkpoints to keep.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in [*run_dir.glob(".tmp_ckpt_*"), *run_dir.glob(".old_ckpt_*")]:  # left by a killed write
        shutil.rmtree(stale, ignore_errors=True)
    final = run_dir / f"ckpt_{iteration:06d}"
    tmp = run_dir / f".tmp_ckpt_{iteration:06d}_{os.getpid()}"
    tmp.mkdir()
    payload = dict(state)
    payload["rng"] = rng_state()
    payload["iteration"] = iteration
    with open(tmp / STATE_FILE, "wb") as f:
        if os.environ.get("AGENTGYM_CHECKPOINT_PAUSE") == f"write:{iteration}":  # stop with half the bytes out
            buf = io.BytesIO()
            torch.save(payload, buf)
            f.write(buf.getbuffer()[: buf.tell() // 2])
            f.flush()
            _pause("write", run_dir, iteration)
        torch.save(payload, f)
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(tmp)
    _pause("fsync", run_dir, iteration)
    if final.exists():  # the same iteration saved again: move the old one aside first, never delete it first
        old = run_dir / f".old_ckpt_{iteration:06d}_{os.getpid()}"
        os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, final)
    _fsync_dir(run_dir)
    _pause("replace", run_dir, iteration)
    for old in list_checkpoints(run_dir)[:-keep] if keep > 0 else []:
        # state.pt goes first, so a kill mid-prune leaves a folder list_checkpoints no longer counts
        (old / STATE_FILE).unlink(missing_ok=True)
        _pause("prune", run_dir, iteration)
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(run_dir: str | Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        return []
    return sorted(p for p in run_dir.glob("ckpt_*") if (p / STATE_FILE).exists())


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def load_checkpoint(path: str | Path, *, restore_rng: bool = True) -> dict[str, Any]:
    """Read a checkpoint folder (and, by default, restore the global RNG states it holds)."""
    path = Path(path)
    if not (path / STATE_FILE).exists():
        raise FileNotFoundError(f"{path} is not a checkpoint (no {STATE_FILE}); pick one of ckpt_* in the run folder")
    try:  # tensors and plain values only: loading never runs code from the file
        state = torch.load(path / STATE_FILE, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        raise ValueError(
            f"{path / STATE_FILE} holds objects other than tensors and plain values, so it is not loaded "
            f"(unpickling them could run code). It was not written by this version of agentgym: {exc}"
        ) from None
    if restore_rng:
        set_rng_state(state["rng"])
    return state


def load_model_weights(model: Any, path: str | Path, *, model_name: str | None = None) -> Path:
    """Load the policy weights of a run into ``model`` (``--init-from``: an RL run starting from an SFT run).

    Args:
        model: the freshly loaded policy (same architecture and vocabulary as the run's).
        path: a run folder (its latest ``ckpt_*`` is used) or one ``ckpt_*`` folder.
        model_name: ``args.model`` of the new run, checked against the one the checkpoint was trained from.

    Returns:
        The checkpoint folder that was loaded. Optimizer, RNG and iteration count are not taken over.

    Raises:
        FileNotFoundError: no checkpoint at ``path``.
        ValueError: the checkpoint was trained from another base model, or was written inside an iteration
            (``save_every_steps``) of a run that stopped there.
    """
    path = Path(path)
    ckpt = path if (path / STATE_FILE).exists() else latest_checkpoint(path)
    if ckpt is None:
        raise FileNotFoundError(
            f"--init-from {path}: no checkpoint there (expected {path}/ckpt_*/{STATE_FILE}); "
            "pass the folder of a finished run, e.g. runs/<sft-exp>/"
        )
    state = load_checkpoint(ckpt, restore_rng=False)
    trained_from = state.get("args", {}).get("model")
    if model_name is not None and trained_from is not None and trained_from != model_name:
        raise ValueError(
            f"--init-from {ckpt} was trained from model {trained_from!r}, this run loads {model_name!r}: "
            f"pass --model {trained_from}"
        )
    if state.get("partial"):
        raise ValueError(
            f"--init-from {ckpt} was written inside iteration {int(state['iteration']) + 1} of that run (step "
            f"{state['partial'].get('step')}): it stopped there. Finish it first (the same command with --resume)"
        )
    model.load_state_dict(state["model"])
    return ckpt


def set_aside_old_run(run_dir: str | Path) -> Path:
    """A fresh run into a used run folder: move the old run to ``<run_dir>.old-N`` (never mix, never delete)."""
    old = Path(run_dir)
    n = 1
    while old.with_name(f"{old.name}.old-{n}").exists():
        n += 1
    dest = old.with_name(f"{old.name}.old-{n}")
    old.rename(dest)
    print(f"{old} held an earlier run (pass --resume to continue it); moved it to {dest}")
    return dest
