"""Checkpoints load with weights_only=True: a checkpoint from someone else cannot run code when loaded."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentgym.rl.checkpoint import STATE_FILE, load_checkpoint, save_checkpoint  # noqa: E402


class _Boom:
    def __reduce__(self):
        return (exec, ("raise SystemExit('code ran while loading a checkpoint')",))


def test_checkpoint_round_trips_rng_and_values_without_pickled_objects(tmp_path):
    np.random.seed(3)
    path = save_checkpoint(tmp_path, 1, {"model": {"w": torch.ones(2)}, "history": [{"x": 0.5}]})
    want = np.random.random(4)
    np.random.seed(99)
    state = load_checkpoint(path)  # restores the RNG states it holds
    assert np.allclose(np.random.random(4), want)
    assert torch.equal(state["model"]["w"], torch.ones(2)) and state["history"] == [{"x": 0.5}]


def test_a_checkpoint_that_would_run_code_is_refused(tmp_path):
    folder = tmp_path / "ckpt_000001"
    folder.mkdir()
    torch.save(
        {"model": {}, "evil": _Boom(), "rng": None}, folder / STATE_FILE, pickle_protocol=pickle.HIGHEST_PROTOCOL
    )
    with pytest.raises(ValueError, match="not loaded"):
        load_checkpoint(folder)
