"""`agentgym openenv serve` speaks the OpenEnv spec: OpenEnv's own clients get gym.make's observations and rewards."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest

pytest.importorskip("openenv.core", reason="openenv-core is not installed (see docs/integrations.md)")

import agentgym  # noqa: E402, F401
from agentgym.integrations.openenv import AgentgymClient, TextAction, openenv_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(env_id: str, *extra: str) -> tuple[subprocess.Popen, str]:
    if "WebShop" in env_id:
        from tests.conftest import require_data

        require_data("webshop")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentgym", "openenv", "serve", env_id, "--port", str(port), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stdout.read().decode()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("the server did not start within 120 s")


@pytest.fixture
def server(request):
    proc, url = _start(*request.param)
    yield url
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def _gym_play(env_id: str, seed: int, options=None):
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed, options=options)
    steps, done = [], False
    while not done:
        action = env.unwrapped.expert_action()
        obs, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
        steps.append((action, obs, float(reward), done))
    return env.reset(seed=seed, options=options)[0], steps


@pytest.mark.timeout(180)
@pytest.mark.parametrize("server", [("agentgym/Sokoban-v0",)], indirect=True)
def test_openenv_clients_replay_gym_make_play(server):
    from openenv.core import GenericEnvClient

    first, steps = _gym_play("agentgym/Sokoban-v0", seed=5)
    # OpenEnv's generic client: plain dicts over the WebSocket
    with GenericEnvClient(base_url=server).sync() as client:
        result = client.reset(seed=5)
        assert result.observation["text"] == first
        for action, obs, reward, done in steps:
            result = client.step({"action": action})
            assert (result.observation["text"], result.reward, result.done) == (obs, reward, done)
    # our typed client, and two sessions at once: each has its own env
    with AgentgymClient(base_url=server).sync() as a, AgentgymClient(base_url=server).sync() as b:
        assert a.reset(seed=5).observation.text == first
        other = b.reset(seed=6).observation.text
        assert other == gym.make("agentgym/Sokoban-v0").reset(seed=6)[0] != first
        for action, obs, reward, done in steps:
            result = a.step(TextAction(action=action))
            assert (result.observation.text, result.reward, result.done) == (obs, reward, done)
        state = a.state()
        assert state.step_count == len(steps) and state.task_id == "sokoban-6x6-b1-seed5"
        assert state.total_reward == pytest.approx(sum(r for _, _, r, _ in steps))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("server", [("agentgym/WebShop-v0",)], indirect=True)
def test_webshop_task_options_reach_the_env(server):
    from openenv.core import GenericEnvClient

    options = {"split": "test", "index": 2}
    first, steps = _gym_play("agentgym/WebShop-v0", seed=0, options=options)
    with GenericEnvClient(base_url=server, message_timeout_s=120).sync() as client:
        assert client.reset(seed=0, options=options).observation["text"] == first
        for action, obs, reward, done in steps:
            result = client.step({"action": action})
            assert (result.observation["text"], result.reward, result.done) == (obs, reward, done)
    assert steps[-1][2] == 1.0  # the expert's purchase scores 1 through the server as through gym.make


@pytest.mark.timeout(180)
@pytest.mark.parametrize("server", [("agentgym/FrozenLake-v0", "--max-sessions", "1")], indirect=True)
def test_sessions_are_bounded(server):
    with AgentgymClient(base_url=server).sync() as a:
        a.reset(seed=1)
        with pytest.raises(RuntimeError, match="(?i)capacity|session"):
            with AgentgymClient(base_url=server).sync() as b:
                b.reset(seed=2)
        a.step(TextAction(action="left"))  # the first session is unaffected


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "server", [("agentgym/Sokoban-v0", "--max-sessions", "1", "--idle-timeout", "1")], indirect=True
)
def test_idle_sessions_are_reaped(server):
    idle = AgentgymClient(base_url=server).sync()
    idle.reset(seed=1)
    time.sleep(7)  # OpenEnv's reaper wakes every max(timeout / 4, 5) s
    with AgentgymClient(base_url=server).sync() as fresh:  # the idle session's slot is free again
        assert fresh.reset(seed=2).observation.text == gym.make("agentgym/Sokoban-v0").reset(seed=2)[0]
    with pytest.raises(RuntimeError, match="session was closed"):
        idle.step(TextAction(action="up"))


@pytest.mark.timeout(120)
def test_killing_the_server_mid_episode_is_a_clear_client_error():
    proc, url = _start("agentgym/Sokoban-v0")
    try:
        client = AgentgymClient(base_url=url, message_timeout_s=30).sync()
        client.reset(seed=3)
        client.step(TextAction(action="up"))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        start = time.monotonic()
        with pytest.raises(ConnectionError, match="closed the connection"):
            client.step(TextAction(action="up"))
        assert time.monotonic() - start < 10  # an error at once, not a wait for the message timeout
    finally:
        if proc.poll() is None:
            proc.kill()


def test_unknown_id_is_a_one_line_error():
    out = subprocess.run(
        [sys.executable, "-m", "agentgym", "openenv", "serve", "agentgym/Nope-v0"],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "not a registered env id" in out.stderr and "Traceback" not in out.stderr


def test_committed_manifests_match_what_the_server_serves():
    import yaml
    from fastapi import FastAPI

    from agentgym.integrations import openenv_apps

    paths = sorted((ROOT / "agentgym" / "integrations" / "openenv_spaces").glob("*/openenv.yaml"))
    assert {p.parent.name for p in paths} == {"sokoban", "frozenlake", "webshop", "hotpotqa", "alfworld"}
    for path in paths:
        text = path.read_text()
        env_id = next((i for i in gym.registry if openenv_yaml(i) == text), None)
        assert env_id is not None, f"{path} is stale: regenerate it with `agentgym openenv manifest ID`"
        spec = yaml.safe_load(text)
        assert spec["spec_version"] == 1 and spec["runtime"] == "fastapi"
        assert spec["app"].startswith("agentgym.integrations.openenv_apps:")
    assert isinstance(openenv_apps.sokoban_v0, FastAPI)
    with pytest.raises(AttributeError, match="no agentgym env id"):
        getattr(openenv_apps, "nope_v0")  # noqa: B009
