"""agentgym envs served to the OpenEnv spec (openenv-core 0.3): ``agentgym openenv serve ENV_ID``.

OpenEnv's contract: an ``Environment`` with ``reset(seed, episode_id, **kw)``, ``step(action)`` and ``state``,
Pydantic ``Action``/``Observation`` models (the observation carries ``done``, ``reward`` and ``metadata``), served
by ``openenv.core.create_app`` (FastAPI: ``/reset``, ``/step``, ``/state``, ``/schema``, ``/health`` and the
``/ws`` WebSocket its clients use). :class:`AgentgymEnvironment` forwards to ``gym.make(env_id)`` unchanged:
the action is the env's text action, the observation its text, ``reward`` the step's reward, ``done``
terminated or truncated, ``metadata`` the step's ``info``. Each WebSocket session gets its own env (OpenEnv
makes one per session); :func:`make_app` bounds the number of sessions and reaps idle ones.

Clients: :class:`AgentgymClient` (OpenEnv's ``EnvClient`` with our types) or OpenEnv's ``GenericEnvClient``;
``reset`` takes ``seed`` and ``options`` (the env's reset options, e.g. ``{"split": "test", "index": 3}``).
"""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym

import agentgym  # noqa: F401  (registers the ids)

try:
    from openenv.core import EnvClient
    from openenv.core.client_types import StepResult
    from openenv.core.env_server.http_server import create_fastapi_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, State
except ImportError as exc:  # pragma: no cover - depends on the extra
    raise gym.error.DependencyNotInstalled(
        'OpenEnv is not installed; run `pip install "agentgym[openenv]"` and '
        "`pip install --no-deps openenv-core==0.3.0` (see docs/integrations.md)"
    ) from exc

from pydantic import Field


class TextAction(Action):
    """One text action of the env, exactly as ``env.step`` takes it (``up``, ``search[red shirt]``, ...)."""

    action: str = Field(description="the env's text action")


class TextObservation(Observation):
    """The env's text observation; ``reward``, ``done`` and ``metadata`` (the step's ``info``) as OpenEnv defines."""

    text: str = Field(default="", description="the env's observation text")


class EpisodeState(State):
    """OpenEnv's state (``episode_id``, ``step_count``) plus the env id, task id and return so far."""

    env_id: str = ""
    task_id: str | None = None
    total_reward: float = 0.0
    done: bool = False


def _jsonable(info: dict[str, Any]) -> dict[str, Any]:
    # info may hold numpy scalars or tuples; the wire format is JSON
    return json.loads(json.dumps(info, default=lambda o: o.item() if hasattr(o, "item") else str(o)))


