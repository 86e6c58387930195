"""Verification accepts genuine submissions and rejects forged ones, naming the episode and the field."""

from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest

from agentgym.leaderboard.archive import Limits
from agentgym.leaderboard.verify import verify
from tests.leaderboard.conftest import load, save


def errors_of(path, **kw) -> list[str]:
    report = verify(path, full=True, **kw)
    assert not report.ok, "a forged submission was accepted"
    return report.errors


def test_genuine_submission_is_accepted_with_full_replay(submission):
    report = verify(submission, full=True)
    assert report.ok, report.summary()
    assert report.episodes == 100 and report.replayed == 100
    assert report.results["agentgym/Sokoban-v0"]["Success"] == 100.0


def test_default_mode_replays_a_reproducible_sample(submission):
    a = verify(submission, sample=7, seed=11)
    assert a.ok and a.replayed == 7 and a.sample_seed == 11
    assert verify(submission, sample=7).sample_seed is not None


def test_genuine_random_frozenlake_run_replays(genuine_frozenlake):
    # Slippery moves and failures: replay must reproduce the env's own randomness from the seed.
    report = verify(genuine_frozenlake, full=True)
    assert report.ok, report.summary()
    assert 0 < report.results["agentgym/FrozenLake-v0"]["Success"] < 100


def test_changed_reward_is_caught_by_replay(forge):
    def mutate(data, records):
        records[3]["steps"][0]["reward"] += 5.0

    errs = errors_of(forge(mutate))
    assert any("line 4" in e and "steps[0].reward: logged" in e for e in errs), errs


def test_edited_observation_is_caught(forge):
    def mutate(data, records):
        records[10]["steps"][1]["observation"] = "######\n#P  X#\n######"

    errs = errors_of(forge(mutate))
    assert any("line 11" in e and "steps[1].observation differs" in e for e in errs), errs


def test_edited_success_flag_is_caught(genuine_frozenlake, tmp_path):
    sub = tmp_path / "fl"
    shutil.copytree(genuine_frozenlake, sub, ignore=shutil.ignore_patterns("logs"))
    data, records = load(sub)
    idx = next(i for i, r in enumerate(records) if not r["steps"][-1]["info"]["success"])
    records[idx]["steps"][-1]["info"]["success"] = True
    save(sub, data, records)  # results recomputed: only replay can tell
    errs = errors_of(sub)
    assert any(f"line {idx + 1}" in e and "info['success']: logged True, replayed False" in e for e in errs), errs


def test_missing_task_is_rejected(forge):
    errs = errors_of(forge(lambda d, r: r.pop(42)))
    assert any("1 task(s) of suite sokoban@1 missing" in e and "seed 100042" in e for e in errs), errs


def test_duplicated_task_is_rejected(forge):
    def mutate(data, records):
        records[5] = json.loads(json.dumps(records[4]))

    errs = errors_of(forge(mutate))
    assert any("line 6" in e and "duplicated task" in e and "line 5" in e for e in errs), errs


def test_foreign_task_is_rejected(forge):
    def mutate(data, records):
        records[0]["seed"] = 7

    errs = errors_of(forge(mutate))
    assert any("line 1" in e and "not a task of suite" in e for e in errs), errs


def test_wrong_env_version_is_rejected(forge):
    def mutate(data, records):
        data["envs"]["agentgym/Sokoban-v0"]["spec_hash"] = "0" * 16

    errs = errors_of(forge(mutate))
    assert any("spec_hash" in e and "another version of the env" in e for e in errs), errs


def test_other_env_id_is_rejected(forge):
    def mutate(data, records):
        ref = data["envs"].pop("agentgym/Sokoban-v0")
        data["envs"]["agentgym/Sokoban-v1"] = ref

    errs = errors_of(forge(mutate))
    assert any("Sokoban-v1" in e and "not an env of suite" in e for e in errs), errs
    assert any("lacks agentgym/Sokoban-v0" in e for e in errs), errs


def test_env_kwargs_override_is_rejected(forge):
    def mutate(data, records):
        records[2]["env_kwargs"] = {"dim_room": [5, 5]}

    errs = errors_of(forge(mutate))
    assert any("line 3" in e and "env_kwargs" in e for e in errs), errs


def test_results_that_do_not_match_the_logs_are_rejected(forge):
    def mutate(data, records):
        records[0]["steps"] = records[0]["steps"][:1]  # no longer solved, and not ended
        data["results"]["agentgym/Sokoban-v0"]["Success"] = 100.0

    errs = errors_of(forge(mutate, fix_results=False))
    assert any("line 1" in e and "never ended" in e for e in errs), errs


