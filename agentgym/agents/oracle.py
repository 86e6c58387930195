"""The privileged analyser of the grid envs: SEED lessons and ERL reflections written from the env's ground truth.

SEED's analyser and ERL's reflector are, in the papers, language models reading a transcript. This module is
their *oracle*: it replays a finished episode in a fresh env built from the episode record (env id, kwargs,
seed, options), and at every step asks the env's own solver what the best move was -- the BFS shortest safe
path of non-slippery FrozenLake, the finite-horizon value iteration of slippery FrozenLake, the BFS Sokoban
solver. The first step whose move was worse than the best is *the mistake*; the solver's move there is *the
better move*; the solver's plan from the start is what a second attempt should play.

It is **privileged**: it reads the map and the solver, which no agent sees (like :class:`ExpertAgent`). Its
lessons and reflections are therefore the upper bound of SEED's and ERL's mechanisms ("oracle lessons /
reflections") and the targets of the lesson/reflection SFT rows of ``baselines/sft.py``; they are never a
result of the policy itself. Deterministic: the same episode record gives the same text.

* :func:`critique` -- the facts: success, the first mistake (step, kind, sentence), the better move, the plan;
  :func:`varied_critique` the same with the plan drawn among the shortest paths (SFT rows that need the text).
* :func:`oracle_lesson` -- SEED's JSON object (``episode_summary``, ``episode_skill``;
  ``agentgym.prompts.lesson``); :func:`oracle_lesson_reply` the reply text ``parse_lesson`` reads.
* :func:`oracle_reflection` -- ERL's reflection Δ in either form (``in_context`` advice or ``rulebook``
  instructions; ``agentgym.prompts.reflection``); :func:`oracle_reflection_reply` the tagged reply.
* :class:`OracleAnalyser` -- the lesson writer's analyser (``LessonWriter(OracleAnalyser())``): it reads
  episodes, not chats.

Supported: every registered FrozenLake (``FrozenLake-v0``, ``FrozenLakeNotSlippery-v0``, ``FrozenLakeLetters-v0``)
and Sokoban id; any other env raises :class:`UnsupportedEnv`.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from agentgym.core import normalize_action
from agentgym.episodes import Episode


class UnsupportedEnv(ValueError):
    """The episode's env has no privileged analyser."""


#: The version of each env's text: bump it (and say what changed in TEXT_CHANGES) when the text below changes. The
#: SFT recipes that learn it and the oracle runs depend on it; records of them say which version they ran
#: (``oracle_text``; records from before the field: version 1).
TEXT_VERSIONS = {"frozenlake": 1, "sokoban": 2}
TEXT_CHANGES = {("sokoban", 2): "a lesson about a solved episode no longer lists the moves played"}


def text_kind(env_id: str) -> str:
    """``frozenlake`` or ``sokoban``: which text of :data:`TEXT_VERSIONS` an env id (or suite name) gets."""
    name = env_id.lower()
    for kind in TEXT_VERSIONS:
        if kind in name:
            return kind
    raise UnsupportedEnv(f"{env_id}: no privileged analyser (FrozenLake and Sokoban have one)")


