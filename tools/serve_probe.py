"""Probe ``agentgym serve``'s guards and fairness with SmolLM2-135M on CPU.

Run: ``OMP_NUM_THREADS=1 python tools/serve_probe.py``. Prints: the time to refuse a 72 KB and a 1 MB prompt
(past the 8192-token context), the 400s of mistyped parameters and NaN, and how long a small request takes
while a huge one (a ~2.7k-token prompt, 300 tokens to generate) is being decoded, against the small one alone.
"""

from __future__ import annotations

import threading
import time

import httpx
import torch

from agentgym.models.loading import load_model
from agentgym.models.serve import ServerThread


def main() -> None:
    torch.set_num_threads(1)
    model, tok = load_model("smollm2", device="cpu")
    srv = ServerThread(model, tok, name="smol")
    url = srv.start()
    print("context", srv.chat_server.context)
    http = httpx.Client(timeout=900)

    def post(body):
        t = time.perf_counter()
        r = http.post(url + "/chat/completions", json=body)
        return r, time.perf_counter() - t

    def user(text: str) -> list[dict]:
        return [{"role": "user", "content": text}]

    post({"model": "smol", "messages": user("Hi"), "max_tokens": 4})  # warm-up
    for label, content in [
        ("72 KB", "The quick brown fox jumps over the lazy dog. " * 1600),
        ("1 MB", "a b c d " * 131072),
    ]:
        r, dt = post({"model": "smol", "messages": user(content), "max_tokens": 16})
        print(f"{label} prompt -> {r.status_code} in {dt * 1000:.0f} ms: {r.json()['error']['message'][:100]}")
    for bad in [{"n": "abc"}, {"seed": "x"}, {"stop": 5}]:
        r, dt = post({"model": "smol", "messages": user("Hi"), "max_tokens": 4, **bad})
        print(bad, "->", r.status_code, f"in {dt * 1000:.0f} ms, param", r.json()["error"]["param"])
    raw = '{"model": "smol", "messages": [{"role": "user", "content": "Hi"}], "temperature": NaN}'
    r = http.post(url + "/chat/completions", content=raw, headers={"content-type": "application/json"})
    print("temperature NaN ->", r.status_code)

    big = {"model": "smol", "messages": user("Tell me a long story about a fox. " * 300), "max_tokens": 300}
    small = {"model": "smol", "messages": user("Say hi."), "max_tokens": 16, "temperature": 0}
    result = {}
    thread = threading.Thread(target=lambda: result.update(big=post({**big, "temperature": 0})))
    thread.start()
    time.sleep(1.0)
    r, dt = post(small)
    print(f"small request while the huge one runs: {r.status_code} in {dt:.2f} s")
    thread.join()
    r_big, dt_big = result["big"]
    print(f"huge request: {r_big.status_code} in {dt_big:.1f} s, usage {r_big.json()['usage']}")
    r, dt = post(small)
    print(f"small request alone: {dt:.2f} s")
    srv.stop()


if __name__ == "__main__":
    main()
