"""The end-to-end flow (eval --suite -> submit -> build) and the rendered board; forged entries never get a badge."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentgym.cli import main as agentgym
from agentgym.leaderboard.archive import sha256_file
from agentgym.leaderboard.build import build
from agentgym.leaderboard.schema import SUBMISSION_SCHEMA
from tests.leaderboard.conftest import load, save

REPO = Path(__file__).resolve().parents[2]
XSS = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2">'


@pytest.fixture
def board(tmp_path, genuine_sokoban) -> Path:
    """A leaderboards/ folder with the published rows and one verified entry whose name is an XSS attempt."""
    root = tmp_path / "leaderboards"
    shutil.copytree(REPO / "leaderboards" / "reported", root / "reported")
    assert (
        agentgym(
            [
                "submit",
                str(genuine_sokoban),
                "--name",
                XSS,
                "--model",
                "tiny|model",
                "--model-size",
                "0.0001",
                "--method",
                "expert",
                "--method-type",
                "Scripted",
                "--entries",
                str(root / "entries"),
                "--workers",
                "1",
            ]
        )
        == 0
    )
    (entry,) = (root / "entries").iterdir()
    assert agentgym(["leaderboard", "verify", str(entry), "--full", "--mark", "--workers", "1"]) == 0
    build(root)
    return root


def test_new_user_flow_from_eval_to_the_built_board(tmp_path, capsys):
    out = tmp_path / "run"
    assert agentgym(["eval", "--suite", "frozenlake", "--agent", "expert", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "agentgym/FrozenLake-v0" in printed and "Success" in printed and "agentgym submit" in printed
    data = json.loads((out / "submission.json").read_text())
    assert data["suite"] == {"name": "frozenlake", "version": "1"} and data["agent"]["verified"] is False
    assert data["episodes"][0]["count"] == 100
    entries = tmp_path / "lb" / "entries"
    assert agentgym(["submit", str(out), "--name", "VI expert", "--entries", str(entries), "--workers", "1"]) == 0
    (entry,) = entries.iterdir()
    assert json.loads((entry / "submission.json").read_text())["agent"]["name"] == "VI expert"
    runnable = json.loads((entry / "submission.json").read_text())["agent"]["runnable"]
    assert runnable == {"spec": "expert", "kwargs": {}, "agent_name": "expert"}  # from --agent, re-runnable
    assert agentgym(["leaderboard", "build", "--root", str(tmp_path / "lb"), "--workers", "1"]) == 0
    readme = (tmp_path / "lb" / "README.md").read_text()
    # No one ran verify: the build's own full replay earns replay-verified (and nothing more without a rerun).
    assert "| 1 | VI expert | none |  | Scripted | replay-verified |" in readme
    assert (tmp_path / "lb" / "site" / "viewer" / f"{entry.name}.html").is_file()
    assert (tmp_path / "lb" / "site" / "records" / f"{entry.name}.html").is_file()


def test_submit_rejects_a_forged_run_and_writes_nothing(forge, tmp_path, capsys):
    sub = forge(lambda d, r: r[0]["steps"][0].__setitem__("reward", 9.0))
    code = agentgym(["submit", str(sub), "--entries", str(tmp_path / "entries"), "--sample", "100", "--workers", "1"])
    assert code == 1 and "REJECTED" in capsys.readouterr().out
    assert not (tmp_path / "entries").exists() or not any((tmp_path / "entries").iterdir())


def test_verify_exit_codes_and_json(submission, forge, capsys):
    assert agentgym(["leaderboard", "verify", str(submission), "--json", "--workers", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_readme_lists_reported_rows_with_badges_and_honest_status(board):
    readme = (board / "README.md").read_text()
    assert "Nothing has been reproduced at full scale yet" in readme
    assert readme.count("reported (SAPO)") == 40  # 20 rows x (ALFWorld, WebShop)
    assert "| 94.0±1.7 |" in readme  # SAPO 7B ALFWorld All
    assert "reported (SEED)" in readme and "reported (ERL)" in readme
    assert "verified" in readme
    assert "<script>" not in readme and "&lt;script&gt;" in readme
    assert "tiny\\|model" in readme  # a pipe cannot break the table
    assert json.loads((board / "schema" / "submission.schema.json").read_text()) == SUBMISSION_SCHEMA


def test_site_pages_escape_entry_text(board):
    site = board / "site"
    page = (site / "sokoban.html").read_text()
    assert "&lt;script&gt;window.__pwned" in page and "<script>window" not in page
    viewer = next((site / "viewer").glob("*.html")).read_text()
    assert "<script>window" not in viewer and "<img src=x" not in viewer
    chart = (site / "charts" / "sokoban.svg").read_text()
    assert chart.count("<rect") == 1 and "replay-verified" in chart  # the chart ranks verified rows only
    assert "data-source='replay-verified'" in page and "data-source='reported'" in page
    record = next((site / "records").glob("*.html")).read_text()
    assert "<script>window" not in record and "100 of 100 episodes, accepted" in record


def _tier(board: Path) -> str:
    out = build(board, workers=1)
    (tier,) = out["tiers"].values()
    return tier


def test_the_badge_comes_from_the_builds_full_replay(board):
    (entry,) = (board / "entries").iterdir()
    assert _tier(board) == "replay-verified"
    data = json.loads((entry / "submission.json").read_text())
    data["notes"] = "edited after verification"  # harmless: the badge is recomputed, not bound to a record
    (entry / "submission.json").write_text(json.dumps(data))
    assert _tier(board) == "replay-verified"
    (entry / "verification.json").unlink()  # the maintainer's record is informational only
    assert _tier(board) == "replay-verified"


def test_forged_entries_end_not_verified(board, tmp_path):
    (entry,) = (board / "entries").iterdir()
    pristine = tmp_path / "pristine"
    shutil.copytree(entry, pristine)

    def reset():
        shutil.rmtree(entry)
        shutil.copytree(pristine, entry)

    # 1. an edited step, everything else left alone (hashes redone so the files look consistent)
    data, records = load(entry)
    records[7]["steps"][0]["action"] = "up" if records[7]["steps"][0]["action"] != "up" else "down"
    save(entry, data, records, fix_results=False)
    assert _tier(board) == "submitted"
    reset()
    # 2. a consistent edit: a reward raised with totals and claimed results recomputed to match
    data, records = load(entry)
    records[3]["steps"][-1]["reward"] += 10.0
    save(entry, data, records)
    assert _tier(board) == "submitted"
    # 3. ... plus a hand-written verification record matching the forged files, claiming a full replay
    record = json.loads((pristine / "verification.json").read_text())
    record["content_sha256"] = "whatever the forger computes"
    record["submission_sha256"] = sha256_file(entry / "submission.json")
    (entry / "verification.json").write_text(json.dumps(record))
    assert _tier(board) == "submitted"
    # 4. a sampled mark: refused, and a sample that misses the edited episode earns nothing either
    assert agentgym(["leaderboard", "verify", str(entry), "--mark", "--workers", "1"]) == 2
    sampled = [
        s
        for s in range(50)
        if agentgym(["leaderboard", "verify", str(entry), "--sample", "3", "--seed", str(s), "--workers", "1"]) == 0
    ]
    assert sampled, "some 3-episode sample misses the one forged episode"
    assert _tier(board) == "submitted"
    reset()
    assert _tier(board) == "replay-verified"


def test_broken_entries_are_listed_not_fatal(board):
    bad = board / "entries" / "broken"
    bad.mkdir()
    (bad / "submission.json").write_text("{}")
    out = build(board)
    assert any(p.startswith("broken:") for p in out["problems"])
    assert "Entries that could not be shown or verified" in (board / "README.md").read_text()


def test_submit_requires_a_pinned_runnable_spec_or_logs_only(submission, tmp_path, capsys):
    unpinned = tmp_path / "unpinned.json"
    unpinned.write_text(json.dumps({"spec": "hf:Qwen/Qwen2.5-1.5B-Instruct", "kwargs": {}, "agent_name": "expert"}))
    entries = tmp_path / "entries"
    args = ["submit", str(submission), "--entries", str(entries), "--workers", "1", "--runnable"]
    assert agentgym([*args, str(unpinned)]) == 1
    err = capsys.readouterr().err
    assert "is not pinned" in err and "model.revision" in err and "logs_only" in err
    assert not entries.exists()
    pinned = tmp_path / "pinned.json"
    pinned.write_text(
        json.dumps(
            {
                "spec": "hf:Qwen/Qwen2.5-1.5B-Instruct",
                "kwargs": {"temperature": 0.4},
                "agent_name": "expert",
                "model": {"id": "Qwen/Qwen2.5-1.5B-Instruct", "revision": "989aa7980e4cf806f80c7fef2b1adb7bc71aa306"},
                "prompt_version": "1",
                "sampling": {"temperature": 0.4, "top_p": 1.0, "max_new_tokens": 512},
            }
        )
    )
    assert agentgym([*args, str(pinned)]) == 0
    logs_only = tmp_path / "logs_only.json"
    logs_only.write_text(json.dumps({"logs_only": True, "reason": "private weights", "agent_name": "expert"}))
    assert agentgym([*args, str(logs_only)]) == 1  # the entry exists now: submit never overwrites silently
    assert "already exists" in capsys.readouterr().err
    assert agentgym([*args, str(logs_only), "--force"]) == 0
    (entry,) = entries.iterdir()
    assert json.loads((entry / "submission.json").read_text())["agent"]["runnable"]["logs_only"] is True


def test_a_verdict_that_only_says_the_data_is_missing_is_not_cached(tmp_path, monkeypatch):
    """A build run once without ``AGENTGYM_DATA`` must not keep the ALFWorld entries unverified after the data
    is there: "the verifier lacks the data" is not a verdict on the entry. A real mismatch stays cached."""
    from agentgym.episodes import read_episodes, replay
    from agentgym.leaderboard.verify import cached_result

    log = next(Path("leaderboards/entries").glob("alfworld-*/episodes/ALFWorld-v0.jsonl.gz"))
    episode = next(iter(read_episodes(log)))
    monkeypatch.setenv("AGENTGYM_DATA", str(tmp_path / "no-data-here"))
    calls = []

    def missing_data() -> dict:
        calls.append(1)
        return {"ok": False, "errors": replay(episode).mismatches}

    cache = tmp_path / "cache"
    first = cached_result("leaderboard-verify", "k1", missing_data, cache)
    assert "DataNotFoundError" in first["errors"][0]
    again = cached_result("leaderboard-verify", "k1", missing_data, cache)
    assert len(calls) == 2 and not again["cached"] and not list(cache.glob("*.json"))

    def mismatch() -> dict:
        return {"ok": False, "errors": ["episodes/x.jsonl line 1: steps[0].observation differs"]}

    cached_result("leaderboard-verify", "k2", mismatch, cache)
    assert cached_result("leaderboard-verify", "k2", mismatch, cache)["cached"]


def test_rows_carry_the_standard_error_and_tokens_of_their_logged_episodes():
    """The board shows each entry's standard error (over its episodes) and tokens per episode beside its score."""
    from agentgym.leaderboard.table import Row, _table, episode_stats

    entry = Path(__file__).resolve().parents[2] / "leaderboards" / "entries"
    entry = entry / "sokoban-smollm2-135m-sft-3-epochs-gigpo-seed-1-c-2026-12-05"
    data = json.loads((entry / "submission.json").read_text())
    stats = episode_stats(entry, data)
    p = data["results"]["agentgym/Sokoban-v0"]["Success"] / 100  # 0.80 over 100 episodes
    assert stats["se"] == pytest.approx(100 * (p * (1 - p) / 99) ** 0.5)  # sample std / sqrt(n), in points
    assert 500 < stats["tokens"] < 5000  # a model agent's prompt + completion tokens per episode
    scripted = entry.parent / "sokoban-bfs-solver-expert-2026-12-02"
    assert episode_stats(scripted, json.loads((scripted / "submission.json").read_text()))["tokens"] is None
    row = Row("sokoban", "x", "m", 0.1, "RL", "RL", "rerun-verified", {"Success": 80.0}, rerun={"Success": 77.0})
    row.se, row.tokens = stats["se"], stats["tokens"]
    head, _, line, _ = _table([row], ["Success"], "Success", rerun=True)
    assert "| Success | s.e. (Success) | Tokens/ep. | Rerun (fresh seeds) |" in head
    assert f"| 80.0 | ±{stats['se']:.1f} | {stats['tokens']:,.0f} | Success 77.0 |" in line
