"""``agentgym serve`` through the official ``openai`` client and raw HTTP, against a tiny model on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from agentgym.models.generation import HFGenerator, chat_prompt_ids  # noqa: E402
from agentgym.models.serve import ServerThread, main, vllm_command  # noqa: E402

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]
HI = [{"role": "user", "content": "search[wireless headphones] then click"}]


@pytest.fixture(scope="module")
def server(tiny):
    model, tok = tiny
    srv = ServerThread(model, tok, name="tiny", max_body_bytes=256 * 1024, max_tokens_cap=2048)
    with srv as url:
        yield srv, url


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server[1], api_key="none", max_retries=0)


def _local_greedy(tiny, messages, n_tokens):
    model, tok = tiny
    out = HFGenerator(model, tok).generate([chat_prompt_ids(tok, messages)], max_new_tokens=n_tokens, temperature=0)
    return out[0]


def test_non_stream_matches_the_model(client, tiny):
    r = client.chat.completions.create(model="tiny", messages=HI, max_tokens=12, temperature=0)
    ref = _local_greedy(tiny, HI, 12)
    assert r.object == "chat.completion" and r.model == "tiny" and len(r.choices) == 1
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == ref.text
    assert r.choices[0].finish_reason == ref.finish_reason
    assert r.usage.completion_tokens == len(ref.ids)
    assert r.usage.prompt_tokens == len(chat_prompt_ids(tiny[1], HI))
    assert [m.id for m in client.models.list().data] == ["tiny"]
    assert client.models.retrieve("tiny").id == "tiny"


def test_stream_gives_the_same_text_in_openai_chunks(client):
    # Seeded sampling (greedy text of a random tiny model is all newlines): the same seed, the same tokens.
    full = client.chat.completions.create(model="tiny", messages=HI, max_tokens=20, temperature=1.0, seed=5)
    assert full.choices[0].message.content.strip()
    chunks = list(
        client.chat.completions.create(
            model="tiny",
            messages=HI,
            max_tokens=20,
            temperature=1.0,
            seed=5,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [full.choices[0].finish_reason]
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1  # incremental, not one blob
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens


def test_raw_sse_framing(server):
    body = {"model": "tiny", "messages": HI, "max_tokens": 5, "temperature": 0, "stream": True}
    with httpx.stream("POST", server[1] + "/chat/completions", json=body, timeout=60) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        raw = resp.read().decode()
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[len("data: ") :]) for e in events[:-1]]
    assert all("usage" not in c for c in chunks)  # no include_usage: no usage key (as the OpenAI API)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(set(c["choices"][0]["delta"]) == {"content"} for c in chunks[1:-1])
    assert chunks[-1]["choices"][0]["delta"] == {} and chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")


def test_a_client_that_goes_away_frees_its_rows(server):
    srv, url = server
    engine = srv.chat_server.engine
    before = engine.cancelled_rows
    # Greedy text of the tiny model never reaches EOS: without the cancel this would decode 2000 tokens.
    body = {"model": "tiny", "messages": HI, "max_tokens": 2000, "temperature": 0, "stream": True}
    with httpx.stream("POST", url + "/chat/completions", json=body, timeout=60) as resp:
        for line in resp.iter_lines():  # until the first content token: the request is being decoded
            if line.startswith("data: ") and '"delta":{"content":"' in line:
                break
    for _ in range(3000):  # the stream is closed: the engine drops the rows at its next turn
        if engine.cancelled_rows > before:
            break
        threading.Event().wait(0.01)
    assert engine.cancelled_rows == before + 1


def test_concurrent_streams_and_completions_are_batched(server, client):
    from concurrent.futures import ThreadPoolExecutor

    srv, _ = server
    before = len(srv.chat_server.batches)

    def one(i):
        kw = dict(model="tiny", messages=[{"role": "user", "content": f"go {i}"}], max_tokens=6, temperature=0)
        if i % 2:
            return "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **kw))
        return client.chat.completions.create(**kw).choices[0].message.content

    with ThreadPoolExecutor(8) as pool:
        first = list(pool.map(one, range(8)))
    alone = [one(i) for i in range(8)]
    assert first == alone  # greedy: batching with others changes nothing
    assert max(srv.chat_server.batches[before:]) > 1


def test_n2_and_seed(client):
    kw = dict(model="tiny", messages=HI, max_tokens=10, temperature=1.0, n=2, seed=11)
    a = client.chat.completions.create(**kw)
    b = client.chat.completions.create(**kw)
    assert [c.index for c in a.choices] == [0, 1]
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]
    assert a.choices[0].message.content != a.choices[1].message.content
    streamed = list(client.chat.completions.create(stream=True, **kw))
    texts = ["", ""]
    for c in streamed:
        for ch in c.choices:
            texts[ch.index] += ch.delta.content or ""
    assert texts == [c.message.content for c in a.choices]


def test_logprobs_are_the_models(client, tiny):
    model, tok = tiny
    r = client.chat.completions.create(
        model="tiny", messages=HI, max_tokens=6, temperature=0, logprobs=True, top_logprobs=3
    )
    content = r.choices[0].logprobs.content
    assert len(content) >= 1 and all(len(t.top_logprobs) == 3 for t in content)
    # Greedy: each token is its step's most likely one, and the first matches a forward pass of the prompt.
    assert all(
        t.token == t.top_logprobs[0].token and t.logprob == pytest.approx(t.top_logprobs[0].logprob) for t in content
    )
    with torch.no_grad():
        logits = model(torch.tensor([chat_prompt_ids(tok, HI)])).logits[0, -1]
    expected = torch.log_softmax(logits.float(), -1).max().item()
    assert content[0].logprob == pytest.approx(expected, abs=1e-4)
    assert "".join(bytes(t.bytes).decode("utf-8", "replace") for t in content).startswith(r.choices[0].message.content)


def test_stop_string_and_text_parts(client):
    kw = dict(model="tiny", max_tokens=24, temperature=1.0, seed=3)
    base = client.chat.completions.create(messages=HI, **kw)
    text = base.choices[0].message.content
    stop = text[len(text) // 2 : len(text) // 2 + 2]
    assert stop.strip(), f"pick another seed: the sampled text is too plain for this test: {text!r}"
    parts = [{"role": "user", "content": [{"type": "text", "text": HI[0]["content"]}]}]
    cut = client.chat.completions.create(messages=parts, stop=[stop], **kw)
    assert cut.choices[0].message.content == text[: text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    streamed = client.chat.completions.create(messages=HI, stop=stop, stream=True, **kw)
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == text[: text.index(stop)]


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": [{"type": "function", "function": {"name": "f g"}}]}, "tools[0].function.name"),
        ({"functions": [{"name": "f"}]}, "functions"),
        ({"tool_choice": "auto"}, "tool_choice"),
        ({"frequency_penalty": 0.5}, "frequency_penalty"),
        ({"logit_bias": {"5": 10}}, "logit_bias"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"bogus_option": 1}, "bogus_option"),
        ({"n": "abc"}, "n"),
        ({"n": True}, "n"),
        ({"seed": "x"}, "seed"),
        ({"stop": 5}, "stop"),
        ({"temperature": "0.5"}, "temperature"),
        ({"temperature": 3}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 10_000}, "max_tokens"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"stream_options": {"include_usage": True}}, "stream_options"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "messages[0].content",
        ),
        ({"messages": [{"role": "user", "content": "x", "name": "bob"}]}, "messages[0].name"),
    ],
)
def test_unsupported_or_mistyped_parameter_is_a_400_naming_it(client, extra, param):
    body = {"model": "tiny", "messages": HI, "max_tokens": 4, **extra}
    messages = body.pop("messages")
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=body.pop("model"), messages=messages, extra_body=body)
    assert err.value.body["param"] == param
    assert (
        param.split(".")[-1].split("[")[0] in err.value.body["message"] or "unrecognized" in err.value.body["message"]
    )


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_rejected(server, literal):
    raw = '{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "temperature": ' + literal + "}"
    r = httpx.post(server[1] + "/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "temperature"


def test_unknown_model_or_route_is_a_404(client, server):
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="gpt-9", messages=HI, max_tokens=2)
    assert err.value.body["param"] == "model" and "'tiny'" in err.value.body["message"]
    r = httpx.post(server[1] + "/completions", json={"model": "tiny", "prompt": "hi"})
    assert r.status_code == 404 and "message" in r.json()["error"]


def test_prompt_past_the_context_is_a_400_before_generation(server, client):
    srv, _ = server
    before = list(srv.chat_server.batches)
    words = "look around the room " * 2000  # ~8k tokens: past the tiny model's 4096 positions, under the body cap
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": words}], max_tokens=8)
    assert err.value.body["param"] == "messages" and "context length" in err.value.body["message"]
    # Within the context, but not with room for max_tokens.
    n_prompt = len(chat_prompt_ids(srv.chat_server.tokenizer, [{"role": "user", "content": "hi"}]))
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hi"}],
            max_tokens=srv.chat_server.context - n_prompt + 1,
        )
    assert srv.chat_server.batches == before  # nothing reached the engine


def test_body_cap(server):
    url = server[1] + "/chat/completions"
    big = json.dumps({"model": "tiny", "messages": [{"role": "user", "content": "x" * 300_000}]})
    r = httpx.post(url, content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413

    def chunked():  # no Content-Length: counted as it arrives
        for i in range(0, len(big), 65536):
            yield big[i : i + 65536].encode()

    r = httpx.post(url, content=chunked(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert httpx.get(server[1] + "/models").status_code == 200


def test_fuzz_no_5xx_and_still_answering(tiny):
    """Random, mistyped and malformed bodies: every answer is < 500, and a valid request still works after."""
    import random

    model, tok = tiny
    rng = random.Random(0)
    values = [
        None,
        True,
        False,
        0,
        1,
        -1,
        2,
        7,
        2**70,
        -(2**70),
        0.5,
        1e308,
        -0.0,
        "",
        "x",
        "1",
        "\x00",
        [],
        [1],
        ["a", "b"],
        {},
        {"type": "text"},
        {"include_usage": True},
        [[[[]]]],
        "a" * 3000,
    ]
    keys = [
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "n",
        "stop",
        "seed",
        "logprobs",
        "top_logprobs",
        "stream",
        "stream_options",
        "tools",
        "user",
        "presence_penalty",
        "junk",
    ]

    def message():
        return rng.choice(
            [
                {
                    "role": "user",
                    "content": rng.choice(["hi", "", "\u00e9\U0001f600", [{"type": "text", "text": "hi"}]]),
                },
                {"role": rng.choice(["user", "system", "assistant", "tool", 3]), "content": rng.choice(values)},
                {"role": "user"},
                rng.choice(values),
            ]
        )

    bodies: list[str | bytes] = []
    for _ in range(150):
        body = {
            "model": rng.choice(["tiny", "tiny", "other", 5]),
            "messages": [message() for _ in range(rng.randint(0, 3))],
            "max_tokens": rng.choice([1, 3, 8]),
        }
        for k in rng.sample(keys, rng.randint(0, 4)):
            body[k] = rng.choice(values)
        bodies.append(json.dumps(body))
    bodies += [
        b"",
        b"{",
        b"[]",
        b"null",
        b'"x"',
        b"\xff\xfe",
        b"{" * 5000 + b"}" * 5000,
        b'{"n": ' + b"9" * 5000 + b"}",
        json.dumps({"model": "tiny", "messages": HI, "max_tokens": 2}).encode("utf-16"),
    ]
    with ServerThread(model, tok, name="tiny", max_tokens_cap=8, max_batch=4) as url:
        with httpx.Client(timeout=60) as http:
            for body in bodies:
                stream = b'"stream": true' in (body if isinstance(body, bytes) else body.encode())
                r = http.post(url + "/chat/completions", content=body, headers={"content-type": "application/json"})
                assert r.status_code < 500, (body[:200], r.status_code, r.text[:300])
                if r.status_code == 200 and not stream:
                    assert r.json()["object"] == "chat.completion"
            valid = json.dumps({"model": "tiny", "messages": HI, "max_tokens": 2})
            for ctype in ("text/plain", "application/x-www-form-urlencoded", ""):
                r = http.post(url + "/chat/completions", content=valid, headers={"content-type": ctype})
                assert r.status_code < 500
            assert http.get(url + "/chat/completions").status_code == 405
            ok = http.post(url + "/chat/completions", json={"model": "tiny", "messages": HI, "max_tokens": 3})
            assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["role"] == "assistant"


def test_serve_command_and_eval_end_to_end(tmp_path, tiny):
    """`agentgym serve` in its own process, `agentgym eval --agent openai:...` against it."""
    from agentgym.cli import main as cli_main

    model, tok = tiny
    folder = tmp_path / "tiny"
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "agentgym",
        "serve",
        "--model",
        str(folder),
        "--name",
        "tiny",
        "--port",
        "0",
        "--device",
        "cpu",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        line = proc.stdout.readline()
        while line and not line.startswith("serving "):
            line = proc.stdout.readline()
        assert line.startswith("serving tiny at http://127.0.0.1:"), line
        url = line.split(" at ")[1].strip()
        log = tmp_path / "eval.jsonl"
        args = [
            "eval",
            "--env",
            "agentgym/EchoBandit-v0",
            "--agent",
            "openai:tiny",
            "--base-url",
            url,
            "--episodes",
            "3",
            "--max-new-tokens",
            "6",
            "--temperature",
            "0",
            "--quiet",
            "--log",
            str(log),
        ]
        assert cli_main(args) == 0
        episodes = [json.loads(x) for x in log.read_text().splitlines()]
        assert len(episodes) == 3 and all(ep["steps"] for ep in episodes)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_vllm_engine_builds_vllms_command_and_says_when_missing(tmp_path, capfd):
    import argparse

    args = argparse.Namespace(
        model="Qwen/Qwen2.5-0.5B-Instruct", name=None, host="127.0.0.1", port=8000, dtype="bfloat16"
    )
    assert vllm_command(args, ["--gpu-memory-utilization", "0.5"]) == [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen2.5-0.5B-Instruct",
        "--served-model-name", "Qwen/Qwen2.5-0.5B-Instruct", "--host", "127.0.0.1", "--port", "8000",
        "--dtype", "bfloat16", "--gpu-memory-utilization", "0.5",
    ]  # fmt: skip
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(SystemExit, match="vLLM is not installed.*--engine hf"):
            main(["--model", "m", "--engine", "vllm"])
    with pytest.raises(SystemExit, match="only apply to --engine hf"):
        main(["--model", "m", "--engine", "vllm", "--max-batch", "4"])
    # With a vllm package importable, the command becomes vLLM's server (a stand-in records its argv).
    fake = tmp_path / "vllm" / "entrypoints" / "openai"
    fake.mkdir(parents=True)
    for d in (tmp_path / "vllm", tmp_path / "vllm" / "entrypoints", fake):
        (d / "__init__.py").write_text("")
    (fake / "api_server.py").write_text("import json, sys\nprint('ARGV', json.dumps(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    out = subprocess.run(
        [sys.executable, "-m", "agentgym", "serve", "--engine", "vllm", "--model", "m", "--port", "8123", "--", "--enforce-eager"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    argv = json.loads(out.stdout.split("ARGV ", 1)[1])
    assert argv == [
        "--model",
        "m",
        "--served-model-name",
        "m",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
        "--enforce-eager",
    ]


def test_module_entry_point_help():
    out = subprocess.run(
        [sys.executable, "-m", "agentgym.models.serve", "--help"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0 and "--engine" in out.stdout and "127.0.0.1" in out.stdout


def test_streamed_text_equals_the_whole_decode_cut_at_the_stop(tiny):
    """Random token sequences (half characters, specials) and stop strings: the deltas add up to the text."""
    import random

    from agentgym.models.serve import TextAssembler

    tok = tiny[1]
    rng = random.Random(0)
    for _ in range(500):
        ids = [rng.randrange(len(tok)) for _ in range(rng.randint(1, 30))]
        full = tok.decode(ids, skip_special_tokens=True)
        stop: tuple[str, ...] = ()
        if full and rng.random() < 0.7:
            a = rng.randrange(len(full))
            stop = (full[a : a + rng.randint(1, 4)], "zzq")
        asm = TextAssembler(tok, stop)
        streamed = "".join(asm.add(t) for t in ids) + asm.finish()
        hits = [full.find(s) for s in stop if s in full]
        assert streamed == (full[: min(hits)] if hits else full), (ids, stop)
        assert asm.stopped == bool(hits)
