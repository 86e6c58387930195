"""Soak (slow): many episodes through the async env pool and minutes of mixed traffic to both servers, with
flat memory and no 5xx. The full-size run and its figures: ``tools/soak.py`` (record: docs/records/soak.json)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("agentgym_soak", ROOT / "tools" / "soak.py")
soak = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(soak)

pytestmark = pytest.mark.slow


def _has_data(family: str) -> bool:
    from agentgym.data import data_dir

    return (data_dir() / family).is_dir()


@pytest.mark.parametrize(
    "family, episodes, warmup",
    # ALFWorld keeps 64 compiled games per worker in memory: warm up past that before the first reading
    [("frozenlake", 2000, 200), ("sokoban", 2000, 200), ("webshop", 400, 40), ("hotpotqa", 400, 40)]
    + [("alfworld", 300, 150)],
)
def test_pool_memory_stays_flat(family, episodes, warmup):
    if family in ("alfworld", "webshop", "hotpotqa") and not _has_data(family):
        pytest.skip(f"no {family} data")
    r = soak.pool_soak(soak.FAMILIES[family], episodes, warmup=warmup, max_turns=10)
    assert r["episodes"] == episodes and r["worker_restarts"] == 0
    assert r["growth"]["workers"] < 0.10, r
    assert r["growth"]["parent"] < 0.10, r


@pytest.mark.parametrize("which", ["webshop", "agentgym serve"])
def test_servers_under_mixed_traffic_give_no_5xx_and_flat_memory(which, tmp_path):
    pytest.importorskip("flask")
    pytest.importorskip("fastapi")
    seconds = float(os.environ.get("AGENTGYM_SOAK_SECONDS", "60"))
    if which == "webshop":
        if not _has_data("webshop"):
            pytest.skip("no webshop data")
        port = soak._free_port()
        r = soak.server_soak("webshop", ["webshop", "serve", "--port", str(port)], port, soak.shop_traffic, seconds)
    else:
        from agentgym.models.tiny import make_tiny_model

        model, tok = make_tiny_model(seed=0)
        model.save_pretrained(tmp_path)
        tok.save_pretrained(tmp_path)
        port = soak._free_port()
        argv = ["serve", "--model", str(tmp_path), "--name", "tiny", "--port", str(port), "--device", "cpu"]
        r = soak.server_soak("agentgym serve", argv, port, soak.serve_traffic, seconds)
    assert r["requests"] > 0 and r["alive_at_end"], r
    assert r["five_xx"] == 0 and not r["connection_errors"], r
    assert any(int(s) < 300 for s in r["statuses"]) and any(400 <= int(s) < 500 for s in r["statuses"]), r
    assert r["growth"] < 0.10, r