@dataclass
class Critique:
    """What the privileged analyser found in one episode.

    Attributes:
        env: ``"frozenlake"`` or ``"sokoban"``.
        success: the episode solved its task.
        actions: the logged actions.
        mistake_step: 1-based step of the first mistake (None: no move was worse than the best).
        kind: ``invalid`` | ``hole`` | ``edge`` | ``away`` | ``risky`` | ``wall`` | ``blocked`` | ``stuck`` |
            ``detour`` | ``budget`` | ``slip`` | ``""`` (success without a mistake).
        mistake: one sentence naming the mistake (empty when none).
        better: the better move at the mistake (empty when none).
        where: the agent's position at the mistake, ``row R col C`` (1-based, as the board prints).
        plan: the solver's moves from the start (slippery FrozenLake: the best first move only).
        rule: the reusable rule behind the mistake (or the success).
        slippery: slippery FrozenLake (the plan is then the best first move, not a path).
        plan_cells: where P stands before each move of ``plan`` (``row R col C``).
        goal: what success is, in the env's letters (``the goal (G)``).
        plan_choices: from :func:`varied_critique` only: how many moves keep to a shortest path at each cell of
            ``plan`` (more than one: the plan's text, not the board, decides the move there).
        list_played: a lesson about a solved episode lists the moves played (FrozenLake). Sokoban's does not:
            SmolLM2-135M, taught to copy them, looped on one move until its token budget ran out on every
            unparsed lesson of its probe (``up, up, up, ...``), so its lesson gives the count and the shortest
            solution's length instead.
    """

    env: str
    success: bool
    actions: list[str]
    mistake_step: int | None = None
    kind: str = ""
    mistake: str = ""
    better: str = ""
    where: str = ""
    plan: list[str] = field(default_factory=list)
    rule: str = ""
    slippery: bool = False
    plan_cells: list[str] = field(default_factory=list)
    goal: str = "every box on a target"
    plan_choices: list[int] = field(default_factory=list)
    list_played: bool = True


# -- replay ------------------------------------------------------------------------------------------------
def replay_env(episode: Episode):
    """A fresh env at ``episode``'s start (rebuilt from its record and checked against its first observation):
    ``(env, env.unwrapped, "frozenlake" | "sokoban")``; the caller closes it."""
    import gymnasium as gym

    import agentgym  # noqa: F401  (registers the ids)
    from agentgym.envs.frozen_lake import FrozenLakeEnv
    from agentgym.envs.sokoban.env import SokobanEnv

    try:
        env = gym.make(episode.env_id, **(episode.env_kwargs or {}))
    except gym.error.Error as err:
        raise UnsupportedEnv(f"cannot rebuild {episode.env_id}: {err}") from err
    u = env.unwrapped
    if isinstance(u, FrozenLakeEnv):
        kind = "frozenlake"
    elif isinstance(u, SokobanEnv):
        kind = "sokoban"
    else:
        env.close()
        raise UnsupportedEnv(
            f"no privileged analyser for {episode.env_id}: it covers the FrozenLake and Sokoban envs only"
        )
    obs, _ = env.reset(seed=episode.seed, options=episode.options)
    if obs != episode.reset_observation:
        env.close()
        raise ValueError(f"episode of {episode.env_id} seed {episode.seed}: the rebuilt env starts elsewhere")
    return env, u, kind


def _cell(index: int, width: int) -> str:
    r, c = divmod(index, width)
    return f"row {r + 1} col {c + 1}"


def _plan_text(moves: list[str]) -> str:
    return ", ".join(moves) if moves else "(no move needed)"


def _walk_text(c: Critique) -> str:
    """The plan as where-to-do-what (``at row 1 col 1 go down, at row 2 col 1 go right``): a reader that finds P on
    the board knows its next move without counting steps."""
    if not c.plan_cells:
        return _plan_text(c.plan)
    return ", ".join(f"at {cell} go {move}" for cell, move in zip(c.plan_cells, c.plan))


# -- FrozenLake ----------------------------------------------------------------------------------------------
def _fl_distances(u) -> dict[int, int]:
    """Moves to the nearest goal over tiles that are not holes (BFS backwards from the goals)."""
    n = u._n * u._n
    dist = {g: 0 for g in range(n) if u._tiles[g] == "G"}
    queue = deque(dist)
    while queue:
        s = queue.popleft()
        for a in range(4):
            t = u._next(s, a)
            if t not in dist and u._tiles[t] != "H":
                dist[t] = dist[s] + 1
                queue.append(t)
    return dist


def _fl_plan(u) -> list[str]:
    """Shortest safe path from the current position (non-slippery), as move names."""
    from agentgym.envs.frozen_lake import ACTIONS

    dist = _fl_distances(u)
    pos, moves = u._pos, []
    while dist.get(pos, 0) > 0 and len(moves) < 4 * u._n * u._n:
        for a in range(4):
            t = u._next(pos, a)
            if dist.get(t, 10**9) == dist[pos] - 1 and u._tiles[t] != "H":
                moves.append(ACTIONS[a])
                pos = t
                break
        else:
            break
    return moves


