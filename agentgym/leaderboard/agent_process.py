"""Run a submitted agent in its own process, talking to the env side over JSON lines on pipes.

A rerun (``agentgym leaderboard verify --rerun``) never gives someone else's agent the env, its RNG or
the reset seed. The agent runs in a child process (``python -m agentgym.leaderboard.agent_process``)
that reads one JSON object per line on stdin and answers one per line:

``{"op": "init", "spec": ..., "kwargs": {...}, "code_sha256": ..., "agent_seed": N}``
    build the agent (``random``, ``expert``, ``module:Class``, or a model spec of
    :func:`agentgym.agents.from_spec`), check that ``module``'s source still has ``code_sha256``, call
    ``agent.reset(agent_seed)`` when it has one. Answer ``{"ok": true, "name", "privileged", "config"}``.
``{"op": "act", "episode": K, "new": bool, "env_id", "observation", "info", "expert_action"}``
    one turn of episode ``K`` (a counter of the rerun, not a seed). ``info`` holds only
    :data:`AGENT_INFO_KEYS`; ``expert_action`` is sent only to agents that declare ``privileged``.
    The child keeps the episode's first observation and (observation, action) history itself and
    answers ``{"action", "output", "prompt_tokens", "completion_tokens", "format_valid", "extras"}``.

What the child prints goes to stderr (its stdout carries only the protocol). On the env side,
:class:`ProcessAgent` is an ordinary agent for the turn loop (:func:`agentgym.evaluation.run_episodes`)
with a time limit per step and per episode; a timeout, a crash or a malformed answer raises
:class:`AgentFailure`, which the rerun counts as one failed episode before it starts a fresh process.

This is isolation of the *information*, not a security sandbox: the child runs with the verifier's user
and file access. A code agent's module is someone else's code and is reviewed before it is run.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from agentgym.agent_io import AgentAction, AgentInput

#: The info keys an agent process receives (when the env sets them): what the envs document as
#: agent-facing. Task ids, seeds, solver hints such as ``optimal_success_prob`` and scores are for logs
#: and verifiers only.
AGENT_INFO_KEYS: tuple[str, ...] = (
    "admissible_actions",
    "action_words",
    "is_action_valid",
    "invalid_reason",
    "action_is_effective",
    "actions_left",
    "instruction",
    "task",
)

#: Default limits (seconds) of one agent answer and of one whole episode.
STEP_TIMEOUT_S = 60.0
EPISODE_TIMEOUT_S = 1800.0
#: Seconds the child may take to import and build its agent.
START_TIMEOUT_S = 120.0


class AgentFailure(RuntimeError):
    """The agent process timed out, crashed or answered something that is not an action."""


def agent_facing(info: Mapping[str, Any]) -> dict[str, Any]:
    """The part of an env's ``info`` an agent may see (:data:`AGENT_INFO_KEYS`)."""
    from agentgym.episodes import to_jsonable

    return {k: to_jsonable(info[k]) for k in AGENT_INFO_KEYS if k in info}


