"""Verification speed: a full-replay check of a submission the size of ALFWorld + WebShop (274 + 500 episodes).

Target: <= 2 min on a 2-core machine with ``--full`` and 2 worker processes. Until the ALFWorld
and WebShop envs are in the checkout, the same episode counts are measured on Sokoban (274) and
FrozenLake (500); the ALFWorld+WebShop variant runs when those envs and their data are present.

Run: ``python -m pytest tests/benchmarks/test_bench_verify.py --benchmark-enable -m "not gpu"``.
"""

from __future__ import annotations

import importlib.util

import pytest

from agentgym.agents import ExpertAgent
from agentgym.evaluation import EpisodeSpec
from agentgym.leaderboard.entry import default_agent_meta, write_submission
from agentgym.leaderboard.verify import verify
from agentgym.suites import SUITES, Suite, SuiteTask, get_suite


def _bench_suite(name: str, tasks: list[SuiteTask]) -> Suite:
    suite = Suite(name, "1", "benchmark suite", tuple(tasks))
    SUITES[name] = suite
    return suite


def _make(tmp_path, suite: Suite, agents: dict) -> object:
    from agentgym.evaluation import run_episodes

    logs = {}
    for env_id in suite.env_ids:
        log = tmp_path / f"{env_id.split('/')[-1]}.jsonl"
        run_episodes(env_id, agents[env_id], suite.specs(env_id), log_path=log, batch_size=16)
        logs[env_id] = log
    write_submission(tmp_path / "sub", suite, logs, default_agent_meta(ExpertAgent()))
    return tmp_path / "sub"


@pytest.fixture
def procedural_774(tmp_path):
    tasks = [SuiteTask("agentgym/Sokoban-v0", EpisodeSpec(200_000 + i)) for i in range(274)]
    tasks += [SuiteTask("agentgym/FrozenLake-v0", EpisodeSpec(300_000 + i)) for i in range(500)]
    suite = _bench_suite("bench-sokoban-frozenlake", tasks)
    try:
        # One agent for the whole submission: every episode must carry the declared agent label.
        yield _make(tmp_path, suite, {"agentgym/Sokoban-v0": ExpertAgent(), "agentgym/FrozenLake-v0": ExpertAgent()})
    finally:
        SUITES.pop(suite.name, None)


def test_bench_verify_full_774_procedural_2_workers(benchmark, procedural_774):
    report = benchmark.pedantic(lambda: verify(procedural_774, full=True, workers=2), rounds=3, iterations=1)
    assert report.ok, report.summary()
    assert report.replayed == 774


def test_bench_verify_full_774_procedural_1_worker(benchmark, procedural_774):
    report = benchmark.pedantic(lambda: verify(procedural_774, full=True, workers=1), rounds=3, iterations=1)
    assert report.ok and report.replayed == 774


def test_bench_verify_full_alfworld_webshop_2_workers(benchmark, tmp_path):
    for module in ("agentgym.envs.alfworld", "agentgym.envs.webshop"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not in this checkout yet")
    from tests.conftest import require_data

    require_data("alfworld")
    require_data("webshop")
    alf, web = get_suite("alfworld-eval"), get_suite("webshop-test")
    suite = _bench_suite("bench-alfworld-webshop", list(alf.tasks) + list(web.tasks))
    try:
        sub = _make(tmp_path, suite, {e: ExpertAgent() for e in suite.env_ids})
        report = benchmark.pedantic(lambda: verify(sub, full=True, workers=2), rounds=1, iterations=1)
        assert report.ok, report.summary()
        assert report.replayed == 774
    finally:
        SUITES.pop(suite.name, None)


def test_bench_verify_full_webshop_500_2_workers(benchmark, tmp_path):
    if importlib.util.find_spec("agentgym.envs.webshop") is None:
        pytest.skip("agentgym.envs.webshop is not in this checkout yet")
    from tests.conftest import require_data

    require_data("webshop")
    suite = get_suite("webshop-test")
    sub = _make(tmp_path, suite, {suite.env_ids[0]: ExpertAgent()})
    report = benchmark.pedantic(lambda: verify(sub, full=True, workers=2), rounds=3, iterations=1)
    assert report.ok, report.summary()
    assert report.replayed == 500
