"""The docs site builds with warnings as errors (`make docs`), and its generated pages cover the code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest

import agentgym  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("mkdocs", reason="the docs extra is not installed: pip install -e '.[docs]'")
pytest.importorskip("mkdocstrings", reason="the docs extra is not installed: pip install -e '.[docs]'")


def build(config: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1", "COLUMNS": "100"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=600,
    )  # fmt: skip


def test_the_site_builds_strict_with_env_cli_and_api_pages(tmp_path):
    out = build(ROOT / "mkdocs.yml", tmp_path / "site", ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    envs = (tmp_path / "site" / "envs" / "index.html").read_text()
    for env_id, spec in gym.registry.items():
        if env_id.startswith("agentgym/"):
            assert env_id in envs, f"{env_id} has no row on the env page"
            cls = str(spec.entry_point).rsplit(":", 1)[1]
            assert cls in envs
    assert envs.count("Version History") >= 5  # the class docstrings themselves are rendered
    cli = (tmp_path / "site" / "cli" / "index.html").read_text()
    for usage in ("usage: agentgym eval", "usage: agentgym train grpo", "usage: agentgym leaderboard verify"):
        assert usage in cli
    assert "--config FILE" in cli
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "TextEnv" in api and "AgentInput" in api and "RunInfo" in api


def test_a_broken_reference_fails_the_build(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(
        "# x\n\nSee [a page that does not exist](nosuch.md).\n\n::: agentgym.core.TextEnv\n"
    )
    config = tmp_path / "mkdocs.yml"
    text = (ROOT / "mkdocs.yml").read_text()
    text = text.split("nav:")[0] + "plugins:" + text.split("plugins:")[1].split("markdown_extensions:")[0]
    config.write_text(text + "markdown_extensions: [tables]\nvalidation:\n  links:\n    not_found: warn\n")
    out = build(config, tmp_path / "site", tmp_path)
    assert out.returncode != 0 and "nosuch.md" in out.stderr, out.stderr[-2000:]
