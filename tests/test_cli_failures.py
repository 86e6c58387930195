"""User errors end in one line that names the culprit and the fix; ``--debug`` shows the traceback.

Each case is run as a user runs it (``python -m agentgym ...`` in a subprocess), once plain and once with
``--debug``. Nothing here needs the network, data sets or a model: the broken part is made on purpose.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEAD = "http://127.0.0.1:9"  # the discard port: nothing listens, so a connection is refused at once


def _agentgym(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), "AGENTGYM_DEBUG": "", **env}
    full.pop("HF_HUB_OFFLINE", None)
    return subprocess.run(
        [sys.executable, "-m", "agentgym", *args], cwd=cwd, env=full, capture_output=True, text=True, timeout=180
    )


def _bad_yaml(tmp: Path) -> tuple[list[str], dict[str, str]]:
    (tmp / "bad.yaml").write_text("seed: 2\nlearning_rate: [1,\nexp_name: x\n")
    return ["train", "grpo", "--config", str(tmp / "bad.yaml")], {}


def _bad_type(tmp: Path) -> tuple[list[str], dict[str, str]]:
    (tmp / "fast.yaml").write_text("seed: 2\nlearning_rate: fast\n")
    return ["train", "grpo", "--config", str(tmp / "fast.yaml")], {}


def _tampered_data(tmp: Path) -> tuple[list[str], dict[str, str]]:
    (tmp / "data" / "webshop").mkdir(parents=True)
    (tmp / "data" / "webshop" / "documents_1k.jsonl").write_text('{"id": 1}\n')  # not the published file
    (tmp / "data" / "MANIFEST.tsv").write_text("")  # marks a copy of the published data: a difference is an error
    return ["eval", "--env", "agentgym/WebShop-v0", "--episodes", "1", "--quiet"], {"AGENTGYM_DATA": str(tmp / "data")}


def _empty_documents(tmp: Path) -> tuple[list[str], dict[str, str]]:
    (tmp / "ws").mkdir()
    (tmp / "ws" / "documents_1k.jsonl").write_text("")
    return ["eval", "--env", "agentgym/WebShop-v0", "--env-kwarg", f"data_dir={tmp / 'ws'}", "--quiet"], {}


def _download_offline(tmp: Path) -> tuple[list[str], dict[str, str]]:
    proxy = {k: DEAD for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")}
    return ["data", "download", "hotpotqa", "--dest", str(tmp / "data")], {**proxy, "no_proxy": "", "NO_PROXY": ""}


def _rl_before_sft(tmp: Path) -> tuple[list[str], dict[str, str]]:
    config = ROOT / "baselines" / "configs" / "cpu" / "grpo_smollm2_sokoban.yaml"
    return ["train", "grpo", "--config", str(config)], {}


def _no_hub(tmp: Path) -> tuple[list[str], dict[str, str]]:
    config = ROOT / "baselines" / "configs" / "grpo_alfworld_qwen2.5-1.5b.yaml"
    env = {"HF_HOME": str(tmp / "hf"), "HF_ENDPOINT": DEAD}
    return ["train", "grpo", "--config", str(config), "--output-dir", str(tmp / "runs")], env


def _argv(*args: str) -> Callable[[Path], tuple[list[str], dict[str, str]]]:
    return lambda tmp: (list(args), {})


#: case -> (how to break things, words the one line must hold: the culprit and the fix)
CASES: dict[str, tuple[Callable[[Path], tuple[list[str], dict[str, str]]], tuple[str, ...]]] = {
    "env-kwarg-not-an-int": (
        _argv("eval", "--env", "agentgym/FrozenLake-v0", "--env-kwarg", "size=abc", "--quiet"),
        ("--env-kwarg size='abc'", "size: int", "default 4"),
    ),
    "env-kwarg-out-of-range": (
        _argv("eval", "--env", "agentgym/FrozenLake-v0", "--env-kwarg", "p_frozen=2", "--quiet"),
        ("--env-kwarg p_frozen=2", "(0, 1]", "p_frozen: float"),
    ),
    "malformed-yaml": (_bad_yaml, ("bad.yaml, line", "not valid YAML")),
    "config-value-of-wrong-type": (_bad_type, ("fast.yaml, line 2", "learning_rate", "expected a number")),
    "missing-hf-folder": (
        _argv("eval", "--env", "agentgym/FrozenLake-v0", "--agent", "hf:/nonexistent/model", "--quiet"),
        ("--agent hf:/nonexistent/model", "no checkpoint folder"),
    ),
    "tampered-data-file": (_tampered_data, ("documents_1k.jsonl", "agentgym data")),
    "empty-data-file": (_empty_documents, ("documents_1k.jsonl", "holds no products", "agentgym data prepare")),
    "download-offline": (_download_offline, ("could not download", "agentgym data prepare hotpotqa")),
    "rl-config-before-its-sft-run": (_rl_before_sft, ("init_from runs/sft_smollm2_sokoban", "agentgym train sft")),
    "hub-model-unreachable": (_no_hub, ("Qwen/Qwen2.5-1.5B-Instruct", "not in the HF cache", "local folder")),
}


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
@pytest.mark.parametrize("case", list(CASES))
def test_user_error_is_one_line_and_debug_shows_the_traceback(case, debug, tmp_path):
    make, needles = CASES[case]
    args, env = make(tmp_path)
    out = _agentgym((["--debug"] if debug else []) + args, cwd=tmp_path, env=env)
    assert out.returncode != 0
    if debug:
        assert "Traceback" in out.stderr
        return
    assert "Traceback" not in out.stderr, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip() and not line.startswith("(run with --debug")]
    assert len(lines) == 1, out.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_a_reader_that_leaves_early_is_not_an_error(tmp_path):
    """``agentgym list | head -1``: the pipe closes before the listing is written."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentgym", "list"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc.stdout.close()  # the reader is gone before anything is written
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 0
