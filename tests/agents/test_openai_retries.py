"""``openai:`` agents against a local server that fails on purpose: transient failures are retried with
backoff (``Retry-After`` honoured), a lasting failure ends in one line, and the eval then resumes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("openai")

from agentgym import cli  # noqa: E402
from agentgym.agents.openai_agent import ModelServerError, OpenAIChat, retry_after_s  # noqa: E402
from agentgym.episodes import read_episodes  # noqa: E402


class FlakyServer:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 that plays a script of failures.

    ``script`` items, one per request, then ``ok`` forever: ``ok``, ``reset`` (close the connection without an
    answer), ``429`` (with ``Retry-After: 1``), or an HTTP status such as ``503``.
    """

    def __init__(self, script: list[str], answer: str = "<action>left</action>") -> None:
        self.script, self.answer, self.seen = list(script), answer, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length", 0)))
                with lock:
                    what = outer.script.pop(0) if outer.script else "ok"
                    outer.seen.append(what)
                if what == "reset":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if what != "ok":
                    body = json.dumps({"error": {"message": f"failing on purpose: {what}"}}).encode()
                    self.send_response(int(what))
                    if what == "429":
                        self.send_header("Retry-After", "1")
                else:
                    body = json.dumps(
                        {
                            "id": "x",
                            "object": "chat.completion",
                            "created": 0,
                            "model": "m",
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": outer.answer},
                                    "finish_reason": "stop",
                                }
                            ],
                            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
                        }
                    ).encode()
                    self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[FlakyServer]:
    srv = FlakyServer([])
    yield srv
    srv.close()


def _chat(url: str, **kw) -> tuple[OpenAIChat, list[float]]:
    chat = OpenAIChat("m", base_url=url, timeout=5, backoff_s=0.01, **kw)
    waits: list[float] = []
    chat._sleep = waits.append  # record the waits instead of sleeping
    return chat, waits


def test_transient_failures_are_retried_with_bounded_jittered_backoff(server):
    server.script = ["reset", "503", "500", "502"]
    chat, waits = _chat(server.url)
    out = chat.complete([[{"role": "user", "content": "hi"}]])
    assert out[0].text == "<action>left</action>"
    assert server.seen == ["reset", "503", "500", "502", "ok"] and chat.retries == 4
    assert len(waits) == 4 and all(0 <= w <= 0.01 * 2**i for i, w in enumerate(waits))


def test_retry_after_is_honoured(server):
    server.script = ["429"]
    chat, waits = _chat(server.url)
    assert chat.complete([[{"role": "user", "content": "hi"}]])[0].text
    assert waits == [1.0]
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25 and retry_after_s({}) is None


def test_a_request_the_server_refuses_is_not_retried(server):
    import openai

    server.script = ["400"]
    chat, waits = _chat(server.url)
    with pytest.raises(openai.BadRequestError):
        chat.complete([[{"role": "user", "content": "hi"}]])
    assert waits == [] and server.seen == ["400"]


def test_after_the_budget_one_line_then_the_eval_resumes(server, tmp_path, monkeypatch, capsys):
    """A server down for good stops the eval with one line; once it is back, the same command resumes."""
    monkeypatch.setattr(OpenAIChat, "__init__", _fast_init(OpenAIChat.__init__))
    log = tmp_path / "eval.jsonl"
    argv = ["eval", "--env", "agentgym/FrozenLake-v0", "--agent", "openai:m", "--base-url", server.url]
    argv += ["--episodes", "4", "--batch-size", "1", "--log", str(log), "--quiet"]
    # 1 turn per request; each FrozenLake episode here is a few turns: fail for good after 3 good requests
    server.script = ["ok", "ok", "ok"] + ["503"] * 1000
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "failed 3 times in a row (last: HTTP 503" in err
    done = len(read_episodes(log))
    server.script = []
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert len(read_episodes(log)) == 4 and (done == 0 or f"{done} episode(s) resumed" in out)


def _fast_init(init):
    def fast(self, *a, **kw):
        init(self, *a, **{**kw, "max_retries": 2, "backoff_s": 0.001})

    return fast


def test_the_budget_is_bounded(server):
    server.script = ["500"] * 10
    chat, waits = _chat(server.url, max_retries=3, max_backoff_s=0.02)
    with pytest.raises(ModelServerError, match=r"failed 4 times in a row \(last: HTTP 500"):
        chat.complete([[{"role": "user", "content": "hi"}]])
    assert len(waits) == 3 and max(waits) <= 0.02 and server.seen == ["500"] * 4
