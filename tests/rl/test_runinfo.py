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


# -- Weights & Biases (extra `wandb`, `--track`), offline: no account, no network -------------------------------------
def _wandb_records(path):
    """The records of a ``.wandb`` transaction log (LevelDB log framing: 32 KiB blocks of [crc32, length, type]
    chunks after a 7-byte ``:W&B`` header), parsed with wandb's own protobuf ``Record``."""
    import struct

    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", "not a wandb transaction log"
    pos, block, chunk = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7]) if left >= 7 else (0, 0, 0)
        if kind == 0:  # block padding
            pos += left
            continue
        if pos + 7 + length > len(data):  # a record still being written
            return
        chunk += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            record = pb.Record()
            record.ParseFromString(chunk)
            chunk = b""
            yield record


def _finished_wandb_log(path, timeout: float = 60.0) -> list:
    """The records of a finished run's log. ``wandb.finish()`` returns before the wandb-core service has written
    the log out (measured: header only right after it, complete ~0.5 s later), so wait for its exit record."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        records = list(_wandb_records(path))
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def _offline_wandb(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for var in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(var, str(tmp_path / "wandb-home"))


def test_track_logs_every_iteration_and_the_config_to_an_offline_wandb_run_in_the_run_folder(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason='the wandb extra is not installed (pip install "agentgym[wandb]")')
    import baselines.grpo as grpo
    from agentgym.rl.runinfo import config_dict

    _offline_wandb(monkeypatch, tmp_path)
    run = tmp_path / "run"
    args = tiny_echo_args(grpo.Args, run, total_iterations=2, progress=False, track=True)
    with one_thread():
        Trainer(args, algo="grpo").fit(grpo.compute_advantages, grpo.policy_loss)

    run_id = (run / "wandb_id").read_text().strip()
    (log,) = run.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb")
    records = _finished_wandb_log(log)
    history = [r.history for r in records if r.WhichOneof("record_type") == "history"]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [h.step.num for h in history] == [1, 2] == [int(r["iteration"]) for r in rows]
    for h, row in zip(history, rows):
        logged = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in h.item}  # "a/b" is nested
        expected = {k: v for k, v in row.items() if k != "iteration" and v is not None}
        assert set(expected) <= set(logged) and "charts/success_rate" in expected
        assert {k: logged[k] for k in expected} == pytest.approx(expected)
    (meta,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert meta.run_id == run_id and meta.display_name == "run"
    config = {i.key: json.loads(i.value_json) for i in meta.config.update if i.key != "_wandb"}
    assert config == config_dict(args)

    # --resume continues the same wandb run (a second offline segment under the same id) from iteration 3.
    more = tiny_echo_args(grpo.Args, run, total_iterations=3, progress=False, track=True, resume=True)
    with one_thread():
        Trainer(more, algo="grpo").fit(grpo.compute_advantages, grpo.policy_loss)
    logs = sorted(run.glob(f"wandb/offline-run-*-{run_id}/run-{run_id}.wandb"))
    assert len(logs) == 2 and (run / "wandb_id").read_text().strip() == run_id
    resumed = [r.history.step.num for r in _finished_wandb_log(logs[-1]) if r.WhichOneof("record_type") == "history"]
    assert resumed == [3]


def test_track_without_wandb_says_which_extra_to_install(tmp_path, monkeypatch):
    import sys

    from agentgym.rl.metrics import MetricsLogger

    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError, as where it is not installed
    with pytest.raises(ImportError, match=r'pip install "agentgym\[wandb\]"'):
        MetricsLogger(tmp_path / "run", track=True)


def test_an_sft_run_folder_looks_like_an_rl_one(tmp_path, capsys):
    """SFT writes config.yaml, versions.json and train.log too, and --no-progress prints one line per epoch."""
    from baselines import sft

    args = sft.Args(
        model="tiny",
        env_id="agentgym/FrozenLakeNotSlippery-v0",
        output_dir=str(tmp_path),
        exp_name="sft",
        expert_episodes=4,
        total_iterations=2,
        max_new_tokens=8,
        save_every=1,
        progress=False,
        plot=False,
        export_model=False,
    )
    with one_thread():
        sft.train(args)
    run = tmp_path / "sft"
    assert to_dict(parse_args(sft.Args, ["--config", str(run / "config.yaml")])) == to_dict(args)
    assert json.loads((run / "versions.json").read_text())["device"] == "cpu"
    epochs = [ln for ln in (run / "train.log").read_text().splitlines() if " epoch " in ln]
    assert len(epochs) == 2 and "epoch 1/2 " in epochs[0] and "sft_loss=" in epochs[1]
    err = capsys.readouterr().err
    assert err.count(" epoch ") == 2 and "epoch 2/2 " in err
    # the resume state is the latest checkpoint alone (each one is written whole before the previous goes)
    assert sorted(p.name for p in run.glob("ckpt_*")) == ["ckpt_000002"]
