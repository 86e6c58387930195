"""A small OpenAI-compatible chat server over a transformers model (``/v1/chat/completions``, ``/v1/models``).

For serving a trained checkpoint to ``--agent openai:MODEL --base-url http://HOST:PORT/v1`` (or any
OpenAI client) and for tests that need a real HTTP server. Concurrent requests are micro-batched:
a worker thread takes every request waiting in the queue (up to ``max_batch``) that shares the same
sampling settings and answers them with **one** batched ``generate`` call, so N agents' requests of
one turn cost about one generation. Run it with::

    python -m agentgym.models.serve --model PATH_OR_ID [--host 127.0.0.1] [--port 8000] [--name NAME]

Stop strings are applied but left out of the returned text, as the OpenAI API does.
"""

from __future__ import annotations

import argparse
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from agentgym.models.generation import HFGenerator, chat_prompt_ids


@dataclass
class _Request:
    prompt: list[int]
    params: tuple
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: str | None = None


class ChatServer:
    """The server state: a model, its tokenizer, a request queue and the batching worker thread.

    Args:
        model, tokenizer: a loaded causal LM and tokenizer.
        name: the model id clients send (``/v1/models`` lists it; other names are accepted too).
        max_batch: most requests answered by one ``generate`` call.
        max_new_tokens_cap: upper bound on a request's ``max_tokens``.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        name: str = "agentgym",
        max_batch: int = 32,
        max_new_tokens_cap: int = 4096,
    ) -> None:
        self.generator = HFGenerator(model, tokenizer)
        self.tokenizer = tokenizer
        self.name = name
        self.max_batch = max_batch
        self.cap = max_new_tokens_cap
        self.queue: queue.Queue[_Request] = queue.Queue()
        self.batches: list[int] = []  # sizes of the generate calls made (for tests and logs)
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._loop, daemon=True, name="agentgym-serve-batcher")
        self._worker.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                first = self.queue.get(timeout=0.1)
            except queue.Empty:
                continue
            time.sleep(0.005)  # let the other requests of the same turn arrive
            batch, rest = [first], []
            while len(batch) < self.max_batch:
                try:
                    r = self.queue.get_nowait()
                except queue.Empty:
                    break
                (batch if r.params == first.params else rest).append(r)
            for r in rest:
                self.queue.put(r)
            max_new, temperature, top_p, stop, seed = first.params
            try:
                outs = self.generator.generate(
                    [r.prompt for r in batch],
                    max_new_tokens=max_new,
                    temperature=temperature,
                    top_p=top_p,
                    stop_strings=list(stop) or None,
                    seed=seed,
                )
                self.batches.append(len(batch))
                for r, o in zip(batch, outs):
                    r.result = o
            except Exception as exc:  # answer every waiting client with the error instead of hanging
                for r in batch:
                    r.error = f"{type(exc).__name__}: {exc}"
            for r in batch:
                r.done.set()

    def close(self) -> None:
        self._stop.set()
        self._worker.join(timeout=5)

    def chat(self, body: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """Answer one ``/v1/chat/completions`` request body; returns (JSON, HTTP status)."""
        messages = body.get("messages")
        if (
            not isinstance(messages, list)
            or not messages
            or not all(isinstance(m, dict) and "role" in m and isinstance(m.get("content"), str) for m in messages)
        ):
            return _error("'messages' must be a non-empty list of {role, content} objects with string content"), 400
        if int(body.get("n", 1) or 1) != 1:
            return _error("only n=1 is supported"), 400
        try:
            max_new = int(body.get("max_completion_tokens") or body.get("max_tokens") or 256)
            temperature = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
            top_p = float(body.get("top_p", 1.0) if body.get("top_p") is not None else 1.0)
        except (TypeError, ValueError):
            return _error("max_tokens, temperature and top_p must be numbers"), 400
        if max_new < 1 or temperature < 0 or not 0 < top_p <= 1:
            return _error("need max_tokens >= 1, temperature >= 0, 0 < top_p <= 1"), 400
        max_new = min(max_new, self.cap)
        stop = body.get("stop") or []
        stop = (stop,) if isinstance(stop, str) else tuple(str(s) for s in stop)
        seed = body.get("seed")
        seed = int(seed) if seed is not None else None
        msgs = [{"role": str(m["role"]), "content": m["content"]} for m in messages]
        prompt = chat_prompt_ids(self.tokenizer, msgs)
        req = _Request(prompt=prompt, params=(max_new, temperature, top_p, stop, seed))
        self.queue.put(req)
        req.done.wait()
        if req.error is not None:
            return _error(req.error, "server_error"), 500
        out = req.result
        text = out.text
        if out.finish_reason == "stop" and stop:
            cut = [text.find(s) for s in stop if s in text]
            if cut:
                text = text[: min(cut)]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": out.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": len(out.ids),
                "total_tokens": len(prompt) + len(out.ids),
            },
        }, 200


def _error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind}}


def create_app(server: ChatServer):
    """The Flask app exposing ``server``."""
    from flask import Flask, jsonify, request

    app = Flask("agentgym.serve")

    @app.get("/v1/models")
    def models():
        return jsonify({"object": "list", "data": [{"id": server.name, "object": "model", "owned_by": "agentgym"}]})

    @app.post("/v1/chat/completions")
    def chat():
        body = request.get_json(silent=True)
        if not isinstance(body, dict):
            return jsonify(_error("request body must be a JSON object")), 400
        if body.get("stream"):
            return jsonify(_error("streaming is not supported; send stream=false")), 400
        payload, status = server.chat(body)
        return jsonify(payload), status

    @app.get("/health")
    def health():
        return jsonify({"status": "ok"})

    return app


def _quiet_handler():
    from werkzeug.serving import WSGIRequestHandler

    class QuietHandler(WSGIRequestHandler):
        def log_request(self, *args: Any, **kwargs: Any) -> None:  # no access log lines in tests
            pass

    return QuietHandler


class ServerThread:
    """Run the server in a background thread (tests, notebooks): ``with ServerThread(model, tok) as url: ...``.

    Args:
        model, tokenizer: the model to serve; host/port: bind address (port 0 picks a free port);
        **kwargs: :class:`ChatServer` options.
    """

    def __init__(self, model: Any, tokenizer: Any, *, host: str = "127.0.0.1", port: int = 0, **kwargs: Any):
        from werkzeug.serving import make_server

        self.chat_server = ChatServer(model, tokenizer, **kwargs)
        self.http = make_server(
            host, port, create_app(self.chat_server), threaded=True, request_handler=_quiet_handler()
        )
        self.url = f"http://{host}:{self.http.server_port}/v1"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True, name="agentgym-serve-http")

    def start(self) -> str:
        self.thread.start()
        return self.url

    def stop(self) -> None:
        self.http.shutdown()
        self.thread.join(timeout=5)
        self.chat_server.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m agentgym.models.serve --model PATH``: serve until interrupted."""
    p = argparse.ArgumentParser(prog="python -m agentgym.models.serve", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="HF id, checkpoint folder, or smollm2")
    p.add_argument("--name", help="model id to report (default: the --model value)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--device")
    p.add_argument("--dtype")
    p.add_argument("--max-batch", type=int, default=32)
    args = p.parse_args(argv)
    from werkzeug.serving import make_server

    from agentgym.models.loading import load_model

    model, tokenizer = load_model(args.model, dtype=args.dtype, device=args.device)
    server = ChatServer(model, tokenizer, name=args.name or args.model, max_batch=args.max_batch)
    http = make_server(args.host, args.port, create_app(server), threaded=True)
    print(f"serving {server.name} at http://{args.host}:{http.server_port}/v1", flush=True)
    try:
        http.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
