"""The leaderboard is split by step, imports only run down the steps, and replays through one function."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "agentgym" / "leaderboard"
#: Bottom to top: a module may import only modules before it (lazy imports inside functions included).
STEPS = ("archive", "schema", "verify", "agent_process", "rerun", "entry", "table", "site", "build", "cli")


def _leaderboard_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[:2] == ["agentgym", "leaderboard"] and len(parts) > 2 and parts[2] in STEPS:
                out.add(parts[2])
    return out


def test_every_module_is_a_step():
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    assert modules == set(STEPS)


def test_imports_only_run_down_the_steps():
    for step in STEPS:
        below = set(STEPS[: STEPS.index(step)])
        bad = _leaderboard_imports(PACKAGE / f"{step}.py") - below - {step}
        assert not bad, f"agentgym.leaderboard.{step} imports {sorted(bad)}, which sit above it: {STEPS}"


def test_replay_goes_through_episodes_replay_only():
    for path in PACKAGE.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert ".step(" not in text, f"{path.name} steps an env itself; replay is agentgym.episodes.replay"
    assert "from agentgym.episodes import Episode, replay" in (PACKAGE / "verify.py").read_text()
