"""Episodes per second and memory growth of the async env pool over a long run (not run by default).

Run: ``python -m pytest tests/benchmarks/test_bench_soak.py --benchmark-only -m "" -q``. Each round plays
2,000 episodes (10 turns at most, a seeded random agent) of a grid family through a 2-worker ``async`` pool;
``extra_info`` holds the RSS of the parent and the workers after 200 episodes and at the end. Target: worker
RSS growth under 10%. Full-size figures for every family: ``tools/soak.py`` (docs/records/soak.json).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("agentgym_soak", ROOT / "tools" / "soak.py")
soak = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(soak)

pytestmark = pytest.mark.benchmark


@pytest.mark.parametrize("family", ["frozenlake", "sokoban"])
def test_bench_pool_soak(benchmark, family):
    r = benchmark.pedantic(soak.pool_soak, args=(soak.FAMILIES[family], 2000), kwargs={"warmup": 200}, rounds=1)
    benchmark.extra_info.update(
        {"rss_warm_mb": r["rss_warm_mb"], "rss_end_mb": r["rss_end_mb"], "growth": r["growth"]}
    )
    assert r["growth"]["workers"] < 0.10