def _critique_frozenlake(episode: Episode, env, u) -> Critique:
    from agentgym.envs.frozen_lake import ACTIONS, parse_action

    slippery = u.is_slippery and u.success_rate < 1.0
    w = u._n
    actions = [s.action for s in episode.steps]
    c = Critique(env="frozenlake", success=episode.success, actions=actions, slippery=slippery)
    me, hole, goal, ice = (u.symbols[k].strip() for k in ("player", "hole", "goal", "frozen"))  # the env's letters
    c.goal = f"the goal ({goal})"
    c.plan = [u.expert_action()] if slippery else _fl_plan(u)
    pos = u._pos
    for move in c.plan:
        c.plan_cells.append(_cell(pos, w))
        pos = u._next(pos, ACTIONS.index(move))
    slip_note = ""
    for k, step in enumerate(episode.steps, start=1):
        pos = u._pos
        where = _cell(pos, w)
        a = parse_action(normalize_action(step.action).strip().lower().rstrip("."))
        best = u.expert_action()
        if slippery:
            left = max(1, min(u._budget - u._t, u._budget))
            qs = u._q[left][pos]
            worse = a is None or qs[a] < qs.max() - 1e-9
        else:
            dist = _fl_distances(u)
            nxt = u._next(pos, a) if a is not None else pos
            worse = a is None or u._tiles[nxt] == "H" or nxt == pos or dist.get(nxt, 10**9) >= dist.get(pos, 10**9)
        if worse and c.mistake_step is None:
            c.mistake_step, c.where, c.better = k, where, best
            if a is None:
                c.kind = "invalid"
                c.mistake = f"At step {k} ({me} at {where}) the action {step.action!r} was not a move."
                c.rule = "Answer with exactly one of left, down, right or up."
            elif slippery:
                c.kind = "risky"
                c.mistake = (
                    f"At step {k} ({me} at {where}) '{ACTIONS[a]}' reached the goal with probability "
                    f"{qs[a]:.2f}, while '{best}' reached it with {qs.max():.2f}."
                )
                c.rule = (
                    "On slippery ice a move can slide sideways: pick the move whose sideways slides also avoid "
                    f"the holes ({hole})."
                )
            elif u._tiles[u._next(pos, a)] == "H":
                c.kind = "hole"
                c.mistake = (
                    f"At step {k} ({me} at {where}) '{ACTIONS[a]}' stepped onto a hole ({hole}) and ended the episode."
                )
                c.rule = f"Before each move, look at the cell it leads to and never step onto a hole ({hole})."
            elif u._next(pos, a) == pos:
                c.kind = "edge"
                c.mistake = f"At step {k} ({me} at {where}) '{ACTIONS[a]}' pushed against the edge of the lake and {me} did not move."
                c.rule = f"A move off the edge of the lake wastes a step; move towards {goal} instead."
            else:
                c.kind = "away"
                c.mistake = (
                    f"At step {k} ({me} at {where}) '{ACTIONS[a]}' did not bring {me} closer to the goal ({goal})."
                )
                c.rule = f"Every move should bring {me} one cell closer to {goal} along frozen cells ({ice}), around the holes ({hole})."
        _, _, terminated, truncated, info = env.step(step.action)
        if slippery and a is not None and info.get("executed_action") not in (None, ACTIONS[a]) and not slip_note:
            slip_note = (
                f"At step {k} the ice slipped: '{ACTIONS[a]}' was intended, '{info['executed_action']}' happened."
            )
    if c.mistake_step is None and not c.success:
        c.where = _cell(u._pos, w)
        if slip_note:
            c.kind, c.mistake = "slip", slip_note + " Every move chosen was the best available."
            c.rule = "On slippery ice keep choosing the move with the best chance; sideways slides are luck."
        else:
            c.kind, c.mistake = "budget", f"The step budget ran out with {me} at {c.where} before reaching {goal}."
            c.rule = f"Take the shortest safe path to {goal}; every wasted move counts against the step budget."
        c.mistake_step = len(episode.steps) or None
    if c.success and not c.rule:
        c.rule = f"Move towards {goal} one cell at a time along frozen cells ({ice}), checking that the next cell is not a hole ({hole})."
    return c


