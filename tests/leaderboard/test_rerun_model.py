"""Re-running a model agent (``hf:``): the submitted checkpoint's sha256 is recorded at submit time and enforced."""

from __future__ import annotations

import gzip
import json
import random
import shutil
from pathlib import Path

import pytest

import agentgym.leaderboard.rerun as rerun_mod
from agentgym.agents import from_spec
from agentgym.cli import main as agentgym
from agentgym.leaderboard.archive import log_name
from agentgym.leaderboard.build import build
from agentgym.leaderboard.entry import make_entry, run_suite, runnable_for
from agentgym.leaderboard.rerun import RerunError, check_model_pin, check_rerun, rerun_entry
from agentgym.models.loading import checkpoint_sha256
from agentgym.models.prompt_settings import write_prompt_settings
from agentgym.models.tiny import make_tiny_model
from agentgym.suites import get_suite


@pytest.fixture(autouse=True)
def deterministic_seeds(monkeypatch):
    rng = random.Random(20261204)
    monkeypatch.setattr(rerun_mod, "_randbelow", lambda n: rng.randrange(n))


@pytest.fixture(scope="module")
def model_entry(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny local checkpoint, evaluated on the frozenlake suite with ``--agent hf:FOLDER`` and submitted."""
    import torch

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("model-entry")
    ckpt = root / "ckpt"
    make_tiny_model(ckpt, seed=0, hidden_size=32, num_layers=1)
    spec = f"hf:{ckpt}"
    agent = from_spec(spec, device="cpu", max_new_tokens=3, temperature=1.0)
    run_suite(get_suite("frozenlake"), agent, root / "run", batch_size=100, agent_spec=spec)
    entry, report = make_entry(root / "run", root / "board" / "entries", replay_sample=3, workers=1)
    assert entry is not None, report.summary()
    return entry, ckpt


def _copy(entry: Path, dest: Path) -> Path:
    shutil.copytree(entry, dest)
    return dest


def test_submit_records_the_checkpoint_sha256(model_entry):
    entry, ckpt = model_entry
    runnable = json.loads((entry / "submission.json").read_text())["agent"]["runnable"]
    assert runnable["spec"] == runnable["agent_name"] == f"hf:{ckpt}"
    assert runnable["model"] == {"id": str(ckpt), "checkpoint_sha256": checkpoint_sha256(ckpt)}
    assert runnable["prompt_version"] == "frozenlake-ragen@1"
    assert runnable["sampling"] == {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 3}
    assert runnable["kwargs"]["max_new_tokens"] == 3


def test_rerun_of_the_submitted_weights_is_verified(model_entry, tmp_path):
    entry = _copy(model_entry[0], tmp_path / "entries" / "tiny")
    record = rerun_entry(entry, episodes=4)
    assert record["ok"] and not record["flagged"], record["errors"]
    assert "warnings" not in record
    assert record["model"]["checkpoint_sha256"] == checkpoint_sha256(model_entry[1])
    assert "files of the folder loaded" in record["model"]["checked"]
    check = check_rerun(entry)
    assert check["ok"], check["errors"]
    assert build(tmp_path, workers=1)["tiers"]["tiny"] == "rerun-verified"
    # A record that does not name the pins as checked (as reruns made before pins were enforced) earns nothing.
    rec = json.loads((entry / "rerun.json").read_text())
    del rec["model"]
    (entry / "rerun.json").write_text(json.dumps(rec))
    check = check_rerun(entry)
    assert not check["ok"] and "does not record the submission's model pins" in check["errors"][0]


def test_weights_changed_after_submission_refuse_the_rerun(model_entry, tmp_path, capsys):
    entry, ckpt = model_entry
    pinned = checkpoint_sha256(ckpt)
    changed = tmp_path / "changed"
    make_tiny_model(changed, seed=1, hidden_size=32, num_layers=1)  # other weights, same config and tokenizer
    sub = json.loads((entry / "submission.json").read_text())
    with pytest.raises(
        RerunError, match=f"not the submitted model: .* has sha256 [0-9a-f]{{64}}, not the pinned {pinned}"
    ):
        check_model_pin(sub["agent"]["runnable"], changed)
    # The submitted checkpoint copied elsewhere is accepted by its hash, wherever it lies.
    copy = tmp_path / "copy"
    shutil.copytree(ckpt, copy)
    assert check_model_pin(sub["agent"]["runnable"], copy)["kwargs"] == {
        "checkpoint_sha256": pinned,
        "model_path": str(copy),
    }
    # The spec's own folder changed under it: `verify --rerun` refuses in one line and writes no rerun record.
    board = tmp_path / "board"
    moved = _copy(entry, board / "entries" / "moved")
    data = json.loads((moved / "submission.json").read_text())
    assert data["agent"]["runnable"]["model"]["checkpoint_sha256"] == pinned
    shutil.rmtree(moved / "rerun", ignore_errors=True)
    (moved / "rerun.json").unlink(missing_ok=True)
    shutil.copytree(ckpt, tmp_path / "ckpt-backup")
    try:
        shutil.copyfile(changed / "model.safetensors", ckpt / "model.safetensors")
        capsys.readouterr()
        assert agentgym(["leaderboard", "verify", str(moved), "--rerun", "--episodes", "2", "--workers", "1"]) == 1
    finally:
        shutil.copyfile(tmp_path / "ckpt-backup" / "model.safetensors", ckpt / "model.safetensors")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("not re-run: ") and f"not the pinned {pinned}" in err[0], err
    assert not (moved / "rerun.json").exists()
    assert build(board, workers=1)["tiers"]["moved"] == "replay-verified"


def test_unpinned_model_agents_are_logs_only_or_rejected_at_submit(model_entry, tmp_path, capsys):
    entry, ckpt = model_entry
    commit = "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"
    for spec, why in (
        (
            "hf:agentgym-test/not-in-cache",
            "not in the local HF cache; evaluate with hf:agentgym-test/not-in-cache@COMMIT",
        ),
        ("hf:agentgym-test/not-in-cache@main", "'main' is a branch or tag, which can move"),
        ("openai:gpt-x", "an API model"),
    ):
        block = runnable_for(spec, None)
        assert block["logs_only"] is True and why in block["reason"], block
    assert runnable_for(f"hf:agentgym-test/x@{commit}", None)["model"] == {"id": "agentgym-test/x", "revision": commit}
    # Hand-written runnable blocks that do not pin the weights are refused by `agentgym submit`.
    runnable = json.loads((entry / "submission.json").read_text())["agent"]["runnable"]
    bad = {
        "a branch": {**runnable, "model": {"id": str(ckpt), "revision": "main"}},
        "an API model": {**runnable, "spec": "openai:gpt-x", "agent_name": "openai:gpt-x"},
        "no pin": {**runnable, "model": {"id": str(ckpt)}},
    }
    expected = {"a branch": "is not a 40-hex commit", "an API model": "is an API model", "no pin": "is not pinned"}
    for what, block in bad.items():
        path = tmp_path / "runnable.json"
        path.write_text(json.dumps(block))
        args = [
            "submit",
            str(entry),
            "--entries",
            str(tmp_path / "entries"),
            "--workers",
            "1",
            "--runnable",
            str(path),
        ]
        assert agentgym(args) == 1, what
        err = capsys.readouterr().err
        assert err.startswith("REJECTED: ") and expected[what] in err, (what, err)


@pytest.fixture(scope="module")
def prompted_entry(tmp_path_factory) -> tuple[Path, Path]:
    """A tiny checkpoint whose folder records a non-default prompt (ERL cells, no history), evaluated as
    ``hf:FOLDER`` with no prompt flags (so with the folder's settings) and submitted."""
    import torch

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("prompted-entry")
    ckpt = root / "ckpt"
    make_tiny_model(ckpt, seed=0, hidden_size=32, num_layers=1)
    write_prompt_settings(
        ckpt,
        env_id="agentgym/FrozenLake-v0",
        style="erl-cells",
        template="frozenlake-erl-cells@1",
        history_length=0,
        max_new_tokens=3,
        max_prompt_tokens=1024,
        answer_format="<reason>...</reason>\n```ACTION```",
        trained_by="test",
    )
    spec = f"hf:{ckpt}"
    agent = from_spec(spec, device="cpu", temperature=1.0)
    run_suite(get_suite("frozenlake"), agent, root / "run", batch_size=100, agent_spec=spec)
    entry, report = make_entry(root / "run", root / "board" / "entries", replay_sample=3, workers=1)
    assert entry is not None, report.summary()
    return entry, ckpt


def _rerun_configs(entry: Path) -> list[dict]:
    """The agent settings each rerun episode was played with."""
    path = entry / rerun_mod.RERUN_DIR / "episodes" / f"{log_name('agentgym/FrozenLake-v0')}.jsonl.gz"
    with gzip.open(path, "rt") as f:
        return [json.loads(line)["agent_config"] for line in f if line.strip()]


def test_rerun_of_a_folder_with_prompt_settings_plays_with_them(prompted_entry, tmp_path):
    entry = _copy(prompted_entry[0], tmp_path / "entries" / "prompted")
    runnable = json.loads((entry / "submission.json").read_text())["agent"]["runnable"]
    assert runnable["prompt_version"] == "frozenlake-erl-cells@1"
    record = rerun_entry(entry, episodes=4)
    assert record["ok"] and not record["flagged"], record["errors"]
    configs = _rerun_configs(entry)
    assert len(configs) == 4
    for cfg in configs:
        assert (cfg["template_style"], cfg["history_length"], cfg["max_new_tokens"]) == ("erl-cells", 0, 3), cfg
    # A runnable block that names no prompt settings (hand-written, or from before they were recorded): the rerun
    # takes them from the pinned folder's agentgym_prompt.json, not the env's default template.
    sub = json.loads((entry / "submission.json").read_text())
    for key in ("style", "history_length", "max_new_tokens"):
        sub["agent"]["runnable"]["kwargs"].pop(key, None)
    (entry / "submission.json").write_text(json.dumps(sub))
    record = rerun_entry(entry, episodes=4)
    assert record["ok"], record["errors"]
    for cfg in _rerun_configs(entry):
        assert (cfg["template_style"], cfg["history_length"], cfg["max_new_tokens"]) == ("erl-cells", 0, 3), cfg