class AgentgymEnvironment(Environment[TextAction, TextObservation, EpisodeState]):
    """A registered agentgym env behind OpenEnv's ``Environment`` interface (one instance per session)."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each instance owns its gym env; no state is shared

    def __init__(self, env_id: str, **make_kwargs: Any) -> None:
        super().__init__()
        self.env = gym.make(env_id, **make_kwargs)
        self._state = EpisodeState(env_id=env_id)
        self._closed = False

    def _check_open(self) -> None:
        # OpenEnv's reaper closes an idle session's env, but the session's socket may still send to it
        if self._closed:
            raise RuntimeError("this session was closed (idle too long, or the server is stopping); reconnect")

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> TextObservation:
        self._check_open()
        obs, info = self.env.reset(seed=seed, options=options)
        self._state = EpisodeState(
            env_id=self._state.env_id, episode_id=episode_id, step_count=0, task_id=info.get("task_id")
        )
        return TextObservation(text=obs, reward=0.0, done=False, metadata=_jsonable(info))

    def step(self, action: TextAction, timeout_s: float | None = None, **kwargs: Any) -> TextObservation:
        self._check_open()
        if self._state.done:
            raise RuntimeError("the episode is over; call reset() to start another")
        obs, reward, terminated, truncated, info = self.env.step(action.action)
        done = bool(terminated or truncated)
        self._state.step_count += 1
        self._state.total_reward += float(reward)
        self._state.done = done
        return TextObservation(text=obs, reward=float(reward), done=done, metadata=_jsonable(info))

    @property
    def state(self) -> EpisodeState:
        return self._state

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.env.close()


def make_app(env_id: str, *, max_sessions: int = 8, idle_timeout_s: float = 600.0, **make_kwargs: Any):
    """The FastAPI app serving ``env_id`` to the OpenEnv spec.

    Args:
        env_id: a registered ``agentgym/*`` id.
        max_sessions: most WebSocket sessions (envs) alive at once; one more is refused with OpenEnv's
            capacity error.
        idle_timeout_s: a session idle this long is closed and its env freed.
        **make_kwargs: passed to ``gym.make``.
    """
    gym.spec(env_id)  # an unknown id fails here, before the server starts

    def factory() -> AgentgymEnvironment:
        return AgentgymEnvironment(env_id, **make_kwargs)

    config = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=idle_timeout_s)
    app = create_fastapi_app(factory, TextAction, TextObservation, concurrency_config=config)
    app.add_middleware(_QuietClientDisconnect)
    return app


class _QuietClientDisconnect:
    """ASGI middleware: a WebSocket whose client already left is not a server error.

    OpenEnv 0.3's session handler closes the socket after the client's own close; under uvicorn's WebSocket
    implementation that raises ``WebSocketDisconnect``, logged as a traceback on every normal client exit.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "websocket":
            return await self.app(scope, receive, send)
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            pass


def serve(
    env_id: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_sessions: int = 8,
    idle_timeout_s: float = 600.0,
    **make_kwargs: Any,
) -> None:
    """Serve ``env_id`` with uvicorn until interrupted (local-only unless ``host`` says otherwise)."""
    import uvicorn

    app = make_app(env_id, max_sessions=max_sessions, idle_timeout_s=idle_timeout_s, **make_kwargs)
    uvicorn.run(app, host=host, port=port, log_level="warning")


class AgentgymClient(EnvClient[TextAction, TextObservation, EpisodeState]):
    """OpenEnv's WebSocket client with our types: ``reset(seed=..., options=...)``, ``step(TextAction(...))``.

    A server that goes away mid-episode raises ``ConnectionError`` naming the server (OpenEnv's own client
    raises the WebSocket library's close error).
    """

    def _step_payload(self, action: TextAction) -> dict[str, Any]:
        return action.model_dump()

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[TextObservation]:
        obs = TextObservation(
            **payload.get("observation", {}), reward=payload.get("reward"), done=payload.get("done", False)
        )
        return StepResult(observation=obs, reward=payload.get("reward"), done=bool(payload.get("done", False)))

    def _parse_state(self, payload: dict[str, Any]) -> EpisodeState:
        return EpisodeState(**payload)

    async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
        from websockets.exceptions import ConnectionClosed

        try:
            return await super()._send_and_receive(message)
        except (ConnectionClosed, OSError) as exc:
            ws, self._ws = self._ws, None
            pending = await _pending_error(ws)
            if pending is not None:  # the server said why before closing (e.g. at its session limit)
                raise RuntimeError(f"Server error: {pending.get('message')} (code: {pending.get('code')})") from exc
            raise ConnectionError(
                f"the OpenEnv server at {self._ws_url} closed the connection ({type(exc).__name__}); "
                "the episode is lost: restart the server and reset"
            ) from exc


async def _pending_error(ws: Any) -> dict[str, Any] | None:
    """An error message the server sent before closing, still unread in the socket's buffer, if any."""
    if ws is None:
        return None
    try:
        import asyncio

        raw = await asyncio.wait_for(ws.recv(), timeout=1.0)
        msg = json.loads(raw)
    except Exception:  # closed without a message, or not JSON: nothing to tell
        return None
    return msg.get("data", {}) if isinstance(msg, dict) and msg.get("type") == "error" else None


def app_name(env_id: str) -> str:
    """The attribute of :mod:`agentgym.integrations.openenv_apps` serving ``env_id`` (``Sokoban-v0`` -> ``sokoban_v0``)."""
    return env_id.split("/")[-1].lower().replace("-", "_").replace(".", "_")


def openenv_yaml(env_id: str) -> str:
    """The ``openenv.yaml`` manifest text for serving ``env_id`` (OpenEnv's spec_version 1)."""
    name = app_name(env_id)
    return (
        "spec_version: 1\n"
        f"name: agentgym_{name}\n"
        "type: space\n"
        "runtime: fastapi\n"
        f"app: agentgym.integrations.openenv_apps:{name}\n"
        "port: 8000\n"
    )


def main(argv: list[str] | None = None) -> int:
    """``agentgym openenv serve ENV_ID [--host H] [--port P] [--max-sessions N] [--idle-timeout S]``."""
    import argparse

    p = argparse.ArgumentParser(prog="agentgym openenv", description="Serve an agentgym env to the OpenEnv spec.")
    sub = p.add_subparsers(dest="command", required=True)
    sp = sub.add_parser("serve", help="serve one registered env id (one env per WebSocket session)")
    sp.add_argument("env_id", help="a registered id, e.g. agentgym/WebShop-v0 (`agentgym list`)")
    sp.add_argument("--host", default="127.0.0.1", help="interface to bind (default: local only)")
    sp.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    sp.add_argument("--max-sessions", type=int, default=8, help="most sessions alive at once (default: 8)")
    sp.add_argument("--idle-timeout", type=float, default=600.0, help="seconds before an idle session is closed")
    sp = sub.add_parser("manifest", help="print the openenv.yaml for an env id")
    sp.add_argument("env_id")
    args = p.parse_args(argv)
    if args.env_id not in gym.registry:
        p.error(f"{args.env_id!r} is not a registered env id (`agentgym list` shows them)")
    if args.command == "manifest":
        print(openenv_yaml(args.env_id), end="")
        return 0
    if args.max_sessions < 1 or args.idle_timeout <= 0:
        p.error("--max-sessions must be >= 1 and --idle-timeout > 0")
    print(f"agentgym: serving {args.env_id} to the OpenEnv spec on http://{args.host}:{args.port}", flush=True)
    serve(
        args.env_id, host=args.host, port=args.port, max_sessions=args.max_sessions, idle_timeout_s=args.idle_timeout
    )
    return 0