# -- Sokoban ------------------------------------------------------------------------------------------------
def _sk_plan(u) -> list[int] | None:
    from agentgym.envs.sokoban.solver import solve

    return solve(u._walls, u._width, u._targets, u._boxes, u._player)


def _critique_sokoban(episode: Episode, env, u) -> Critique:
    from agentgym.envs.sokoban.env import ACTIONS

    w = u._width
    actions = [s.action for s in episode.steps]
    c = Critique(env="sokoban", success=episode.success, actions=actions, list_played=False)
    me, wall, target = (u.symbols[k].strip() for k in ("player", "wall", "target"))  # the env's own letters
    start_plan = _sk_plan(u)
    c.plan = [ACTIONS[d] for d in (start_plan or [])]
    pos = u._player
    for d in start_plan or []:
        c.plan_cells.append(_cell(pos, w))
        pos += u._offsets[d]
    for k, step in enumerate(episode.steps, start=1):
        plan = _sk_plan(u)
        before = len(plan) if plan is not None else None
        player, boxes = u._player, set(u._boxes)
        where = _cell(player, w)
        _, _, terminated, truncated, info = env.step(step.action)
        if c.mistake_step is not None or before is None or u._done:
            continue
        after_plan = _sk_plan(u)
        after = len(after_plan) if after_plan is not None else None
        moved_box = set(u._boxes) != boxes
        better = ACTIONS[plan[0]] if plan else ""
        if not info.get("is_action_valid", True):
            kind, text = "invalid", f"At step {k} ({me} at {where}) the action {step.action!r} was not a move."
            rule = "Answer with exactly one of up, down, left or right."
        elif not info.get("action_is_effective", True):
            blocked = _pushes_box(u, player, step.action)
            kind = "blocked" if blocked else "wall"
            text = (
                f"At step {k} ({me} at {where}) '{step.action}' pushed a box against a wall or another box and nothing moved."
                if blocked
                else f"At step {k} ({me} at {where}) '{step.action}' walked into a wall ({wall}) and wasted a move."
            )
            rule = f"Check the cell in the direction of a move: walls ({wall}) block {me}, and a box only moves onto free floor."
        elif after is None:
            box = next(iter(set(u._boxes) - boxes), None)
            kind = "stuck"
            text = (
                f"At step {k} ({me} at {where}) '{step.action}' pushed the box to "
                f"{_cell(box, w) if box is not None else 'a cell'} where it can no longer reach a target ({target}): "
                "it is stuck against the wall."
            )
            rule = (
                "Never push a box into a corner or against a wall unless its target lies along that wall; "
                "first walk around to the side opposite the direction the box must go."
            )
        elif after >= before:
            kind = "detour"
            text = (
                f"At step {k} ({me} at {where}) '{step.action}' "
                + ("pushed the box the wrong way" if moved_box else "walked away from the box's pushing side")
                + f": the level then needed {after} more moves instead of {before - 1}."
            )
            rule = f"Get behind the box on the side opposite its target, then push it straight towards the target ({target})."
        else:
            continue
        c.mistake_step, c.kind, c.mistake, c.better, c.where, c.rule = k, kind, text, better, where, rule
    if c.mistake_step is None and not c.success:
        c.kind, c.where = "budget", _cell(u._player, w)
        c.mistake = f"The step budget ran out before every box was on a target ({me} at {c.where})."
        c.rule = "Follow the shortest plan: every wasted move counts against the ten-move budget."
        c.mistake_step = len(episode.steps) or None
    if c.success and not c.rule:
        c.rule = (
            f"Get behind the box on the side opposite its target, then push it straight onto the target ({target})."
        )
    return c


def _pushes_box(u, player: int, action: str) -> bool:
    from agentgym.envs.sokoban.env import parse_direction

    d = parse_direction(normalize_action(action))
    return d is not None and (player + u._offsets[d]) in u._boxes


