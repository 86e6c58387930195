"""Env workers killed mid-run: the pool restarts them, replays their live episodes, and the run ends as if
nothing happened; an unrestorable episode is aborted and played again; a task that keeps killing its worker
is named."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import textwrap

import pytest

from agentgym.agent_io import EpisodeSpec
from agentgym.agents.base import RandomAgent
from agentgym.envpool import EnvPool, EnvWorkerCrash
from agentgym.episodes import read_episodes
from agentgym.evaluation import run_episodes, seed_specs

ENV = "agentgym/FrozenLake-v0"  # multi-turn, seeded maps and slippery moves: replay must reproduce both


def _kill_a_worker() -> int:
    """SIGKILL one env worker process of this test (spawned by multiprocessing)."""
    proc = sorted(mp.active_children(), key=lambda p: p.pid)[0]
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(timeout=10)
    return proc.pid


class KillingAgent(RandomAgent):
    """A seeded random agent that kills an env worker before its ``at``-th batched act call."""

    def __init__(self, seed: int, at: int, kill=_kill_a_worker) -> None:
        super().__init__(seed=seed)
        self.at, self.calls, self.kill, self.killed = at, 0, kill, []

    def act(self, inputs):
        self.calls += 1
        if self.calls == self.at:
            self.killed.append(self.kill())
        return super().act(inputs)


def _records(path):
    """Episode records without their wall-clock times (which differ between any two runs)."""
    return [
        {k: v for k, v in ep.to_dict().items() if k not in ("started_at", "ended_at")} for ep in read_episodes(path)
    ]


def test_a_worker_killed_mid_eval_is_restored_and_the_log_equals_an_uninterrupted_one(tmp_path):
    specs = seed_specs(12, seed=100)
    kw = {"batch_size": 6, "env_backend": "async", "num_workers": 2}
    run_episodes(ENV, RandomAgent(seed=5), specs, log_path=tmp_path / "clean.jsonl", **kw)
    agent = KillingAgent(seed=5, at=3)
    result = run_episodes(ENV, agent, specs, log_path=tmp_path / "killed.jsonl", **kw)
    assert agent.killed, "the test did not kill a worker"
    assert len(result.episodes) == 12
    assert _records(tmp_path / "killed.jsonl") == _records(tmp_path / "clean.jsonl")


def test_a_worker_killed_mid_rollout_gives_the_same_rollout():
    torch = pytest.importorskip("torch")
    from agentgym.models.generation import HFGenerator
    from agentgym.models.tiny import make_tiny_model
    from agentgym.rl.rollout import collect_rollouts

    torch.set_num_threads(1)
    model, tok = make_tiny_model(seed=0)

    class KillingGenerator(HFGenerator):
        def __init__(self, *a, at: int, **k):
            super().__init__(*a, **k)
            self.at, self.calls, self.killed = at, 0, []

        def generate(self, prompts, **kw):
            self.calls += 1
            if self.calls == self.at:
                self.killed.append(_kill_a_worker())
            return super().generate(prompts, **kw)

    def rollout(gen):
        with EnvPool(ENV, 6, backend="async", num_workers=2) as pool:
            batch = collect_rollouts(
                gen, tok, ENV, seed_specs(3, seed=7), group_size=2, max_new_tokens=8, seed=3, pool=pool
            )
            return [(t.episode, t.t, t.action, t.reward, list(t.response_ids)) for t in batch.turns], pool.restarts

    clean, _ = rollout(HFGenerator(model, tok))
    killer = KillingGenerator(model, tok, at=2)
    killed, restarts = rollout(killer)
    assert killer.killed and restarts == 1
    assert killed == clean


def test_an_episode_that_cannot_be_replayed_is_aborted_and_played_again(tmp_path, caplog):
    """A reset without a seed cannot be replayed: the episode is ended as aborted and its task re-queued."""
    specs = [EpisodeSpec(None) for _ in range(4)]
    agent = KillingAgent(seed=1, at=2)
    with caplog.at_level("WARNING"):
        result = run_episodes(
            ENV, agent, specs, batch_size=4, env_backend="async", num_workers=1, log_path=tmp_path / "l.jsonl"
        )
    assert agent.killed
    assert len(result.episodes) == 4 and len(read_episodes(tmp_path / "l.jsonl")) == 4
    assert all(not ep.steps[0].info.get("aborted") for ep in result.episodes)
    assert "aborted" in caplog.text and "without a seed" in caplog.text


CRASH_ENV = textwrap.dedent(
    '''
    import os, signal
    import gymnasium as gym
    from gymnasium import spaces

    class CrashEnv(gym.Env):
        """Dies (SIGKILL on itself) on reset with seed 13 or on the action "die"."""

        observation_space = spaces.Text(16)
        action_space = spaces.Text(16)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            if seed == 13:
                os.kill(os.getpid(), signal.SIGKILL)
            return "ok", {}

        def step(self, action):
            if action == "die":
                os.kill(os.getpid(), signal.SIGKILL)
            return "ok", 0.0, False, False, {}

    gym.register("CrashEnv-v0", entry_point=CrashEnv)
    '''
)


@pytest.fixture
def crash_env(tmp_path, monkeypatch):
    (tmp_path / "crash_env_mod.py").write_text(CRASH_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))  # spawned workers inherit sys.path
    return "crash_env_mod:CrashEnv-v0"


def test_a_task_that_keeps_killing_its_worker_is_named(crash_env):
    with EnvPool(crash_env, 2, backend="async", num_workers=1, max_restarts=2) as pool:
        pool.reset([0, 1], [(1, None), (2, {"task_id": "t-2"})])
        assert pool.step([0, 1], ["fine", "fine"])[0][0] == "ok"
        with pytest.raises(EnvWorkerCrash, match=r"died 3 times in a row on step of task seed=2 .*task_id=t-2.*'die'"):
            pool.step([0, 1], ["fine", "die"])
    with EnvPool(crash_env, 1, backend="async", max_restarts=1) as pool:
        with pytest.raises(EnvWorkerCrash, match=r"reset of task seed=13"):
            pool.reset([0], [(13, None)])


@pytest.mark.slow
def test_a_ray_actor_killed_mid_eval_is_restored(tmp_path):
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        specs = seed_specs(8, seed=100)
        kw = {"batch_size": 4, "env_backend": "ray", "num_workers": 2}
        run_episodes(ENV, RandomAgent(seed=5), specs, log_path=tmp_path / "clean.jsonl", **kw)

        def kill_actor() -> int:
            # Ray names an actor's process after its class; /proc finds it without Ray's dashboard
            for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmd = f.read()
                except OSError:
                    continue
                if cmd.startswith(b"ray::EnvWorker"):
                    os.kill(pid, signal.SIGKILL)
                    return pid
            raise AssertionError("no EnvWorker actor process found")

        agent = KillingAgent(seed=5, at=3, kill=kill_actor)
        run_episodes(ENV, agent, specs, log_path=tmp_path / "killed.jsonl", **kw)
        assert agent.killed
        assert _records(tmp_path / "killed.jsonl") == _records(tmp_path / "clean.jsonl")
    finally:
        ray.shutdown()
