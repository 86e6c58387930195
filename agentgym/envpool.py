"""A pool of envs addressed by slot, run in-process, in worker processes, or in Ray actors.

Both the evaluation loop and the rollout engine keep many episodes live at once and step only the live
ones each turn (episodes end at different turns). ``gymnasium.vector`` steps every sub-env in lock step
with autoreset, which does not fit that pattern, so this module keeps the same worker idea (one process
owns a fixed set of envs and answers batched commands over a pipe, as ``AsyncVectorEnv`` does) with a
per-slot API:

* ``"inprocess"``: all envs in this process (default; fastest for cheap envs such as the grid games).
* ``"async"``: ``num_workers`` processes (``multiprocessing``, spawn context: safe with torch and threads);
  pays off when a step costs milliseconds (ALFWorld's ~46 ms steps, WebShop's search).
* ``"ray"``: ``num_workers`` Ray actors (the ``distributed`` extra); runs on a cluster when
  ``ray.init(address=...)`` was called, or starts a local Ray otherwise.

Every command is batched per worker and all workers run concurrently, so one turn costs the slowest
worker's share of steps, not the sum.

A worker that dies (killed, out of memory, a crash in a native env library: EOF or a broken pipe on its
pipe, or Ray's actor-death error) is restarted and its live episodes are brought back by replaying their
reset ``(seed, options)`` and actions, as the leaderboard replays logs (the envs are deterministic), and the
command it was running is repeated. An episode whose replay does not reach the observation it had (an
unseeded reset, a nondeterministic env) is ended as aborted: its next step answers ``truncated`` with
``info["aborted"]`` holding the reason, and the turn loop plays its task again from the start. A request that
kills the worker ``max_restarts`` times in a row raises :class:`EnvWorkerCrash` naming the task, instead of
looping.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing as mp
import os
import traceback
from collections.abc import Sequence
from typing import Any

BACKENDS = ("inprocess", "async", "ray")
log = logging.getLogger(__name__)


class EnvWorkerCrash(RuntimeError):
    """An env request killed its worker ``max_restarts`` times in a row; the message names the task."""


class _WorkerDied(Exception):
    """A worker process or actor is gone (raised inside the pool, handled by restarting it)."""


def _digest(obs: Any) -> str:
    return hashlib.sha256(repr(obs).encode("utf-8", "replace")).hexdigest()


class EnvWorker:
    """Owns some envs (by slot id) and resets/steps them in batches. Runs in any process or Ray actor."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any] | None, slots: Sequence[int]) -> None:
        import gymnasium as gym

        import agentgym  # noqa: F401  (registers the envs in a fresh process)

        self.envs = {int(s): gym.make(env_id, **dict(env_kwargs or {})) for s in slots}

    def reset(self, requests: Sequence[tuple[int, int | None, dict[str, Any] | None]]) -> list[tuple[str, dict]]:
        return [self.envs[s].reset(seed=seed, options=options) for s, seed, options in requests]

    def step(self, requests: Sequence[tuple[int, str]]) -> list[tuple[str, float, bool, bool, dict]]:
        out = []
        for s, action in requests:
            obs, reward, terminated, truncated, info = self.envs[s].step(action)
            out.append((obs, float(reward), bool(terminated), bool(truncated), info))
        return out

    def expert(self, slots: Sequence[int]) -> list[str]:
        return [self.envs[s].unwrapped.expert_action() for s in slots]

    def replay(self, requests: Sequence[tuple[int, int | None, dict[str, Any] | None, list[str]]]) -> list[str]:
        """Reset each slot with its ``(seed, options)`` and step its actions; the last observation's digest."""
        out = []
        for s, seed, options, actions in requests:
            obs, _ = self.envs[s].reset(seed=seed, options=options)
            for action in actions:
                obs = self.envs[s].step(action)[0]
            out.append(_digest(obs))
        return out

    def pid(self, _: Any = None) -> int:
        """The worker's process id (fault-injection tests kill it)."""
        return os.getpid()

    def close(self) -> None:
        for env in self.envs.values():
            env.close()
        self.envs = {}


