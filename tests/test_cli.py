"""The ``agentgym`` command, run as users run it: ``python -m agentgym ...`` in a subprocess."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import agentgym  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
OWN_IDS = [
    "agentgym/Sokoban-v0",
    "agentgym/Sokoban8x8B2-v0",
    "agentgym/SokobanLetters-v0",
    "agentgym/FrozenLake-v0",
    "agentgym/FrozenLakeNotSlippery-v0",
    "agentgym/FrozenLakeLetters-v0",
]


def cli(
    *args: str,
    stdin: str | None = None,
    pythonpath: Path | None = None,
    cwd: Path = ROOT,
    env: dict[str, str] | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess:
    path = str(ROOT) + (os.pathsep + str(pythonpath) if pythonpath else "")
    full_env = {**os.environ, "PYTHONPATH": path, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "agentgym", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )


def table_row(stdout: str) -> dict[str, str]:
    lines = [ln for ln in stdout.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    values = [c.strip() for c in lines[2].strip("|").split("|")]
    return dict(zip(header, values))


def test_version_and_help():
    out = cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"agentgym {agentgym.__version__}"
    out = cli("--help")
    assert out.returncode == 0 and all(c in out.stdout for c in ("list", "play", "eval", "data"))


def test_list_shows_every_registered_id():
    out = cli("list")
    assert out.returncode == 0, out.stderr
    listed = [ln.split()[0] for ln in out.stdout.splitlines() if ln.strip()]
    assert listed == sorted(i for i in gym.registry if i.startswith("agentgym/"))
    for line in out.stdout.splitlines():
        if line.split()[0] in OWN_IDS:
            assert "needs an extra" not in line and len(line.split()) > 3  # a real one-line description


def test_play_a_level_to_the_end_from_stdin():
    env = gym.make("agentgym/Sokoban-v0")
    env.reset(seed=3)
    moves = [("up", "down", "left", "right")[d] for d in env.unwrapped.level.solution]
    script = "\n".join(["dance", *moves]) + "\n"
    out = cli("play", "agentgym/Sokoban-v0", "--seed", "3", stdin=script)
    assert out.returncode == 0, out.stderr
    assert "[invalid: not a move" in out.stdout
    assert out.stdout.rstrip().endswith("solved!")
    total = -0.1 * len(moves) + 1.0 + 10.0
    assert f"return {total:+.2f}" in out.stdout


def test_play_quits_and_survives_eof():
    out = cli("play", "agentgym/FrozenLake-v0", "--seed", "0", stdin="left\n:q\nright\n")
    assert out.returncode == 0 and out.stdout.count("reward") == 1
    out = cli("play", "agentgym/FrozenLake-v0", "--seed", "0", stdin="")
    assert out.returncode == 0
    out = cli("play", "agentgym/Sokoban-v0", "--seed", "0", "--env-kwarg", "symbols=ragen_vocab", stdin=":q\n")
    assert out.returncode == 0 and "WWWWWW" in out.stdout


def test_eval_expert_logs_and_resumes(tmp_path):
    log = tmp_path / "sokoban.jsonl"
    out = cli("eval", "--env", "agentgym/Sokoban-v0", "--agent", "expert", "--episodes", "6", "--log", str(log))
    assert out.returncode == 0, out.stderr
    row = table_row(out.stdout)
    assert row["success_rate"] == "1.000" and row["episodes"] == "6" and row["invalid_rate"] == "0.000"
    assert "6/6" in out.stderr  # the progress bar
    first = log.read_text().splitlines()
    assert len(first) == 6

    out = cli("eval", "--env", "agentgym/Sokoban-v0", "--agent", "expert", "--episodes", "9", "--log", str(log))
    assert out.returncode == 0, out.stderr
    assert "(6 episode(s) resumed" in out.stdout and table_row(out.stdout)["episodes"] == "9"
    lines = log.read_text().splitlines()
    assert lines[:6] == first and len(lines) == 9  # appended, nothing redone
    assert sorted(json.loads(ln)["seed"] for ln in lines) == list(range(9))

    out = cli(
        "eval", "--env", "agentgym/Sokoban-v0", "--agent", "expert", "--episodes", "9", "--log", str(log), "--quiet"
    )
    assert out.returncode == 0 and "resumed" in out.stdout and len(log.read_text().splitlines()) == 9
    assert "9/9" not in out.stderr


def test_eval_random_agent_on_frozen_lake(tmp_path):
    out = cli("eval", "--env", "agentgym/FrozenLake-v0", "--agent", "random", "--episodes", "20", "--seed", "100",
              "--quiet", "--log", str(tmp_path / "fl.jsonl"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    row = table_row(out.stdout)
    assert row["agent"] == "random" and 0.0 <= float(row["success_rate"]) < 0.6
    seeds = [json.loads(ln)["seed"] for ln in (tmp_path / "fl.jsonl").read_text().splitlines()]
    assert sorted(seeds) == list(range(100, 120))


def test_eval_loads_an_agent_class_from_a_module(tmp_path):
    (tmp_path / "my_agents.py").write_text(
        "from agentgym.agents.base import AgentAction\n"
        "class AlwaysLeft:\n"
        "    name = 'always-left'\n"
        "    def act(self, inputs):\n"
        "        return [AgentAction(action='left') for _ in inputs]\n"
    )
    out = cli("eval", "--env", "agentgym/FrozenLakeNotSlippery-v0", "--agent", "my_agents:AlwaysLeft",
              "--episodes", "4", "--quiet", pythonpath=tmp_path)  # fmt: skip
    assert out.returncode == 0, out.stderr
    row = table_row(out.stdout)
    assert row["agent"] == "always-left" and row["episodes"] == "4"


def test_eval_bad_arguments_fail_with_a_message():
    out = cli("eval", "--env", "agentgym/Sokoban-v0", "--agent", "nonsense", "--episodes", "1")
    assert out.returncode != 0 and "unknown agent" in out.stderr
    out = cli("eval", "--env", "agentgym/Sokoban-v0", "--agent", "no_such_module:Agent", "--episodes", "1")
    assert out.returncode != 0 and "cannot load agent" in out.stderr
    out = cli("eval", "--agent", "random")
    assert out.returncode != 0 and "--env" in out.stderr


ALWAYS_LEFT = (
    "from agentgym.agent_io import AgentAction\n"
    "class AlwaysLeft:\n"
    "    name = 'always-left'\n"
    "    def act(self, inputs):\n"
    "        return [AgentAction(action='left') for _ in inputs]\n"
)


def test_module_class_resolves_files_in_the_current_folder(tmp_path):
    (tmp_path / "my_agent.py").write_text(ALWAYS_LEFT)
    for spec in ("my_agent:AlwaysLeft", "my_agent.py:AlwaysLeft", str(tmp_path / "my_agent.py") + ":AlwaysLeft"):
        out = cli("eval", "--env", "agentgym/FrozenLakeNotSlippery-v0", "--agent", spec, "--episodes", "2",
                  "--quiet", cwd=tmp_path)  # fmt: skip
        assert out.returncode == 0, (spec, out.stderr)
        assert table_row(out.stdout)["agent"] == "always-left"
    out = cli("eval", "--env", "agentgym/FrozenLake-v0", "--agent", "my_agnt:AlwaysLeft", cwd=tmp_path)
    assert out.returncode != 0 and str(tmp_path) in out.stderr and "Traceback" not in out.stderr


def _one_line_error(out: subprocess.CompletedProcess, *needles: str) -> None:
    assert out.returncode != 0, out.stdout
    assert "Traceback" not in out.stderr, out.stderr
    for needle in needles:
        assert needle in out.stderr, (needle, out.stderr)


def test_known_failures_are_one_line_with_the_fix(tmp_path):
    _one_line_error(cli("eval", "--env", "agentgym/FrozenLak-v0"), "unknown env id", "agentgym/FrozenLake-v0",
                    "agentgym list")  # fmt: skip
    _one_line_error(cli("play", "agentgym/Sokobn-v0"), "unknown env id", "agentgym/Sokoban-v0")
    _one_line_error(
        cli("eval", "--env", "agentgym/FrozenLake-v0", "--env-kwarg", "sise=3"), "sise", "its arguments: size"
    )
    _one_line_error(cli("eval", "--env", "agentgym/FrozenLake-v0", "--env-kwarg", "size"), "KEY=VALUE")
    _one_line_error(cli("eval", "--env", "agentgym/FrozenLake-v0", "--split", "test"), "has no data splits")
    _one_line_error(
        cli("eval", "--env", "agentgym/WebShop-v0", "--split", "nosuch"), "unknown split 'nosuch'", "test, train"
    )
    _one_line_error(cli("eval", "--env", "agentgym/ALFWorld-v0", "--split", "valid"), "valid_seen", "valid_unseen")
    # A bad line in the middle of a log: file and line named, and what to do.
    log = tmp_path / "bad.jsonl"
    log.write_text('{"not": "an episode"}\n')
    _one_line_error(
        cli("eval", "--env", "agentgym/FrozenLake-v0", "--log", str(log), "--episodes", "1", "--quiet"),
        f"{log}: line 1",
        "--no-resume",
    )
    # Missing data: the path searched and the command that fixes it.
    empty = tmp_path / "nodata"
    empty.mkdir()
    out = cli("eval", "--env", "agentgym/WebShop-v0", "--episodes", "1", "--quiet", env={"AGENTGYM_DATA": str(empty)})
    if "DependencyNotInstalled" not in out.stderr and "pip install" not in out.stderr:
        _one_line_error(out, str(empty / "webshop"), "agentgym data download webshop")
    out = cli("webshop", "serve", "--port", "0", env={"AGENTGYM_DATA": str(empty)}, timeout=60)
    _one_line_error(out, str(empty / "webshop"), "agentgym data")
    # --debug shows the traceback of the same failure.
    out = cli("--debug", "eval", "--env", "agentgym/FrozenLake-v0", "--log", str(log), "--episodes", "1", "--quiet")
    assert out.returncode != 0 and "Traceback" in out.stderr and "LogFormatError" in out.stderr


def test_a_model_server_that_is_down_is_one_line():
    pytest.importorskip("openai")
    out = cli("eval", "--env", "agentgym/FrozenLake-v0", "--agent", "openai:m", "--base-url",
              "http://127.0.0.1:9/v1", "--episodes", "1", "--quiet", env={"OPENAI_API_KEY": "x"},
              timeout=300)  # fmt: skip
    _one_line_error(out, "cannot reach the model server at http://127.0.0.1:9/v1", "--base-url")


def test_a_cut_log_tail_is_reported_in_one_line(tmp_path):
    log = tmp_path / "fl.jsonl"
    assert (
        cli("eval", "--env", "agentgym/FrozenLake-v0", "--log", str(log), "--episodes", "2", "--quiet").returncode == 0
    )
    whole = log.read_text()
    log.write_text(whole + whole.splitlines()[0][:50])  # a kill mid-write of a third episode
    out = cli("eval", "--env", "agentgym/FrozenLake-v0", "--log", str(log), "--episodes", "3", "--quiet")
    assert out.returncode == 0, out.stderr
    notes = [ln for ln in out.stderr.splitlines() if "cut" in ln]
    assert len(notes) == 1 and f"{log}: line 3 is cut" in notes[0], out.stderr
    assert len(log.read_text().splitlines()) == 3 and "(2 episode(s) resumed" in out.stdout


def test_eval_suite_without_out_writes_under_runs(tmp_path):
    out = cli("eval", "--suite", "frozenlake", "--agent", "random", "--quiet", cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["runs"]
    (sub,) = (tmp_path / "runs").iterdir()
    assert sub.name.startswith("submission-frozenlake-") and (sub / "submission.json").exists()

    # `submit` refuses to replace an entry of the same name unless --force.
    meta = ["--name", "Random", "--model", "none", "--method", "random", "--method-type", "Other"]
    entries = tmp_path / "entries"
    first = cli("submit", str(sub), *meta, "--entries", str(entries), "--sample", "2", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    (entry,) = entries.iterdir()
    again = cli("submit", str(sub), *meta, "--entries", str(entries), "--sample", "2", cwd=tmp_path)
    assert again.returncode != 0 and "already exists" in again.stderr and "--force" in again.stderr
    forced = cli("submit", str(sub), *meta, "--entries", str(entries), "--sample", "2", "--force", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert [p.name for p in entries.iterdir()] == [entry.name]


# -- every option has help text and its default ---------------------------------------------------------


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))


def test_every_builtin_option_has_help_and_its_default():
    from agentgym.cli import DELEGATED, build_parser

    seen = 0
    for path, parser in _walk(build_parser()):
        if path and path[0] in DELEGATED:
            continue
        help_text = parser.format_help()
        assert help_text.startswith(f"usage: {' '.join(('agentgym', *path))}"), help_text[:80]
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            seen += 1
            where = f"agentgym {' '.join(path)} {'/'.join(action.option_strings) or action.dest}"
            assert action.help, f"{where} has no help text"
            if action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
                assert "default" in parser._get_formatter()._get_help_string(action), f"{where}: no default shown"
    assert seen > 25


def _options_without_help(text: str) -> list[str]:
    """Option lines of an argparse/tyro --help with nothing after the option and no continuation line."""
    lines = [ln.strip("│ ").rstrip() for ln in text.splitlines()]
    is_option = re.compile(r"^--?[A-Za-z]").match
    bad = []
    for i, line in enumerate(lines):
        if not is_option(line):
            continue
        parts = line.split("  ")
        rest = [p for p in parts[1:] if p.strip()]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if not rest and (not nxt or is_option(nxt) or nxt.startswith("╰")):
            bad.append(line)
    return bad


@pytest.mark.parametrize(
    "argv",
    [
        ["webshop", "serve", "--help"],
        ["leaderboard", "--help"],
        ["submit", "--help"],
        *[["train", algo, "--help"] for algo in ("ppo", "grpo", "rloo", "gigpo", "sapo", "erl", "seed")],
    ],
    ids=lambda a: "-".join(x for x in a if x != "--help"),
)
def test_every_delegated_subcommand_help(argv):
    out = cli(*argv, env={"COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"usage: agentgym {' '.join(argv[:-1])}" in " ".join(text.split()), text[:200]
    if argv[0] == "train":
        assert "--config FILE" in text
    assert _options_without_help(text) == []


def test_leaderboard_subcommands_help():
    out = cli("leaderboard", "--help", env={"COLUMNS": "200"})
    subs = [w for w in ("verify", "build") if w in out.stdout]
    assert subs == ["verify", "build"], out.stdout
    for name in subs:
        sub = cli("leaderboard", name, "--help", env={"COLUMNS": "200"})
        assert sub.returncode == 0 and f"usage: agentgym leaderboard {name}" in sub.stdout, sub.stdout[:200]
        assert _options_without_help(sub.stdout) == []


def test_the_way_in_after_setup_works_from_a_fresh_shell(tmp_path):
    """README: after `make demo`/`make test`, `source .venv/bin/activate` puts `agentgym` on the PATH."""
    activate = Path(sys.prefix) / "bin" / "activate"
    if not activate.exists():
        pytest.skip(f"not running inside a venv ({sys.prefix})")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"
    out = subprocess.run(
        ["bash", "-c", f"source {activate} && agentgym --version && python -c 'import agentgym, torch'"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("agentgym ")


def test_reproduce_script_help_names_every_default():
    out = subprocess.run(
        [sys.executable, "tools/reproduce.py", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert _options_without_help(out.stdout) == []
    for option in ("--scale", "--seeds", "--out"):
        line = next(ln for ln in out.stdout.splitlines() if ln.strip().startswith(option))
        assert "default" in line, line