def test_inflated_results_are_rejected(forge):
    def mutate(data, records):
        data["results"]["agentgym/Sokoban-v0"]["Return"] = 99.0

    errs = errors_of(forge(mutate, fix_results=False))
    assert any("['Return']" in e and "claimed 99.0, recomputed from the logs 10.59" in e for e in errs), errs


def test_edited_totals_are_rejected(forge):
    def mutate(data, records):
        records[8]["totals"]["return"] = 50.0

    errs = errors_of(forge(mutate, fix_results=False))
    assert any("line 9" in e and "totals.return" in e for e in errs), errs


def test_truncated_gzip_log_is_rejected(submission):
    path = next((submission / "episodes").glob("*.gz"))
    blob = path.read_bytes()
    data, _ = load(submission)
    path.write_bytes(blob[: len(blob) // 2])
    data["episodes"][0]["sha256"] = __import__("hashlib").sha256(path.read_bytes()).hexdigest()
    (submission / "submission.json").write_text(json.dumps(data))
    errs = errors_of(submission)
    assert any("not a complete gzip file" in e and "truncated" in e for e in errs), errs


def test_truncated_last_record_is_rejected(submission):
    data, records = load(submission)
    text = "".join(json.dumps(r) + "\n" for r in records)
    save(submission, data, records, fix_results=False, raw=text[:-200].encode())
    errs = errors_of(submission)
    assert any("line 100" in e and "not a complete episode record" in e for e in errs), errs
    assert any("no newline" in e for e in errs), errs


def test_edited_log_without_new_hash_is_rejected(submission):
    path = next((submission / "episodes").glob("*.gz"))
    with gzip.open(path, "rb") as fh:
        raw = fh.read()
    with gzip.open(path, "wb") as fh:
        fh.write(raw.replace(b'"reward": -0.1', b'"reward": 0.0', 1))
    errs = errors_of(submission)
    assert any("sha256 differs" in e for e in errs), errs


def test_schema_violations_are_named(submission):
    data = json.loads((submission / "submission.json").read_text())
    data["agent"]["verified"] = True
    del data["agent"]["name"]
    (submission / "submission.json").write_text(json.dumps(data))
    errs = errors_of(submission)
    assert any("['agent']" in e and "'name' is a required property" in e for e in errs), errs
    assert any("['agent']['verified']" in e for e in errs), errs


def test_unknown_suite_is_rejected(forge):
    def mutate(data, records):
        data["suite"]["version"] = "9"

    errs = errors_of(forge(mutate))
    assert any("suite" in e and "version 1" in e for e in errs), errs


def test_not_json_and_missing_files(tmp_path):
    (tmp_path / "submission.json").write_text("{not json")
    assert any("not valid JSON" in e for e in errors_of(tmp_path))
    assert any("does not exist" in e for e in errors_of(tmp_path / "nope"))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert any("submission.json: missing" in e for e in errors_of(empty))


# -- archives ---------------------------------------------------------------------------------
def _zip_folder(folder: Path, dest: Path, prefix: str = "sub/") -> Path:
    with zipfile.ZipFile(dest, "w") as zf:
        for p in folder.rglob("*"):
            if p.is_file():
                zf.write(p, prefix + p.relative_to(folder).as_posix())
    return dest


def test_zip_and_tar_submissions_are_accepted(submission, tmp_path):
    assert verify(_zip_folder(submission, tmp_path / "s.zip"), full=True).ok
    tgz = tmp_path / "s.tar.gz"
    with tarfile.open(tgz, "w:gz") as tf:
        tf.add(submission, arcname="my-submission")
    assert verify(tgz, full=True).ok


def test_zip_with_path_outside_its_folder_is_rejected(submission, tmp_path):
    z = _zip_folder(submission, tmp_path / "evil.zip")
    with zipfile.ZipFile(z, "a") as zf:
        zf.writestr("../../escaped.txt", "boo")
    errs = errors_of(z)
    assert any("outside the submission folder" in e and "escaped.txt" in e for e in errs), errs
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_tar_with_absolute_path_or_link_is_rejected(submission, tmp_path):
    for name, kind in (
        ("/etc/evil", tarfile.REGTYPE),
        ("sub/../../evil", tarfile.REGTYPE),
        ("sub/link", tarfile.SYMTYPE),
    ):
        t = tmp_path / f"evil-{kind!r}-{len(name)}.tar"
        with tarfile.open(t, "w") as tf:
            tf.add(submission, arcname="sub")
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
                tf.addfile(info)
            else:
                info.size = 3
                tf.addfile(info, io.BytesIO(b"boo"))
        errs = errors_of(t)
        assert any(("absolute path" in e) or ("outside" in e) or ("is a link" in e) for e in errs), (name, errs)


def test_zip_symlink_is_rejected(submission, tmp_path):
    z = _zip_folder(submission, tmp_path / "link.zip")
    with zipfile.ZipFile(z, "a") as zf:
        info = zipfile.ZipInfo("sub/episodes/link")
        info.external_attr = 0o120777 << 16
        zf.writestr(info, "/etc/passwd")
    errs = errors_of(z)
    assert any("link or special file" in e for e in errs), errs


def test_symlinked_log_in_a_folder_is_rejected(submission, tmp_path):
    path = next((submission / "episodes").glob("*.gz"))
    real = tmp_path / "elsewhere.gz"
    shutil.move(path, real)
    os.symlink(real, path)
    errs = errors_of(submission)
    assert any("not a plain file" in e for e in errs), errs


def test_symlinked_episodes_folder_is_rejected(submission, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    shutil.move(submission / "episodes", elsewhere)
    os.symlink(elsewhere, submission / "episodes")
    errs = errors_of(submission)
    assert any("resolves outside the submission folder" in e for e in errs), errs


def test_very_large_files_are_rejected(submission, tmp_path):
    small = Limits(max_file_bytes=200_000, max_json_bytes=4_000, max_total_bytes=10**6)
    # A log that decompresses past the cap (a gzip bomb, in small).
    data, records = load(submission)
    save(
        submission,
        data,
        records,
        fix_results=False,
        raw=b"\n" * 300_000 + b"".join((json.dumps(r) + "\n").encode() for r in records),
    )
    errs = errors_of(submission, limits=small)
    assert any("size cap" in e for e in errs), errs
    # An oversized submission.json.
    data["notes"] = "x" * 3_900
    (submission / "submission.json").write_text(json.dumps(data))
    errs = errors_of(submission, limits=small)
    assert any("submission.json" in e and "cap" in e for e in errs), errs
    # An archive member over the cap, and too many members.
    z = tmp_path / "big.zip"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("sub/submission.json", "{}")
        zf.writestr("sub/episodes/huge.jsonl.gz", b"\0" * 300_000)
    assert any("over the" in e or "size cap" in e for e in errors_of(z, limits=small))
    many = tmp_path / "many.zip"
    with zipfile.ZipFile(many, "w") as zf:
        for i in range(70):
            zf.writestr(f"sub/f{i}", "x")
    assert any("more than the 64 allowed" in e for e in errors_of(many))


def test_parallel_replay_finds_the_same_problems(forge, monkeypatch):
    import agentgym.leaderboard.verify as v

    monkeypatch.setattr(v, "SERIAL_BUDGET_S", 0.0)  # use the process pool even for this small submission

    def mutate(data, records):
        records[20]["steps"][0]["reward"] = 3.0
        records[77]["steps"][0]["observation"] = "edited"

    sub = forge(mutate)
    one = verify(sub, full=True, workers=1)
    two = verify(sub, full=True, workers=2)
    assert not one.ok and sorted(one.errors) == sorted(two.errors)
    assert any("line 21" in e for e in two.errors) and any("line 78" in e for e in two.errors)


@pytest.mark.parametrize("fmt", ["zip", "tar"])
def test_damaged_archive_is_rejected(tmp_path, fmt):
    p = tmp_path / f"bad.{fmt}"
    p.write_bytes(b"PK\x03\x04garbage" if fmt == "zip" else b"\0" * 100)
    assert errors_of(p)


def test_entry_folders_of_long_names_that_differ_only_in_their_tails_never_collide():
    from agentgym.leaderboard.entry import entry_slug

    def slug(name: str) -> str:
        return entry_slug({"suite": {"name": "frozenlake-notslippery"}, "agent": {"name": name, "date": "2026-12-06"}})

    long = "SmolLM2-135M SFT with lessons and reflections+SEED seed {} (CPU table)"
    slugs = {slug(long.format(s)) for s in (1, 2, 3)}
    assert len(slugs) == 3 and all(s.endswith("-2026-12-06") and len(s) <= 30 + 41 + 11 for s in slugs)
    assert slug(long.format(1)) == slug(long.format(1))  # the same agent resubmitted replaces its own entry
    assert slug("Random agent") == "frozenlake-notslippery-random-agent-2026-12-06"  # short names as before