# -- public API ---------------------------------------------------------------------------------------------
def critique(episode: Episode) -> Critique:
    """Replay ``episode`` in a fresh env and find its first mistake and the better move (privileged)."""
    env, u, kind = replay_env(episode)
    try:
        return _critique_frozenlake(episode, env, u) if kind == "frozenlake" else _critique_sokoban(episode, env, u)
    finally:
        env.close()


def varied_critique(episode: Episode, rng) -> Critique:
    """:func:`critique` of a failed non-slippery FrozenLake or Sokoban episode with the plan drawn at random among
    the shortest paths through its mistake (FrozenLake: safe ones; Sokoban: solutions) (privileged).

    The episode's moves before its first mistake all shortened what was left by one move (FrozenLake: P's distance
    to the goal; Sokoban: the level's shortest solution), so they start a shortest path; from the mistake's state
    on, each move is drawn (``rng``, a ``numpy`` generator) among those that do too. The better move is the plan's
    move there. Where a board has several shortest paths the plan is then not the one the env's expert (and an
    action-only SFT) takes: a policy has to read it to follow it -- the SFT rows that teach reading it
    (``baselines.sft``'s ``context_plans: varied``). Other episodes get :func:`critique` unchanged.
    """
    c = critique(episode)
    if c.slippery or c.success or c.mistake_step is None or c.kind == "budget":
        return c
    env, u, kind = replay_env(episode)
    try:
        walk = _fl_shortest(u) if kind == "frozenlake" else _sk_shortest(u)
        start = walk.here()
        for action in c.actions[: c.mistake_step - 1]:
            env.step(action)
        plan, state = list(c.actions[: c.mistake_step - 1]), walk.here()
        while (moves := walk.good(state)) and len(plan) < 4 * walk.cells:
            a = moves[int(rng.integers(len(moves)))]  # the state is not the goal: a move keeps to a shortest path
            plan.append(walk.names[a])
            state = walk.step(state, a)
        cells, choices, state = [], [], start  # where P stands before each move of the plan, and its options there
        for move in plan:
            cells.append(_cell(walk.player(state), walk.width))
            choices.append(len(walk.good(state)))
            state = walk.step(state, walk.names.index(move))
    finally:
        env.close()
    c.plan, c.plan_cells, c.plan_choices, c.better = plan, cells, choices, plan[c.mistake_step - 1]
    return c


@dataclass
class _Shortest:
    """The shortest paths of a grid env from its live state (for :func:`varied_critique`): ``here()`` the env's
    state now, ``good(state)`` the moves (indices into ``names``) that shorten what is left by one (none at the
    goal), ``step(state, move)`` the next state, ``player(state)`` P's cell; ``width`` / ``cells`` the grid's."""

    names: tuple[str, ...]
    width: int
    cells: int
    here: Callable[[], object]
    good: Callable[[object], list[int]]
    step: Callable[[object, int], object]
    player: Callable[[object], int]


def _fl_shortest(u) -> _Shortest:
    from agentgym.envs.frozen_lake import ACTIONS

    dist = _fl_distances(u)

    def good(cell: int) -> list[int]:
        return [a for a in range(4) if dist.get(u._next(cell, a), 10**9) == dist.get(cell, 0) - 1]

    return _Shortest(ACTIONS, u._n, u._n * u._n, lambda: u._pos, good, u._next, lambda cell: cell)


def _sk_shortest(u) -> _Shortest:
    """Sokoban: a state is ``(player, boxes)``; what is left is the solver's shortest solution from it."""
    from agentgym.envs.sokoban.env import ACTIONS
    from agentgym.envs.sokoban.solver import solve

    left: dict[tuple[int, frozenset[int]], int | None] = {}

    def solution(state) -> int | None:
        if state not in left:
            moves = solve(u._walls, u._width, u._targets, state[1], state[0])
            left[state] = None if moves is None else len(moves)
        return left[state]

    def step(state, d: int):  # as the env moves: a wall, or a box that cannot move, leaves the state as it is
        player, boxes = state
        o = u._offsets[d]
        q = player + o
        if u._walls[q] or (q in boxes and (u._walls[q + o] or q + o in boxes)):
            return state
        return q, (boxes - {q}) | {q + o} if q in boxes else boxes

    def good(state) -> list[int]:
        n = solution(state)
        return [d for d in range(4) if n and solution(step(state, d)) == n - 1]

    return _Shortest(
        ACTIONS,
        u._width,
        len(u._walls),
        lambda: (u._player, frozenset(u._boxes)),
        good,
        step,
        lambda state: state[0],
    )