def _worker_main(conn, env_id: str, env_kwargs: dict[str, Any] | None, slots: list[int]) -> None:
    try:
        worker = EnvWorker(env_id, env_kwargs, slots)
        conn.send(("ok", None))
    except Exception as exc:  # report construction errors (missing data, missing extra) to the parent
        conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
        conn.close()
        return
    while True:
        try:
            cmd, arg = conn.recv()
        except EOFError:
            break
        if cmd == "close":
            worker.close()
            conn.send(("ok", None))
            break
        try:
            conn.send(("ok", getattr(worker, cmd)(arg)))
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    conn.close()


class EnvPool:
    """``num_envs`` envs of one id behind ``reset``/``step`` calls that take slot ids.

    Args:
        env_id: registered id.
        num_envs: number of env slots.
        env_kwargs: kwargs for ``gym.make``.
        backend: ``"inprocess"``, ``"async"`` or ``"ray"``.
        num_workers: processes / actors for ``async`` and ``ray`` (slots are split round-robin).
        max_restarts: how many times in a row one request may kill its worker before :class:`EnvWorkerCrash`.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        env_kwargs: dict[str, Any] | None = None,
        backend: str = "inprocess",
        num_workers: int = 1,
        max_restarts: int = 3,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown env backend {backend!r}; choose one of {', '.join(BACKENDS)}")
        if num_envs < 1:
            raise ValueError("num_envs must be >= 1")
        self.env_id = env_id
        self.num_envs = num_envs
        self.backend = backend
        n_workers = 1 if backend == "inprocess" else max(1, min(int(num_workers), num_envs))
        self.assignment = [[s for s in range(num_envs) if s % n_workers == w] for w in range(n_workers)]
        self.owner = {s: w for w, slots in enumerate(self.assignment) for s in slots}
        self.env_kwargs = env_kwargs
        self.max_restarts = int(max_restarts)
        self.restarts = 0  # workers restarted so far (reported by soak runs and tests)
        self.aborted: list[dict[str, Any]] = []  # episodes that could not be restored: slot, seed, options, reason
        # per slot: [seed, options, actions since reset, digest of the last observation, task id] for replay
        self._trace: dict[int, list[Any]] = {}
        self._abort_reason: dict[int, str] = {}
        self._local: EnvWorker | None = None
        self._conns: list[Any] = []
        self._procs: list[Any] = []
        self._actors: list[Any] = []
        if backend == "inprocess":
            self._local = EnvWorker(env_id, env_kwargs, self.assignment[0])
        elif backend == "async":
            for w in range(n_workers):
                self._conns.append(None)
                self._procs.append(None)
                self._spawn(w, wait=False)
            errors = [msg for status, msg in (c.recv() for c in self._conns) if status == "error"]
            if errors:
                self.close()
                raise RuntimeError(f"env worker failed to start {env_id}:\n{errors[0]}")
        else:
            try:
                import ray
            except ImportError as exc:
                from gymnasium.error import DependencyNotInstalled

                raise DependencyNotInstalled('the ray env backend needs: pip install "agentgym[distributed]"') from exc
            if not ray.is_initialized():
                ray.init(include_dashboard=False, log_to_driver=False)
            self._actor_cls = ray.remote(max_restarts=0)(EnvWorker)
            self._actors = [self._actor_cls.remote(env_id, env_kwargs, slots) for slots in self.assignment]

    # -- workers ------------------------------------------------------------------------------------
    def _spawn(self, w: int, wait: bool = True) -> None:
        """Start worker ``w`` (a fresh process or actor owning the same slots)."""
        if self._actors:
            self._actors[w] = self._actor_cls.remote(self.env_id, self.env_kwargs, self.assignment[w])
            return
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        proc = ctx.Process(
            target=_worker_main, args=(child, self.env_id, self.env_kwargs, self.assignment[w]), daemon=True
        )
        proc.start()
        child.close()
        self._conns[w], self._procs[w] = parent, proc
        if wait:
            status, msg = self._recv(w)
            if status == "error":
                raise RuntimeError(f"env worker failed to restart {self.env_id}:\n{msg}")

    def _recv(self, w: int) -> tuple[str, Any]:
        try:
            return self._conns[w].recv()
        except (EOFError, OSError) as exc:  # EOF, broken pipe, connection reset: the process is gone
            raise _WorkerDied(f"{type(exc).__name__}: {exc}") from exc

    def _send(self, w: int, cmd: str, reqs: list[Any]) -> None:
        try:
            self._conns[w].send((cmd, reqs))
        except OSError as exc:
            raise _WorkerDied(f"{type(exc).__name__}: {exc}") from exc

    def _one(self, w: int, cmd: str, reqs: list[Any]) -> list[Any]:
        """Run one command on one worker, synchronously (used while recovering it)."""
        if self._actors:
            import ray

            try:
                return ray.get(getattr(self._actors[w], cmd).remote(reqs))
            except ray.exceptions.RayActorError as exc:
                raise _WorkerDied(str(exc).splitlines()[0]) from exc
        self._send(w, cmd, reqs)
        status, payload = self._recv(w)
        if status == "error":
            raise RuntimeError(f"env worker error in {cmd}:\n{payload}")
        return payload

    def _restart(self, w: int, why: str) -> None:
        """Replace dead worker ``w`` and bring its live episodes back by replay (or mark them aborted)."""
        self.restarts += 1
        log.warning(
            "env worker %d of %s died (%s); restarting it and replaying its live episodes", w, self.env_id, why
        )
        if self._procs:
            old = self._procs[w]
            if old is not None and old.is_alive():
                old.kill()
            if old is not None:
                old.join(timeout=5)
            self._conns[w].close()
        self._spawn(w)
        live = [s for s in self.assignment[w] if s in self._trace and s not in self._abort_reason]
        if not live:
            return
        reqs = [(s, self._trace[s][0], self._trace[s][1], list(self._trace[s][2])) for s in live]
        digests = self._one(w, "replay", reqs)  # a death here is handled by the caller like any other
        for s, got in zip(live, digests):
            seed, options, actions, want, _ = self._trace[s]
            if got != want:
                reason = (
                    f"replay of seed {seed} options {options} ({len(actions)} actions) after a worker restart "
                    "did not reach the same observation"
                    + (" (the episode was reset without a seed)" if seed is None else "")
                )
                self._abort_reason[s] = reason
                self.aborted.append({"slot": s, "seed": seed, "options": options, "reason": reason})
                log.warning("env slot %d: %s; the episode is aborted and its task played again", s, reason)

    def _recover(self, w: int, cmd: str, reqs: list[Any], why: str) -> list[Any]:
        """Worker ``w`` died during ``cmd``: restart it and run its requests one by one, each at most
        ``max_restarts`` deaths in a row, so the request that kills it is found and named."""
        out = []
        dead = True
        for req in reqs:
            deaths = 1 if dead else 0
            while True:
                try:
                    if dead:
                        self._restart(w, why)
                        dead = False
                    res = self._one(w, cmd, [req])
                    self._note(cmd, [req], res)  # before the next request can kill the worker
                    out.extend(res)
                    break
                except _WorkerDied as exc:
                    why, dead = str(exc), True
                    deaths += 1
                    if deaths > self.max_restarts:
                        raise EnvWorkerCrash(
                            f"{self.env_id}: the env worker died {deaths} times in a row on {self._describe(cmd, req)}"
                            f" (last: {why}); this task crashes the env: leave it out or fix the env"
                        ) from exc
        return out

    def _note(self, cmd: str, reqs: list[Any], results: list[Any]) -> None:
        """Keep what a restarted worker must replay: each slot's reset and the actions stepped since."""
        if cmd == "reset":
            for (s, seed, opt), (obs, info) in zip(reqs, results):
                self._trace[s] = [seed, opt, [], _digest(obs), (info or {}).get("task_id")]
                self._abort_reason.pop(s, None)
        elif cmd == "step":
            for (s, action), r in zip(reqs, results):
                trace = self._trace.get(s)
                if trace is not None and s not in self._abort_reason:
                    trace[2].append(action)
                    trace[3] = _digest(r[0])

    def _describe(self, cmd: str, req: Any) -> str:
        slot = int(req[0]) if isinstance(req, tuple) else int(req)
        trace = self._trace.get(slot, [None, None, None, None, None])
        seed, options = (req[1], req[2]) if cmd == "reset" else (trace[0], trace[1])
        task = (options or {}).get("task_id") if isinstance(options, dict) else None
        task = task or (trace[4] if cmd != "reset" else None)
        what = f"{cmd} of task seed={seed} options={options}" + (f" task_id={task}" if task else "")
        return what + (f" action {req[1]!r}" if cmd == "step" else "")

    # -- dispatch ---------------------------------------------------------------------------------
    def _call(self, cmd: str, per_worker: list[list[Any]]) -> list[list[Any]]:
        if self._local is not None:
            return [getattr(self._local, cmd)(per_worker[0])]
        active = [w for w, reqs in enumerate(per_worker) if reqs]
        results: list[list[Any]] = [[] for _ in per_worker]
        dead: dict[int, str] = {}
        if self._actors:
            import ray

            refs = {w: getattr(self._actors[w], cmd).remote(per_worker[w]) for w in active}
            for w, ref in refs.items():
                try:
                    results[w] = ray.get(ref)
                    self._note(cmd, per_worker[w], results[w])
                except ray.exceptions.RayActorError as exc:
                    dead[w] = str(exc).splitlines()[0]
        else:
            sent = []
            for w in active:
                try:
                    self._send(w, cmd, per_worker[w])
                    sent.append(w)
                except _WorkerDied as exc:
                    dead[w] = str(exc)
            errors = []
            for w in sent:
                try:
                    status, payload = self._recv(w)
                except _WorkerDied as exc:
                    dead[w] = str(exc)
                    continue
                if status == "error":
                    errors.append(payload)
                else:
                    results[w] = payload
                    self._note(cmd, per_worker[w], payload)
            if errors:
                raise RuntimeError(f"env worker error in {cmd}:\n{errors[0]}")
        for w, why in dead.items():
            results[w] = self._recover(w, cmd, per_worker[w], why)
        return results

    def _scatter(self, cmd: str, slots: Sequence[int], payloads: Sequence[Any]) -> list[Any]:
        per_worker: list[list[Any]] = [[] for _ in self.assignment]
        order: list[list[int]] = [[] for _ in self.assignment]
        for i, (s, p) in enumerate(zip(slots, payloads)):
            w = self.owner[int(s)]
            per_worker[w].append(p)
            order[w].append(i)
        out: list[Any] = [None] * len(slots)
        for w, res in enumerate(self._call(cmd, per_worker)):
            for i, r in zip(order[w], res):
                out[i] = r
        return out

    # -- public API -------------------------------------------------------------------------------
    def reset(
        self, slots: Sequence[int], specs: Sequence[tuple[int | None, dict[str, Any] | None]]
    ) -> list[tuple[str, dict[str, Any]]]:
        """Reset each slot with its ``(seed, options)``; returns ``(obs, info)`` per slot, in order."""
        return self._scatter("reset", slots, [(int(s), seed, opt) for s, (seed, opt) in zip(slots, specs)])

    def step(self, slots: Sequence[int], actions: Sequence[str]) -> list[tuple[str, float, bool, bool, dict]]:
        """Step each slot with its action; returns ``(obs, reward, terminated, truncated, info)`` per slot.

        A slot whose episode could not be restored after a worker crash answers ``truncated`` with
        ``info["aborted"]`` (the reason) and is not stepped.
        """
        slots = [int(s) for s in slots]
        todo = [i for i, s in enumerate(slots) if s not in self._abort_reason]
        res = self._scatter("step", [slots[i] for i in todo], [(slots[i], actions[i]) for i in todo])
        out: list[Any] = [None] * len(slots)
        for i, r in zip(todo, res):
            if slots[i] not in self._abort_reason:  # (a restart during this step may have aborted it)
                out[i] = r
        for i, s in enumerate(slots):
            if out[i] is None:
                out[i] = ("", 0.0, False, True, {"aborted": self._abort_reason[s], "is_action_valid": True})
        return out

    def expert_actions(self, slots: Sequence[int]) -> list[str]:
        """``env.unwrapped.expert_action()`` of each slot (privileged; for expert agents)."""
        return self._scatter("expert", slots, [int(s) for s in slots])

    def close(self) -> None:
        """Close every env and stop the workers."""
        if self._local is not None:
            self._local.close()
            self._local = None
        for conn in self._conns:
            if conn is None:
                continue
            try:
                conn.send(("close", None))
                conn.recv()
            except (BrokenPipeError, EOFError, OSError):
                pass
            conn.close()
        for proc in self._procs:
            if proc is None:
                continue
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
        self._conns, self._procs = [], []
        if self._actors:
            import ray

            for actor in self._actors:
                try:
                    ray.get(actor.close.remote())
                except Exception:  # an actor that died already has nothing to close
                    pass
                ray.kill(actor)
            self._actors = []

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
