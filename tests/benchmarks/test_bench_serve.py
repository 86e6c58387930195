"""Speed of ``agentgym serve``'s guards (not run by default).

Run: ``python -m pytest tests/benchmarks/test_bench_serve.py --benchmark-only -m "" -q``.

A prompt that cannot fit the model's context next to ``max_tokens`` must be refused with a 400 in
milliseconds, before any generation (a 72 KB prompt used to take 108 s and block every other
client; a 1 MB prompt never answered). Measured here against the tiny model (4096 positions) over HTTP on
127.0.0.1: a ~40 KB prompt (~8k tokens: tokenized, then refused) and a 1 MB prompt (refused from its byte
count, never tokenized). Target: each under 250 ms (median) on the shared 2-core box. Measured there at a load
average of ~16 (8 engineers' jobs): 40 KB 184 ms (22k tokens: tokenizing is most of it), 1 MB 79 ms; the
same guards against SmolLM2-135M (8192 positions): a 72 KB prompt (16k tokens) 193 ms, a 1 MB prompt 76 ms
(``tools/serve_probe.py``).
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from agentgym.models.serve import ServerThread  # noqa: E402
from agentgym.models.tiny import make_tiny_model  # noqa: E402

pytestmark = pytest.mark.benchmark
torch.set_num_threads(1)


@pytest.fixture(scope="module")
def url():
    model, tok = make_tiny_model(seed=0)
    with ServerThread(model, tok, name="tiny") as u:
        yield u


@pytest.mark.parametrize("size", ["40KB", "1MB"])
def test_bench_refuse_prompt_past_context(benchmark, url, size):
    content = "look around the room " * 2000 if size == "40KB" else "a b c d " * 131072
    body = {"model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 16}
    with httpx.Client(timeout=60) as http:

        def refuse():
            return http.post(url + "/chat/completions", json=body)

        r = benchmark(refuse)
    assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
    assert benchmark.stats.stats.median < 0.25
