"""``agentgym serve``: an OpenAI-compatible chat server for a model, on vLLM or on the built-in engine.

::

    agentgym serve --model ID_OR_PATH [--engine hf|vllm] [--host 127.0.0.1] [--port 8000] [--name NAME]
    python -m agentgym.models.serve --model ID_OR_PATH ...        # the same command

``--engine vllm`` runs vLLM's own OpenAI server (``python -m vllm.entrypoints.openai.api_server``) with the
same model, name, host and port; flags after ``--`` go to vLLM unchanged. ``--engine hf`` (the default, for
CPUs and anyone without vLLM) serves a transformers model with the built-in engine
(:mod:`agentgym.models.serving_engine`: batched, time-sliced generation) behind this module's HTTP layer:
``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /health``. Point ``--agent openai:NAME --base-url
http://HOST:PORT/v1`` (or any OpenAI client) at it.

Why FastAPI + uvicorn + pydantic: the OpenAI API is a JSON schema plus server-sent events, and this stack is
what vLLM, SGLang and transformers' own ``serve`` speak it with: pydantic models make every parameter
type-checked inside request validation (:mod:`agentgym.models.openai_schema`), FastAPI maps them to routes and
error handlers, and uvicorn is a production ASGI server whose event loop holds many slow streaming clients
without a thread each (Flask's development server, used before, is neither production-grade nor async).

Supported: ``messages`` (string or text-part content), ``max_tokens``/``max_completion_tokens``,
``temperature``, ``top_p``, ``n``, ``stop`` (left out of the returned text, as the OpenAI API does), ``seed``,
``logprobs``/``top_logprobs``, ``stream`` (+ ``stream_options.include_usage``), and OpenAI ``tools`` with
``tool_choice`` (auto, none, required, a named function) and ``parallel_tool_calls``: tools go into the prompt
through the model's chat template (or a fallback system block), and replies in the ``<tool_call>{json}</tool_call>``
format come back as ``tool_calls`` with ``finish_reason`` "tool_calls" (:mod:`agentgym.models.tool_calls`;
with tools, a streamed choice arrives in one delta when it ends). Anything else (legacy ``functions``,
penalties, ...) is a 400 that names the parameter. Guards: the body is capped (``--max-body-bytes``, 413), a
prompt that leaves no room for ``max_tokens`` in the model's context is a 400 before any generation, and the
engine serves requests in bounded slices so one huge request never holds up the others. It binds 127.0.0.1
unless told otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import sys
import threading
import time
from typing import Any

from agentgym.models.chat_server import (  # noqa: F401  (public API here too)
    DEFAULT_MAX_BODY,
    ChatServer,
    TextAssembler,
    TokenText,
)


def _need_serve_extra():
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        from gymnasium.error import DependencyNotInstalled

        raise DependencyNotInstalled(
            f'the model server needs FastAPI and uvicorn ({exc}): pip install "agentgym[serve]"'
        ) from exc


def create_app(server: ChatServer):
    """The FastAPI app serving ``server`` (see :mod:`agentgym.models.openai_http`)."""
    _need_serve_extra()
    from agentgym.models.openai_http import build_app

    return build_app(server)


def _body_limit(app: Any, limit: int):
    from agentgym.models.openai_http import BodyLimit

    return BodyLimit(app, limit)


# -- running it ------------------------------------------------------------------------------------------------
def _uvicorn_server(app: Any, *, log_level: str = "warning", access_log: bool = False):
    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, access_log=access_log, lifespan="off", timeout_keep_alive=30)
    return uvicorn.Server(config)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


class ServerThread:
    """Run the server in a background thread (tests, notebooks): ``with ServerThread(model, tok) as url: ...``.

    Args:
        model, tokenizer: the model to serve; host/port: bind address (port 0 picks a free port);
        **kwargs: :class:`ChatServer` options.
    """

    def __init__(self, model: Any, tokenizer: Any, *, host: str = "127.0.0.1", port: int = 0, **kwargs: Any):
        _need_serve_extra()
        self.chat_server = ChatServer(model, tokenizer, **kwargs)
        app = _body_limit(create_app(self.chat_server), self.chat_server.max_body_bytes)
        self.http = _uvicorn_server(app)
        self.sock = _bind(host, port)
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{self.sock.getsockname()[1]}/v1"
        self.thread = threading.Thread(
            target=self.http.run, kwargs={"sockets": [self.sock]}, daemon=True, name="agentgym-serve-http"
        )

    def start(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.http.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the model server did not start")
            time.sleep(0.01)
        return self.url

    def stop(self) -> None:
        self.http.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
        self.chat_server.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def vllm_command(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """The command line that runs vLLM's own OpenAI server for ``args`` (``extra``: flags for vLLM)."""
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(args.model)]
    cmd += ["--served-model-name", args.name or str(args.model), "--host", args.host, "--port", str(args.port)]
    if args.dtype:
        cmd += ["--dtype", args.dtype]
    return cmd + list(extra)


