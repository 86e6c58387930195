"""Soak: long runs of the env pool and of both HTTP servers, with memory read before and after.

* ``pool``: plays ``--episodes`` episodes per env family through the ``async`` pool (one pool for the whole
  run, episodes in chunks so the parent keeps none of them), a seeded random agent, ``--max-turns`` turns each;
  the resident memory (RSS) of the parent and of every worker is read after ``--warmup`` episodes and at the end.
* ``servers``: runs ``agentgym webshop serve`` and ``agentgym serve`` (a tiny random model saved to a temporary
  folder) as the user runs them, on 127.0.0.1 only, and sends each ``--seconds`` of mixed traffic: valid pages,
  searches and chat requests, and malformed ones (bad paths, bodies, JSON, types, oversized prompts). Counts every
  status; any 5xx is a failure. The server process's RSS is read after the first tenth of the time and at the end.

Targets (the issue's): RSS growth from warm-up to the end under 10%; no 5xx. Each run writes a record (JSON:
figures, versions, date, machine, command) to ``--out`` (default ``docs/records/soak.json``; parts are merged).

Run: ``python tools/soak.py pool --episodes 2000`` / ``python tools/soak.py servers --seconds 600``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "records" / "soak.json"

#: one env id per family; data-backed families are skipped (and said so) when their data is missing
FAMILIES = {
    "frozenlake": "agentgym/FrozenLake-v0",
    "sokoban": "agentgym/Sokoban-v0",
    "alfworld": "agentgym/ALFWorld-v0",
    "webshop": "agentgym/WebShop-v0",
    "hotpotqa": "agentgym/HotpotQA-v0",
}

#: fewest warm-up episodes per family: ALFWorld keeps 64 compiled games per worker process in memory, so its
#: memory rises until each worker has seen that many games
MIN_WARMUP = {"alfworld": 150}


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MB (from /proc; Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def growth(start: float, end: float) -> float:
    return (end - start) / start if start else 0.0


# -- the env pool ---------------------------------------------------------------------------------------------
def pool_soak(
    env_id: str,
    episodes: int,
    *,
    warmup: int,
    num_workers: int = 2,
    batch_size: int = 8,
    max_turns: int = 10,
    chunk: int = 200,
    seed: int = 0,
) -> dict[str, Any]:
    """Play ``episodes`` random episodes of ``env_id`` through one ``async`` pool; RSS after warm-up and at the end."""
    from agentgym.agent_io import seed_specs
    from agentgym.agents.base import RandomAgent
    from agentgym.envpool import EnvPool
    from agentgym.loop import run_loop

    agent = RandomAgent(seed=seed)
    chunk = min(chunk, warmup)  # the same chunk size before and after the warm-up reading: the same peak
    t0 = time.perf_counter()
    played, turns, warm = 0, 0, None
    with EnvPool(env_id, batch_size, backend="async", num_workers=num_workers) as pool:
        pids = [p.pid for p in pool._procs]

        def snapshot() -> dict[str, float]:
            return {"parent": rss_mb(os.getpid()), "workers": sum(rss_mb(p) for p in pids)}

        while played < episodes:
            n = min(chunk, episodes - played, warmup - played if played < warmup else chunk)
            specs = seed_specs(n, seed=seed + played)
            _, stats = run_loop(env_id, agent, specs, pool, num_slots=batch_size, max_turns=max_turns)
            played += n
            turns += stats.turns
            if warm is None and played >= warmup:
                warm = snapshot()
        end = snapshot()
        restarts = pool.restarts
    seconds = time.perf_counter() - t0
    return {
        "env_id": env_id,
        "episodes": played,
        "turns": turns,
        "warmup_episodes": warmup,
        "rss_warm_mb": {k: round(v, 1) for k, v in warm.items()},
        "rss_end_mb": {k: round(v, 1) for k, v in end.items()},
        "growth": {k: round(growth(warm[k], end[k]), 4) for k in warm},
        "seconds": round(seconds, 1),
        "episodes_per_s": round(played / seconds, 2),
        "worker_restarts": restarts,
    }


# -- the servers ------------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(host: str, port: int, method: str, path: str, body: bytes | None, headers: dict) -> int:
    import http.client

    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers)
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


def _wait_port(port: int, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError("the server did not start listening")


def shop_traffic(rng: random.Random) -> tuple[str, str, bytes | None, dict]:
    """One request to the shop: about half valid (goal pages, searches, items), half malformed."""
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    goal = rng.randrange(0, 500)
    if rng.random() < 0.5:
        return rng.choice(
            [
                ("GET", f"/fixed_{goal}", None, {}),
                ("POST", f"/fixed_{goal}", b"search_query=" + rng.choice([b"shoes", b"red+dress", b"laptop"]), form),
                ("GET", f"/search_results/fixed_{goal}/{rng.randint(1, 3)}?q=shoes", None, {}),
            ]
        )
    junk = rng.choice(["%%%", "a" * 5000, "../../etc/passwd", "%C2%B2", "9" * 400, "%00"])
    return rng.choice(
        [
            ("GET", f"/search_results/fixed_{goal}/{junk}?q=shoes", None, {}),
            ("GET", f"/item_page/fixed_{goal}/B0NOSUCH/1?q=x", None, {}),
            ("GET", f"/fixed_{rng.randint(10**6, 10**9)}", None, {}),
            ("POST", f"/fixed_{goal}", junk.encode(), form),
            ("PUT", f"/fixed_{goal}", b"x", {}),
            ("GET", "//", None, {}),
            ("GET", f"/done/fixed_{goal}/{junk}", None, {}),
        ]
    )


def serve_traffic(rng: random.Random) -> tuple[str, str, bytes | None, dict]:
    """One request to ``agentgym serve``: about half valid chats (a few tokens), half malformed."""
    js = {"Content-Type": "application/json"}
    msg = [{"role": "user", "content": rng.choice(["hi", "go north", "what is 2+2?"])}]
    if rng.random() < 0.5:
        body = {"model": "tiny", "messages": msg, "max_tokens": rng.randint(1, 8), "temperature": 0.7}
        return "POST", "/v1/chat/completions", json.dumps(body).encode(), js
    bad: list[Any] = [
        b"{not json",
        json.dumps({"model": "tiny"}).encode(),
        json.dumps({"model": "tiny", "messages": "hello"}).encode(),
        json.dumps({"model": "tiny", "messages": msg, "max_tokens": -5}).encode(),
        json.dumps({"model": "tiny", "messages": msg, "max_tokens": "many"}).encode(),
        json.dumps({"model": "tiny", "messages": msg, "temperature": "hot"}).encode(),
        json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "word " * 20000}]}).encode(),
        json.dumps({"model": "tiny", "messages": [{"role": 3, "content": None}]}).encode(),
    ]
    choice = rng.randrange(len(bad) + 2)
    if choice == len(bad):
        return "GET", "/v1/no/such/route", None, {}
    if choice == len(bad) + 1:
        return "GET", "/v1/models", None, {}
    return "POST", "/v1/chat/completions", bad[choice], js


def server_soak(
    name: str, argv: list[str], port: int, traffic: Callable[[random.Random], tuple], seconds: float, *, seed: int = 0
) -> dict[str, Any]:
    """Start ``python -m agentgym ARGV`` and send it ``traffic`` for ``seconds``; statuses and RSS."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentgym", *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        _wait_port(port, proc)
        rng = random.Random(seed)
        statuses: Counter[int] = Counter()
        errors: Counter[str] = Counter()
        t0 = time.monotonic()
        warm = None
        while (elapsed := time.monotonic() - t0) < seconds:
            method, path, body, headers = traffic(rng)
            try:
                statuses[_request("127.0.0.1", port, method, path, body, headers)] += 1
            except OSError as exc:  # a dropped connection is a failure too
                errors[type(exc).__name__] += 1
            if warm is None and elapsed >= seconds / 10:
                warm = rss_mb(proc.pid)
        end = rss_mb(proc.pid)
        alive = proc.poll() is None
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    total = sum(statuses.values())
    return {
        "server": name,
        "command": "agentgym " + " ".join(argv),
        "seconds": round(seconds, 1),
        "requests": total,
        "requests_per_s": round(total / seconds, 1),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "five_xx": sum(v for k, v in statuses.items() if k >= 500),
        "connection_errors": dict(errors),
        "rss_warm_mb": round(warm or end, 1),
        "rss_end_mb": round(end, 1),
        "growth": round(growth(warm or end, end), 4),
        "alive_at_end": alive,
    }


