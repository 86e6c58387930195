"""`agentgym eval --agent openai:MODEL --tool-calls` plays an env through an OpenAI-compatible server's tool calls.

The server here is a scripted model: it reads the FrozenLake map from the last message of the chat it gets
and answers with a ``move`` tool call along a shortest safe path. Played through tool calls, it must score
exactly what the env's expert scores through text actions.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytest.importorskip("openai", reason="the train extra (openai client) is not installed")

ROOT = Path(__file__).resolve().parents[2]
MOVES = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}


def shortest_move(board: str) -> str:
    rows = [r for r in board.splitlines() if r and set(r) <= set("P_OG")]
    cells = {(i, j): c for i, r in enumerate(rows) for j, c in enumerate(r)}
    start = next(p for p, c in cells.items() if c == "P")
    queue, first = deque([start]), {start: None}
    while queue:
        pos = queue.popleft()
        if cells[pos] == "G":
            while first[pos] is not None and first[pos][0] != start:
                pos = first[pos][0]
            return first[pos][1]
        for name, (di, dj) in MOVES.items():
            nxt = (pos[0] + di, pos[1] + dj)
            if cells.get(nxt) in ("_", "G") and nxt not in first:
                first[nxt] = (pos, name)
                queue.append(nxt)
    return "up"


class ScriptedToolModel(BaseHTTPRequestHandler):
    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ScriptedToolModel.requests.append(body)
        move = shortest_move(body["messages"][-1]["content"])
        reply = {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": f"call_{len(ScriptedToolModel.requests)}",
                                "type": "function",
                                "function": {"name": "move", "arguments": json.dumps({"direction": move})},
                            }
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def scripted_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedToolModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    ScriptedToolModel.requests = []
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def _eval(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "agentgym", "eval", "--env", "agentgym/FrozenLakeNotSlippery-v0", "--episodes", "6",
         "--quiet", *args],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out


@pytest.mark.timeout(600)
def test_tool_calls_score_what_the_expert_scores(scripted_server, tmp_path):
    tools_log, expert_log = tmp_path / "tools.jsonl", tmp_path / "expert.jsonl"
    _eval("--agent", "openai:scripted", "--tool-calls", "--base-url", scripted_server, "--log", str(tools_log))
    _eval("--agent", "expert", "--log", str(expert_log))
    tools = [json.loads(line) for line in tools_log.read_text().splitlines()]
    expert = [json.loads(line) for line in expert_log.read_text().splitlines()]
    assert len(tools) == len(expert) == 6
    for t, e in zip(tools, expert):
        assert t["seed"] == e["seed"]
        # both walk a shortest safe path (ties may differ): same length, same rewards, both solved
        assert [s["reward"] for s in t["steps"]] == [s["reward"] for s in e["steps"]]
        assert all(s["info"]["is_action_valid"] for s in t["steps"])
        assert t["steps"][-1]["info"]["success"] and e["steps"][-1]["info"]["success"]
    # what the server saw: the env's tool schema, and the episode as a tool-calling chat
    first = ScriptedToolModel.requests[0]
    later = next(r for r in ScriptedToolModel.requests if len(r["messages"]) > 2)
    assert [t["function"]["name"] for t in first["tools"]] == ["move"]
    assert first["messages"][0]["role"] == "system" and first["messages"][1]["role"] == "user"
    assert later["messages"][2]["tool_calls"][0]["function"]["name"] == "move"
    assert later["messages"][3]["role"] == "tool"


def test_tool_calls_need_an_openai_agent():
    out = subprocess.run(
        [sys.executable, "-m", "agentgym", "eval", "--env", "agentgym/Sokoban-v0", "--agent", "random", "--tool-calls"],
        capture_output=True, text=True, timeout=120, cwd=ROOT, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode != 0 and "--tool-calls needs --agent openai:MODEL" in out.stderr
