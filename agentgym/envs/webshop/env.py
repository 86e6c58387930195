"""WebShop as a text environment: our engine over the original data, search and reward."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentgym.core import TextEnv, action_length_error, normalize_action
from agentgym.envs.webshop.catalog import PRICE_SEED
from agentgym.envs.webshop.engine import ShopSession, StepResult, WebShopEngine, get_engine
from agentgym.envs.webshop.goals import SPLITS, split_indices
from agentgym.envs.webshop.pages import END_BUTTON, NEXT_PAGE, Links, to_html, to_text, to_text_rich

#: The original's action pattern (``engine.parse_action``): a name, then ``[argument]``. Documentation and tests
#: only: :func:`parse_action` computes the same match in linear time (backtracking this pattern is quadratic:
#: ``"[" * 100_000`` took over 20 s).
ACTION_RE = re.compile(r"(.+)\[(.+)\]")

#: Longest query accepted; Lucene refuses queries of more than 1,024 clauses, so the original fails far below 10 kB.
MAX_QUERY_CHARS = 1000

OBSERVATION_MODES = ("text", "text_rich", "html")


def parse_action(action: str) -> tuple[str, str | None]:
    """``"search[red shoes]"`` -> ``("search", "red shoes")``; no brackets -> ``(action, None)`` (original rule).

    Exactly ``ACTION_RE.match(action)``, in linear time: ``.`` stops at a newline, so the match lies in the first
    line; the greedy argument ends at the line's last ``]`` and the greedy name at the last ``[`` that leaves a
    non-empty name and a non-empty argument before that ``]``.
    """
    newline = action.find("\n")
    line = action if newline < 0 else action[:newline]
    close = line.rfind("]")
    open_ = line.rfind("[", 1, close - 1) if close >= 3 else -1
    if open_ < 0:
        return action, None
    return line[:open_], line[open_ + 1 : close]


class WebShopEnv(TextEnv):
    """Buy the product an instruction asks for in a simulated web shop (WebShop, Yao et al. 2022).

    ## Description
    The agent reads a shopping instruction ("i need a long lasting 6.76 fl oz bottle of l'eau d'issey, and price
    lower than 100.00 dollars"), searches a catalogue of real Amazon products, opens results, picks options
    (size, colour, ...) and buys. Pages, actions and the score follow the original ``web_agent_site`` text env
    (princeton-nlp/WebShop) on the same data: BM25 search ranked like its Lucene index, the same goals, and its
    ``get_reward``. See :mod:`agentgym.envs.webshop.search`, ``goals``, ``reward`` for what is matched and how.

    ## Action Space
    A string, as in the original ``WebAgentTextEnv``: ``search[query]`` (the query is lower-cased and split on
    spaces) or ``click[label]`` with a label from ``info["available_actions"]["clickables"]`` (buttons such as
    ``back to search``, ``next >``, ``< prev``, ``description``, ``features``, ``reviews``, ``buy now``; product
    asins on results pages; option values on item pages). The argument is lower-cased before matching, the
    action name is case-sensitive, and whitespace around the action is ignored. As in the original,
    ``search[...]`` works from any page, although only the search page shows a search bar.

    ## Observation Space
    ``observation_mode="text"`` (default): the page's visible text nodes joined with ``" [SEP] "``, exactly
    the original's simple text mode. ``"text_rich"``: the original's rich mode (``[button] ... [button_]``
    markers). ``"html"``: the page's HTML.

    ## Starting State
    The search page of a goal: ``options={"split": "test"|"train", "index": i}`` picks the i-th goal of a split
    (test = goals 0-499, train = 500 onwards), ``{"goal_index": i}`` any goal; ``{"split": ...}`` alone or no
    options draws a goal of the split (default ``split`` argument) with ``self.np_random``.

    ## Rewards
    0 until ``click[buy now]``; then the task score in [0, 1] (the original's ``get_reward``). RL setups that
    want the 10x success reward of verl-agent scale it themselves.

    ## Episode End
    Terminates on ``click[buy now]``. Truncation after ``max_episode_steps`` (15 for ``WebShop-v0``, as
    verl-agent) is the TimeLimit's.

    ## Information
    Every step: ``is_action_valid``, ``invalid_reason`` (when invalid), ``success`` (task score == 1),
    ``task_id`` (``"webshop/<goal index>"``), ``task_score`` (0 before the purchase), ``goal_index``,
    ``instruction``, ``page`` (``search``, ``results``, ``item``, ``item_sub``, ``done``),
    ``available_actions`` (``{"has_search_bar": bool, "clickables": [...]}``, the original's
    ``get_available_actions``), ``admissible_actions`` (``search[<query>]`` where there is a search bar, then
    ``click[x]`` for every clickable except the search button). On the purchase step also ``goal`` (the goal
    dict), ``purchased`` (``{"asin", "options", "price"}``) and ``reward_info`` (the score's parts).

    ## Arguments
    * ``observation_mode``: ``"text"``, ``"text_rich"`` or ``"html"``.
    * ``split``: split drawn from when ``reset`` gets no goal (``"train"`` by default).
    * ``data_dir``: WebShop data folder (default ``$AGENTGYM_DATA/webshop``).
    * ``num_products``: keep only the first N products.
    * ``human_goals``: False (default: the synthetic goals the papers use), True (human-written goals from
      ``items_human_ins.json``, or the ``instructions`` of processed products; only 13 on the 1k catalogue), or
      None (human goals when ``items_human_ins.json`` is in the data folder, synthetic otherwise).
    * ``price_seed``: seed of the sale prices of range-priced products and of the goals' price bounds (the
      original leaves them unseeded; :data:`agentgym.envs.webshop.catalog.PRICE_SEED` by default).
    * ``show_attrs``: show the "Attributes" sub page (the original's ``show_attrs``; off).
    * ``engine``: a :class:`~agentgym.envs.webshop.engine.WebShopEngine` to share (by default one engine per
      data configuration and process is built once and shared by every env).

    ## Registered Configurations
    * ``agentgym/WebShop-v0``: 1k catalogue, synthetic goals (6,910), text mode, 15 steps.
    * ``agentgym/WebShopBrowser-v0``: the same through the Flask shop in headless Chromium (``web`` extra).

    ## Version History
    * v0: initial version, following the original ``WebAgentTextEnv`` and ``get_reward``; unsupported: the
      original's debugging search prefixes ``<r>``, ``<a>``, ``<c>``, ``<q>`` (searched as plain words);
      queries over 1,000 characters or blank are invalid actions.
      Later, without a version bump: actions over :data:`agentgym.core.MAX_ACTION_LENGTH` (65,536 characters)
      are invalid (no recorded episode in leaderboards/ has an action over 280 characters, so no score moves), and
      parsing became linear in the action's length with the same results.
    """

    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        observation_mode: str = "text",
        split: str = "train",
        data_dir: str | Path | None = None,
        num_products: int | None = None,
        human_goals: bool | None = False,
        price_seed: int = PRICE_SEED,
        show_attrs: bool = False,
        render_mode: str | None = None,
        engine: WebShopEngine | None = None,
    ) -> None:
        super().__init__(render_mode=render_mode)
        if observation_mode not in OBSERVATION_MODES:
            raise ValueError(f"observation_mode must be one of {OBSERVATION_MODES}, got {observation_mode!r}")
        if split not in SPLITS:
            raise ValueError(f"split must be one of {tuple(SPLITS)}, got {split!r}")
        self.observation_mode = observation_mode
        self.split = split
        self.show_attrs = show_attrs
        self.engine = engine or get_engine(
            data_dir, num_products=num_products, human_goals=human_goals, price_seed=price_seed
        )
        self.session: ShopSession | None = None
        self.goal_index = -1
        self.session_id = "session"

    # -- Gymnasium API -------------------------------------------------------------------------------------
    @property
    def goals(self) -> list[dict[str, Any]]:
        return self.engine.goals

    def _choose_goal(self, options: dict[str, Any] | None) -> int:
        options = dict(options or {})
        n = len(self.goals)
        if "goal_index" in options:
            idx = int(options["goal_index"])
            if not 0 <= idx < n:
                raise ValueError(f"goal_index must be in [0, {n}), got {idx}")
            return idx
        split = options.get("split", self.split)
        indices = split_indices(split, n)
        if "index" in options:
            i = int(options["index"])
            if not 0 <= i < len(indices):
                raise ValueError(f"index must be in [0, {len(indices)}) for split {split!r}, got {i}")
            return indices[i]
        if len(indices) == 0:
            raise ValueError(f"split {split!r} has no goals in this catalogue ({n} goals)")
        return indices[int(self.np_random.integers(len(indices)))]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self.goal_index = self._choose_goal(options)
        self.session_id = f"fixed_{self.goal_index}"
        self.session = ShopSession(
            self.engine, self.goals[self.goal_index], session_id=self.session_id, show_attrs=self.show_attrs
        )
        obs = self._observe()
        return obs, self._info(StepResult(True))

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        assert self.session is not None, "call reset() before step()"
        result = self._act(normalize_action(action))
        obs = self._observe()
        return obs, float(result.reward), result.done, False, self._info(result)

    def _act(self, action: str) -> StepResult:
        session = self.session
        assert session is not None
        if session.done:
            return StepResult(False, "the episode is over (the product was bought); call reset()")
        if (too_long := action_length_error(action)) is not None:
            return StepResult(False, too_long)
        name, arg = parse_action(action.strip())
        if arg is None:
            return StepResult(False, f"cannot parse {action[:80]!r}: use search[query] or click[label]")
        arg = arg.lower()
        # action names are case-sensitive, as in the original (`Search[x]` does nothing there either)
        if name == "search":
            if not arg.strip():
                return StepResult(False, "empty search query")
            if len(arg) > MAX_QUERY_CHARS:
                return StepResult(False, f"search query longer than {MAX_QUERY_CHARS} characters")
            return self._search(arg)
        if name == "click":
            return self._click(arg)
        return StepResult(False, f"unknown action {name[:40]!r}: use search[query] or click[label]")

    def _search(self, query: str) -> StepResult:
        assert self.session is not None
        return self.session.search(query)

    def _click(self, target: str) -> StepResult:
        assert self.session is not None
        return self.session.click(target)

    # -- observations and info -------------------------------------------------------------------------------
    def _observe(self) -> str:
        session = self.session
        assert session is not None and session.page is not None
        if self.observation_mode == "text":
            obs = to_text(session.page)
        elif self.observation_mode == "text_rich":
            obs = to_text_rich(session.page, self.session_id, session.asins)
        else:
            obs = to_html(session.page, Links(self.session_id))
        self._last_observation = obs
        return obs

    def available_actions(self) -> dict[str, Any]:
        """The original's ``get_available_actions``: search bar present, and the clickable labels."""
        session = self.session
        assert session is not None and session.page is not None
        return {"has_search_bar": session.page.kind == "search", "clickables": list(session.clickables())}

    def _info(self, result: StepResult) -> dict[str, Any]:
        session = self.session
        assert session is not None and session.page is not None
        available = self.available_actions()
        admissible = ["search[<query>]"] if available["has_search_bar"] else []
        admissible += [f"click[{c}]" for c in available["clickables"] if c != "search"]
        score = float(session.score) if session.score is not None else 0.0
        info = self.make_info(
            task_id=f"webshop/{self.goal_index}",
            success=session.score is not None and session.score == 1.0,
            is_action_valid=result.valid,
            invalid_reason=result.reason,
            task_score=score,
            goal_index=self.goal_index,
            instruction=session.instruction,
            page=session.page.kind,
            available_actions=available,
            admissible_actions=admissible,
        )
        if result.done:
            info["goal"] = session.goal
            info["purchased"] = {
                "asin": session.asin,
                "options": dict(session.options),
                "price": self.engine.catalog.prices[session.asin] if session.asin else None,
            }
            info["reward_info"] = session.reward_info
        return info

    # -- expert ------------------------------------------------------------------------------------------------
    def expert_action(self) -> str:
        """Search the instruction (the product title if the target is not on the first results page), open the
        target, select each goal option, buy."""
        session = self.session
        assert session is not None and session.page is not None
        goal = self.goals[self.goal_index]
        target = goal["asin"]
        page = session.page
        if page.kind == "search":
            return f"search[{self._expert_query()}]"
        if page.kind == "results":
            if any(p["asin"] == target for p in page.products):
                return f"click[{target.lower()}]"
            hits = self.engine.search(page.keywords)
            pos = next((i for i, p in enumerate(hits) if p["asin"] == target), None)
            if pos is not None and pos >= page.page * 10:
                return f"click[{NEXT_PAGE.lower()}]"
            return "click[back to search]"
        if page.kind in ("item", "item_sub"):
            if session.asin != target or page.kind == "item_sub":
                return "click[< prev]"
            wanted = goal["goal_options"].values() if isinstance(goal["goal_options"], dict) else goal["goal_options"]
            table = session.clickables()
            for value in wanted:
                v = str(value).lower()
                if v in table and table[v][0] == "option" and session.options.get(table[v][1]) != v:
                    return f"click[{v}]"
            return f"click[{END_BUTTON.lower()}]"
        return "click[buy now]"

    def _expert_query(self) -> str:
        goal = self.goals[self.goal_index]
        instruction = goal["instruction_text"].lower()
        first_page = self.engine.search(instruction.split(" "))[:10]
        if len(instruction) <= MAX_QUERY_CHARS and any(p["asin"] == goal["asin"] for p in first_page):
            return instruction
        return self.engine.catalog.by_asin[goal["asin"]]["Title"].lower()[:MAX_QUERY_CHARS]