HF_ONLY = ("device", "threads", "max_batch", "max_tokens_cap", "default_max_tokens", "max_body_bytes", "slice_tokens")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agentgym serve",
        description="Serve a model over the OpenAI chat-completions API (flags after -- go to vLLM).",
    )
    p.add_argument("--model", required=True, help="HF id, checkpoint folder, or smollm2")
    p.add_argument(
        "--engine", choices=["hf", "vllm"], default="hf", help="hf: built-in (CPU/GPU); vllm: vLLM's server"
    )
    p.add_argument("--name", help="model id clients send (default: the --model value)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (0 picks a free one; the address is printed)")
    p.add_argument("--dtype", help="float32 | bfloat16 | float16 | auto")
    hf = p.add_argument_group("built-in engine (--engine hf)")
    hf.add_argument("--device", help="cpu | cuda | cuda:N (default: CUDA when available)")
    hf.add_argument("--threads", type=int, help="CPU threads (default: OMP_NUM_THREADS, else the idle cores)")
    hf.add_argument("--max-batch", type=int, help="most choices decoded in one batch (default 32; also caps n)")
    hf.add_argument("--max-tokens-cap", type=int, help="largest max_tokens a request may ask for (default 4096)")
    hf.add_argument("--default-max-tokens", type=int, help="completion length when a request sets none (default 256)")
    hf.add_argument("--max-body-bytes", type=int, help=f"request body cap (default {DEFAULT_MAX_BODY})")
    hf.add_argument("--slice-tokens", type=int, help="tokens a batch decodes before the next one's turn (default 16)")
    return p


def main(argv: list[str] | None = None) -> int:
    """``agentgym serve`` / ``python -m agentgym.models.serve``: serve until interrupted."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    if args.engine == "vllm":
        given = [f"--{k.replace('_', '-')}" for k in HF_ONLY if getattr(args, k) is not None]
        if given:
            raise SystemExit(f"agentgym serve: {', '.join(given)} only apply to --engine hf; pass vLLM flags after --")
        if importlib.util.find_spec("vllm") is None:
            raise SystemExit(
                "agentgym serve: vLLM is not installed. Install it on a CUDA machine "
                '(pip install "agentgym[vllm]" or pip install vllm), or serve with the built-in engine: --engine hf'
            )
        cmd = vllm_command(args, extra)
        print("running:", " ".join(cmd), flush=True)
        os.execv(cmd[0], cmd)  # vLLM takes over this process (signals, exit code)
    if extra:
        raise SystemExit("agentgym serve: flags after -- are for vLLM (--engine vllm)")
    _need_serve_extra()
    from agentgym.models.loading import load_model
    from agentgym.models.threads import apply_threads

    try:
        apply_threads(args.threads)
    except ValueError as exc:
        raise SystemExit(f"agentgym serve: {exc}") from None
    model, tokenizer = load_model(args.model, dtype=args.dtype, device=args.device)
    options = {
        "max_batch": args.max_batch,
        "max_tokens_cap": args.max_tokens_cap,
        "default_max_tokens": args.default_max_tokens,
        "max_body_bytes": args.max_body_bytes,
        "slice_tokens": args.slice_tokens,
    }
    server = ChatServer(
        model, tokenizer, name=args.name or str(args.model), **{k: v for k, v in options.items() if v is not None}
    )
    sock = _bind(args.host, args.port)
    http = _uvicorn_server(_body_limit(create_app(server), server.max_body_bytes), log_level="info", access_log=True)
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"serving {server.name} at http://{shown}:{sock.getsockname()[1]}/v1", flush=True)
    try:
        http.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