def oracle_lesson(episode: Episode, crit: Critique | None = None) -> dict[str, str]:
    """SEED's lesson object ``{"episode_summary", "episode_skill"}`` for ``episode`` (privileged)."""
    c = crit or critique(episode)
    n = len(c.actions)
    if c.success:
        summary = f"Reached {c.goal} in {n} move{'s' * (n != 1)}"
        if c.list_played:
            summary += f": {_plan_text(c.actions)}."
        else:
            summary += f"; the shortest solution takes {len(c.plan)}." if c.plan else "."
        if c.mistake_step is not None and c.mistake:
            summary += f" One move was wasted: {c.mistake}"
        skill = c.rule
        if c.plan:
            what = "best first move" if c.slippery else "shortest plan"
            skill += f" Here the {what} was {_plan_text(c.plan)}."
        return {"episode_summary": summary, "episode_skill": skill}
    summary = c.mistake or f"The episode failed after {n} moves."
    if c.better:
        summary += f" The better move there was '{c.better}'."
    skill = c.rule
    if c.better and c.where:
        skill += f" From {c.where} here, move {c.better}."
    return {"episode_summary": summary, "episode_skill": skill}


def oracle_lesson_reply(episode: Episode, crit: Critique | None = None) -> str:
    """The analyser reply ``agentgym.prompts.lesson.parse_lesson`` reads: the lesson object as JSON."""
    return json.dumps(oracle_lesson(episode, crit))


def oracle_reflection(
    episode: Episode, form: str = "in_context", *, system_prompt: str | None = None, crit: Critique | None = None
) -> str:
    """ERL's reflection Δ on a (failed) attempt: advice naming the mistake and the plan (privileged).

    ``in_context``: a few sentences of advice for the next attempt at the same task. ``rulebook``: the
    instructions ``system_prompt`` rewritten with the rule and the plan appended.
    """
    c = crit or critique(episode)
    parts = []
    if c.mistake:
        parts.append(f"Last time: {c.mistake}")
    if c.better:
        parts.append(f"There, move {c.better} instead.")
    if c.plan and not c.slippery:
        parts.append(f"Plan from the start: {_walk_text(c)}.")
    elif c.plan:
        parts.append(f"Best first move from the start: {c.plan[0]}.")
    parts.append(c.rule)
    advice = " ".join(p for p in parts if p)
    if form == "in_context":
        return advice
    if form == "rulebook":
        base = (system_prompt or "").strip()
        rules = f"Rules learned from a failed attempt: {c.rule}\nFor this task: {advice}"
        return f"{base}\n\n{rules}" if base else rules
    raise ValueError(f"reflection form must be 'in_context' or 'rulebook', got {form!r}")


def oracle_reflection_reply(
    episode: Episode, form: str = "in_context", *, system_prompt: str | None = None, crit: Critique | None = None
) -> str:
    """The reflector reply ``agentgym.prompts.reflection.parse_reflection`` reads (tagged)."""
    tag = "reflection" if form == "in_context" else "prompt"
    return f"<{tag}>{oracle_reflection(episode, form, system_prompt=system_prompt, crit=crit)}</{tag}>"


class OracleAnalyser:
    """SEED's analyser as the privileged oracle: ``analyser(episodes) -> replies`` (JSON lesson objects).

    :class:`agentgym.rl.hooks.LessonWriter` calls it with the finished episodes themselves (``reads_episodes``)
    instead of the analyser chats a model reads.
    """

    reads_episodes = True
    name = "oracle"

    def __call__(self, episodes: list[Episode]) -> list[str]:
        return [oracle_lesson_reply(ep) for ep in episodes]