class ProcessAgent:
    """An agent whose decisions come from a child process (see the module docstring).

    Args:
        spec: ``random`` | ``expert`` | ``module:Class`` | ``hf:...`` (what ``agentgym eval --agent`` takes).
        kwargs: constructor / ``from_spec`` kwargs from the submission's runnable block.
        code_sha256: for ``module:Class``: the sha256 the module's source must have.
        agent_seed: the agent's own sampling seed for this rerun (``agent.reset(seed)``).
        step_timeout_s: longest wait for one answer.
        episode_timeout_s: longest time one episode may take on the agent side.
        transcript: when a list, every line sent to the child is appended to it (tests read it).
    """

    def __init__(
        self,
        spec: str,
        kwargs: Mapping[str, Any] | None = None,
        *,
        code_sha256: str | None = None,
        agent_seed: int | None = None,
        step_timeout_s: float = STEP_TIMEOUT_S,
        episode_timeout_s: float = EPISODE_TIMEOUT_S,
        transcript: list[str] | None = None,
    ) -> None:
        self.spec = spec
        self.kwargs = dict(kwargs or {})
        self.code_sha256 = code_sha256
        self.agent_seed = agent_seed
        self.step_timeout_s = step_timeout_s
        self.episode_timeout_s = episode_timeout_s
        self.transcript = transcript
        self.name = spec
        self.privileged = False
        self._config: dict[str, Any] = {}
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._episode = -1
        self._episode_start = 0.0
        self.stderr_tail = ""
        self.start()

    # -- process management ------------------------------------------------------------------------
    def start(self) -> None:
        """(Re)start the child and build the agent in it."""
        self.close()
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "agentgym.leaderboard.agent_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            bufsize=1,
            env=env,
        )
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines), daemon=True).start()
        self._stderr: list[str] = []
        threading.Thread(target=self._drain, args=(self._proc.stderr, self._stderr), daemon=True).start()
        reply = self._call(
            {
                "op": "init",
                "spec": self.spec,
                "kwargs": self.kwargs,
                "code_sha256": self.code_sha256,
                "agent_seed": self.agent_seed,
            },
            START_TIMEOUT_S,
        )
        if not reply.get("ok"):
            raise AgentFailure(f"the agent process could not build {self.spec}: {reply.get('error')}")
        self.name = str(reply.get("name") or self.spec)
        self.privileged = bool(reply.get("privileged"))
        self._config = dict(reply.get("config") or {})

    @staticmethod
    def _pump(stream: Any, out: queue.Queue[str | None]) -> None:
        for line in stream:
            out.put(line)
        out.put(None)  # EOF: the child exited

    @staticmethod
    def _drain(stream: Any, out: list[str]) -> None:
        for line in stream:
            out.append(line)
            del out[:-50]

    def close(self) -> None:
        """Stop the child (it is killed if it does not exit at once)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass

    def _call(self, message: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise AgentFailure("the agent process is not running")
        line = json.dumps(message, ensure_ascii=False)
        if self.transcript is not None:
            self.transcript.append(line)
        try:
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise self._failure(f"the agent process died ({exc})") from exc
        try:
            answer = self._lines.get(timeout=max(0.001, timeout))
        except queue.Empty:
            self.close()
            raise AgentFailure(
                f"no answer within {timeout:.1f} s (time limit); the agent process was stopped"
            ) from None
        if answer is None:
            raise self._failure("the agent process exited")
        try:
            reply = json.loads(answer)
        except ValueError as exc:
            self.close()
            raise AgentFailure(f"the agent process answered a line that is not JSON: {answer[:200]!r}") from exc
        if not isinstance(reply, dict):
            raise AgentFailure(f"the agent process answered {reply!r}, not an object")
        if "error" in reply and "action" not in reply and "ok" not in reply:
            raise AgentFailure(f"the agent raised: {reply['error']}")
        return reply

    def _failure(self, what: str) -> AgentFailure:
        proc = self._proc
        code = None
        if proc is not None:
            try:
                code = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        time.sleep(0.05)  # let the stderr thread catch the last lines
        self.stderr_tail = "".join(self._stderr[-5:]).strip()[-500:]
        self.close()
        tail = f"; stderr: {self.stderr_tail}" if self.stderr_tail else ""
        return AgentFailure(f"{what} (exit code {code}){tail}")

    # -- the agent protocol ----------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return dict(self._config)

    def act(self, inputs: Sequence[AgentInput]) -> list[AgentAction]:
        out = []
        for x in inputs:
            new = not x.history
            if new:
                self._episode += 1
                self._episode_start = time.monotonic()
            left = self.episode_timeout_s - (time.monotonic() - self._episode_start)
            if left <= 0:
                self.close()
                raise AgentFailure(f"episode time limit of {self.episode_timeout_s:.0f} s reached")
            message = {
                "op": "act",
                "episode": self._episode,
                "new": new,
                "env_id": x.env_id,
                "observation": x.observation,
                "info": agent_facing(x.info),
                "expert_action": x.expert_action if self.privileged else None,
            }
            reply = self._call(message, min(self.step_timeout_s, left))
            action = reply.get("action")
            if not isinstance(action, str):
                self.close()
                raise AgentFailure(f"the agent answered {action!r} instead of an action string")
            out.append(
                AgentAction(
                    action=action,
                    output=reply.get("output") if isinstance(reply.get("output"), str) else None,
                    prompt_tokens=int(reply.get("prompt_tokens") or 0),
                    completion_tokens=int(reply.get("completion_tokens") or 0),
                    format_valid=bool(reply.get("format_valid", True)),
                    extras=reply.get("extras") if isinstance(reply.get("extras"), dict) else {},
                )
            )
        return out


# -- the child side ---------------------------------------------------------------------------------
def build_agent(spec: str, kwargs: Mapping[str, Any], code_sha256: str | None = None) -> Any:
    """Build the agent a runnable spec names (the child calls this).

    Raises:
        ValueError: unknown spec, or a ``module:Class`` whose source no longer has ``code_sha256``.
    """
    from agentgym.agents import ExpertAgent, RandomAgent

    if spec == "random":
        return RandomAgent(**dict(kwargs))
    if spec == "expert":
        return ExpertAgent()
    from agentgym.agents import from_spec

    agent = from_spec(spec, **dict(kwargs))
    if agent is not None:
        return agent
    module, sep, cls = spec.partition(":")
    if not sep:
        raise ValueError(f"unknown agent spec {spec!r}: use random, expert, module:Class, hf:ID or openai:MODEL")
    import importlib
    import importlib.util

    if code_sha256 is not None:
        import hashlib

        found = importlib.util.find_spec(module)
        origin = getattr(found, "origin", None)
        if not origin:
            raise ValueError(f"module {module} has no source file to check against code_sha256")
        with open(origin, "rb") as fh:
            digest = hashlib.sha256(fh.read()).hexdigest()
        if digest != code_sha256:
            raise ValueError(f"{origin} has sha256 {digest}, not the submitted {code_sha256}: other code")
    return getattr(importlib.import_module(module), cls)(**dict(kwargs))


def _serve(stdin: Any, out: Any) -> None:
    agent: Any = None
    episodes: dict[int, dict[str, Any]] = {}
    for line in stdin:
        try:
            msg = json.loads(line)
            if msg.get("op") == "init":
                agent = build_agent(msg["spec"], msg.get("kwargs") or {}, msg.get("code_sha256"))
                reset = getattr(agent, "reset", None)
                if callable(reset) and msg.get("agent_seed") is not None:
                    reset(int(msg["agent_seed"]))
                cfg = getattr(agent, "config", None)
                from agentgym.episodes import to_jsonable

                reply: dict[str, Any] = {
                    "ok": True,
                    "name": str(getattr(agent, "name", msg["spec"])),
                    "privileged": bool(getattr(agent, "privileged", False)),
                    "config": to_jsonable(dict(cfg())) if callable(cfg) else {},
                }
            elif msg.get("op") == "act":
                if agent is None:
                    raise RuntimeError("act before init")
                k = int(msg["episode"])
                if msg.get("new") or k not in episodes:
                    episodes.clear()  # one live episode at a time
                    episodes[k] = {"first": msg["observation"], "history": []}
                state = episodes[k]
                x = AgentInput(
                    env_id=msg["env_id"],
                    observation=msg["observation"],
                    info=dict(msg.get("info") or {}),
                    first_observation=state["first"],
                    history=list(state["history"]),
                    task_id=None,
                    episode_index=k,
                    expert_action=msg.get("expert_action"),
                )
                (act,) = agent.act([x])
                state["history"].append((msg["observation"], act.action))
                reply = {
                    "action": act.action,
                    "output": act.output,
                    "prompt_tokens": act.prompt_tokens,
                    "completion_tokens": act.completion_tokens,
                    "format_valid": act.format_valid,
                    "extras": act.extras,
                }
            else:
                reply = {"error": f"unknown op {msg.get('op')!r}"}
        except Exception as exc:  # reported to the env side, which counts the episode as failed
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        try:
            text = json.dumps(reply, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"error": f"the answer is not JSON-serialisable: {exc}"})
        out.write(text + "\n")
        out.flush()


def main() -> None:
    """Entry point of the child: protocol on the original stdout, anything the agent prints to stderr."""
    proto = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    _serve(sys.stdin, proto)


if __name__ == "__main__":
    main()
