"""Data integrity: the sha256 manifest (check on load, `agentgym data verify`), loader errors, the download helper."""

from __future__ import annotations

import hashlib
import http.server
import json
import shutil
import threading

import pytest

from agentgym import data
from tests.conftest import require_data


# -- the download helper, against a local server (never the internet) -------------------------------------------
class _RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.payload``; honours ``Range: bytes=N-`` unless ``server.ignore_range``."""

    def do_GET(self):  # noqa: N802 (http.server's naming)
        body = self.server.payload  # type: ignore[attr-defined]
        self.server.ranges.append(self.headers.get("Range"))  # type: ignore[attr-defined]
        rng = self.headers.get("Range")
        if rng and not self.server.ignore_range:  # type: ignore[attr-defined]
            start = int(rng.removeprefix("bytes=").rstrip("-"))
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            body = body[start:]
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _RangeHandler)
    srv.payload, srv.ranges, srv.ignore_range = bytes(range(256)) * 4096, [], False  # 1 MiB
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _url(srv) -> str:
    return f"http://127.0.0.1:{srv.server_port}/file.bin"


def test_download_resumes_checks_and_shows_progress(server, tmp_path, capsys):
    digest = hashlib.sha256(server.payload).hexdigest()
    dest = tmp_path / "file.bin"
    (tmp_path / "file.bin.part").write_bytes(server.payload[:300_000])  # an interrupted earlier run
    assert data.download_file(_url(server), dest, sha256=digest) == dest
    assert dest.read_bytes() == server.payload and not (tmp_path / "file.bin.part").exists()
    assert server.ranges == ["bytes=300000-"]  # only the rest was fetched
    assert "file.bin" in capsys.readouterr().err  # the progress bar
    data.download_file(_url(server), dest, sha256=digest)  # present with the right sum: not fetched again
    assert len(server.ranges) == 1


def test_download_restarts_when_the_server_ignores_range(server, tmp_path):
    server.ignore_range = True
    dest = tmp_path / "file.bin"
    (tmp_path / "file.bin.part").write_bytes(b"stale bytes")
    data.download_file(_url(server), dest, sha256=hashlib.sha256(server.payload).hexdigest(), progress=False)
    assert dest.read_bytes() == server.payload


def test_download_with_the_wrong_sum_leaves_nothing(server, tmp_path):
    dest = tmp_path / "file.bin"
    with pytest.raises(data.DataFileError, match="sha256 is .* expected 0+"):
        data.download_file(_url(server), dest, sha256="0" * 64, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_download_failure_says_how_to_resume(tmp_path):
    with pytest.raises(ConnectionError, match="run the command again to resume"):
        data.download_file("http://127.0.0.1:9/x.bin", tmp_path / "x.bin", progress=False)


def test_download_of_a_file_url(tmp_path):
    src = tmp_path / "src.json"
    src.write_text("[1, 2]")
    out = data.download_file(src.as_uri(), tmp_path / "out" / "copy.json", progress=False)
    assert out.read_text() == "[1, 2]"


# -- the manifest ----------------------------------------------------------------------------------------------
def test_manifest_lists_the_files_the_envs_read():
    files = data.manifest()
    assert "webshop/documents_1k.jsonl" in files and "hotpotqa/hotpot_dev_distractor_sample100.json" in files
    assert "alfworld/train.tar.gz" in files
    assert sum(k.startswith("alfworld/json_2.1.1/valid_seen/") for k in files) == 140
    assert all(len(sha) == 64 and size > 0 for size, sha in files.values())


@pytest.fixture
def webshop_copy(tmp_path, monkeypatch):
    """A private data folder holding a copy of the WebShop files, with its own cache."""
    src = require_data("webshop", "documents_1k.jsonl").parent
    root = tmp_path / "data"
    shutil.copytree(src, root / "webshop")
    shutil.copy(src.parent / "MANIFEST.tsv", root)  # a copy of the published data set
    monkeypatch.setenv("AGENTGYM_DATA", str(root))
    monkeypatch.setenv("AGENTGYM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(data, "_verified", None)
    return root / "webshop"


def test_an_edited_product_title_is_caught_on_load_and_by_verify(webshop_copy, capsys):
    from agentgym.cli import main
    from agentgym.envs.webshop.catalog import load_catalog

    assert len(load_catalog(webshop_copy)) == 1000  # pristine copy: loads
    assert main(["data", "verify", "webshop"]) == 0
    path = webshop_copy / "documents_1k.jsonl"
    text = path.read_text(encoding="utf-8")
    first = json.loads(text.splitlines()[0])["product"]["Title"]
    path.write_text(text.replace(first, first[::-1], 1), encoding="utf-8")  # same size, different bytes
    with pytest.raises(data.DataFileError) as err:
        load_catalog(webshop_copy)
    assert str(path) in str(err.value) and "agentgym data prepare webshop --from DIR" in str(err.value)
    capsys.readouterr()
    assert main(["data", "verify", "webshop"]) == 1
    out = capsys.readouterr().out
    assert "documents_1k.jsonl differs from the published webshop data" in out and "1 differ" in out


def test_outside_a_published_copy_a_difference_is_a_warning(webshop_copy, monkeypatch):
    """Data from the official sources (no MANIFEST.tsv at the data root) may be a later release: warn, load."""
    from agentgym.envs.webshop.catalog import load_catalog

    (webshop_copy.parent / "MANIFEST.tsv").unlink()
    monkeypatch.setattr(data, "_warned", set())
    path = webshop_copy / "items_ins_v2_1000.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw[next(iter(raw))]["instruction"] = "edited"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.warns(data.DataIntegrityWarning, match="items_ins_v2_1000.json differs from the published"):
        assert len(load_catalog(webshop_copy)) == 1000


def test_the_load_check_hashes_once_per_size_and_mtime(webshop_copy, monkeypatch):
    path = webshop_copy / "items_ins_v2_1000.json"
    data.check_file(path, "webshop")
    monkeypatch.setattr(data, "_verified", None)  # a new process: the cache file remembers

    def no_hashing(*a, **k):
        raise AssertionError("hashed again")

    monkeypatch.setattr(data, "sha256_file", no_hashing)
    data.check_file(path, "webshop")
    data.check_file(path.resolve(), "webshop")


def test_files_outside_the_data_folder_are_not_checked(tmp_path):
    own = tmp_path / "documents_1k.jsonl"
    own.write_text("{}\n")
    data.check_file(own, "webshop")  # the user's own catalogue: no manifest entry applies


# -- loader errors name the file, the line and the remedy ---------------------------------------------------------
def test_truncated_or_corrupt_webshop_files_name_the_line(tmp_path):
    from agentgym.envs.webshop.catalog import load_catalog

    src = require_data("webshop", "documents_1k.jsonl").parent
    lines = (src / "documents_1k.jsonl").read_bytes().splitlines(keepends=True)
    folder = tmp_path / "shop"
    folder.mkdir()
    shutil.copy(src / "items_ins_v2_1000.json", folder)
    docs = folder / "documents_1k.jsonl"

    docs.write_bytes(b"".join(lines[:5]) + lines[5][:100])  # cut mid-record
    with pytest.raises(data.DataFileError, match=r"documents_1k.jsonl, line 6: truncated .*agentgym data prepare"):
        load_catalog(folder)
    docs.write_bytes(b"".join(lines[:2]) + b'{"id": "\xff\xfe"}\n' + b"".join(lines[3:10]))
    with pytest.raises(data.DataFileError, match=r"documents_1k.jsonl, line 3: not UTF-8"):
        load_catalog(folder)
    docs.write_bytes(b"".join(lines[:3]) + b"{oops}\n")
    with pytest.raises(data.DataFileError, match=r"line 4: not valid JSON"):
        load_catalog(folder)
    docs.write_bytes(b"".join(lines[:3]) + b'{"id": 1}\n')
    with pytest.raises(data.DataFileError, match=r"line 4: not a WebShop document"):
        load_catalog(folder)
    docs.write_bytes(b"".join(lines[:10]))
    raw = (src / "items_ins_v2_1000.json").read_bytes()
    (folder / "items_ins_v2_1000.json").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(data.DataFileError, match=r"items_ins_v2_1000.json, line \d+ column \d+: truncated"):
        load_catalog(folder)


def test_a_corrupt_alfworld_game_names_the_file_and_line(tmp_path):
    from agentgym.envs.alfworld.games import GameFileError, load_game

    src = sorted(require_data("alfworld", "json_2.1.1", "valid_seen").glob("*/*/game.tw-pddl"))[0]
    game = tmp_path / "game.tw-pddl"
    raw = src.read_bytes()
    game.write_bytes(raw[: len(raw) - 50])
    with pytest.raises(GameFileError, match=r"game.tw-pddl, line \d+ column \d+: truncated .*agentgym data prepare"):
        load_game(game)
    game.write_bytes(b"\n\n" + b"\x80" + raw)
    with pytest.raises(GameFileError, match=r"line 3: not UTF-8"):
        load_game(game)


def test_a_corrupt_hotpotqa_file_names_the_line(tmp_path):
    from agentgym.envs.hotpotqa.data import HotpotQAFormatError, load_questions

    path = tmp_path / "hotpot_x.json"
    path.write_text('[\n  {"_id": "a",\n   "question": ', encoding="utf-8")
    with pytest.raises(HotpotQAFormatError, match=r"hotpot_x.json, line 3 column \d+: truncated"):
        load_questions(path)


def test_verify_reports_a_missing_alfworld_game(tmp_path, monkeypatch, capsys):
    src = require_data("alfworld", "json_2.1.1", "valid_seen")
    root = tmp_path / "data"
    shutil.copytree(src, root / "alfworld" / "json_2.1.1" / "valid_seen")
    gone = sorted((root / "alfworld").glob("json_2.1.1/valid_seen/*/*/game.tw-pddl"))[3]
    gone.unlink()
    monkeypatch.setenv("AGENTGYM_DATA", str(root))
    monkeypatch.setenv("AGENTGYM_CACHE", str(tmp_path / "cache"))
    problems = data.verify(["alfworld"])
    assert len(problems) == 1 and str(gone) in problems[0] and "missing" in problems[0]
    assert "139 file(s) match" in capsys.readouterr().out


def test_data_families_are_registered_by_the_envs_package():
    import agentgym.envs  # noqa: F401  (registers them)

    assert set(data.FAMILIES) == {"alfworld", "webshop", "hotpotqa"}
    assert data._module("hotpotqa").__name__ == "agentgym.envs.hotpotqa.data"
    with pytest.raises(SystemExit, match="unknown data set 'nope'"):
        data._module("nope")