def servers_soak(seconds: float, *, data_dir: str | None = None) -> list[dict[str, Any]]:
    """Both servers, one after the other, ``seconds`` each."""
    from agentgym.models.tiny import make_tiny_model

    out = []
    port = _free_port()
    shop = ["webshop", "serve", "--port", str(port)] + (["--data-dir", data_dir] if data_dir else [])
    out.append(server_soak("webshop", shop, port, shop_traffic, seconds))
    with tempfile.TemporaryDirectory() as tmp:
        model, tok = make_tiny_model(seed=0)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        port = _free_port()
        argv = ["serve", "--model", tmp, "--name", "tiny", "--port", str(port), "--device", "cpu"]
        out.append(server_soak("agentgym serve", argv, port, serve_traffic, seconds))
    return out


# -- records ----------------------------------------------------------------------------------------------------
def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("agentgym", "gymnasium", "torch", "transformers", "flask", "fastapi", "uvicorn"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            pass
    return out


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({cpu}), {platform.system()} {platform.release()}, load {os.getloadavg()[0]:.1f}"


def write_record(path: Path, part: str, value: Any, command: str) -> None:
    """Merge ``{part: {value, versions, date, machine, command}}`` into the record file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[part] = {
        "value": value,
        "versions": versions(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "command": command,
    }
    path.write_text(json.dumps(data, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    sp = sub.add_parser("pool", help="episodes through the async env pool, RSS before and after")
    sp.add_argument("--episodes", type=int, default=10_000, help="episodes per family")
    sp.add_argument("--warmup", type=int, default=0, help="episodes before the first RSS reading (default: 10%%)")
    sp.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    sp.add_argument("--episodes-for", nargs="*", default=[], metavar="FAMILY=N", help="per-family episode counts")
    sp.add_argument("--num-workers", type=int, default=2)
    sp.add_argument("--max-turns", type=int, default=10)
    sp = sub.add_parser("servers", help="mixed valid/invalid traffic to both servers, statuses and RSS")
    sp.add_argument("--seconds", type=float, default=600, help="per server")
    sp.add_argument("--data-dir", help="WebShop data folder (default: $AGENTGYM_DATA/webshop)")
    p.add_argument("--out", type=Path, default=RECORD, help="record file (parts are merged)")
    args = p.parse_args(argv)
    command = "python tools/soak.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.what == "pool":
        from agentgym.data import DataNotFoundError

        counts = {k: int(v) for k, v in (item.split("=", 1) for item in args.episodes_for)}
        results = {}
        for family in args.families:
            n = counts.get(family, args.episodes)
            try:
                r = pool_soak(
                    FAMILIES[family],
                    n,
                    warmup=min(n, args.warmup or max(1, n // 10, MIN_WARMUP.get(family, 0))),
                    num_workers=args.num_workers,
                    max_turns=args.max_turns,
                )
            except (DataNotFoundError, RuntimeError) as exc:
                if not isinstance(exc, DataNotFoundError) and "DataNotFoundError" not in str(exc):
                    raise
                print(f"{family}: skipped ({str(exc).splitlines()[0]})")
                continue
            # Each family keeps the command and date that measured it: a later run of some families merges into
            # the record instead of replacing the others' figures.
            r["command"] = command
            r["date"] = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            results[family] = r
            print(json.dumps(r), flush=True)
        previous = json.loads(args.out.read_text()).get("pool", {}).get("value", {}) if args.out.exists() else {}
        write_record(args.out, "pool", {**previous, **results}, command)
    else:
        results = servers_soak(args.seconds, data_dir=args.data_dir)
        for r in results:
            print(json.dumps(r), flush=True)
        write_record(args.out, "servers", results, command)
    print(f"record: {args.out}")
    bad = [r for r in (results.values() if isinstance(results, dict) else results) if _fails(r)]
    return 1 if bad else 0


def _fails(r: dict[str, Any]) -> bool:
    """Over the targets: RSS growth >= 10% (workers for the pool), any 5xx or dropped connection."""
    if "server" in r:
        return r["five_xx"] > 0 or bool(r["connection_errors"]) or r["growth"] >= 0.10 or not r["alive_at_end"]
    return r["growth"]["workers"] >= 0.10


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
