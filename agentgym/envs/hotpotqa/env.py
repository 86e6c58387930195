"""HotpotQA as a multi-turn text env: search and read Wikipedia paragraphs, then answer (ReAct's WikiEnv)."""

from __future__ import annotations

import copy
import functools
import os
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gymnasium import spaces

from agentgym.core import CHARSET, TextEnv, action_length_error, normalize_action, text_space
from agentgym.envs.hotpotqa.data import Question, load_cached, resolve_file
from agentgym.envs.hotpotqa.metrics import AnswerScores, score_answer, supporting_title_recall
from agentgym.envs.hotpotqa.search import LocalSearch, OpenIndex, Paragraph, ParagraphSearch

#: Sentences of a paragraph a page search shows (ReAct's ``WikiEnv.get_page_obs`` shows the first 5).
PAGE_SENTENCES = 5
#: Titles listed after a failed search (ReAct shows the first 5 search results).
SIMILAR_TITLES = 5
#: Longest search query / lookup keyword accepted; longer ones are malformed (titles are < 200 characters).
MAX_QUERY_CHARS = 300
#: Files with at least this many paragraphs keep their open-setting BM25 index on disk (building the
#: full dev set's takes ~10 s; loading it well under one).
DISK_CACHE_MIN_PARAGRAPHS = 20_000
#: Part of the disk cache key: bump when tokenisation or BM25 parameters change.
INDEX_VERSION = "bm25-v1"
#: Questions whose tokenised paragraphs are kept per loaded file (distractor setting).
LOCAL_CACHE_SIZE = 1024
#: How much of a bad action an observation quotes back.
ECHO_CHARS = 80

VERBS = ("search", "lookup", "finish")
_ACTION = re.compile(r"^([A-Za-z]+)\s*\[(.*)\]$", re.DOTALL)
_LEADING_WORD = re.compile(r"^([A-Za-z]+)")
# ERL's solver takes the first \boxed{...} of the reply as its answer (examples/erl_hotpot/erl_hotpot_flow.py):
# the first match of this pattern, which :func:`first_boxed` finds in linear time (``search`` is quadratic on
# ``"\\boxed{" * n``: 2.5 s at n = 10,000).
_BOXED = re.compile(r"\\boxed\{([^}]+)\}")
_BOXED_OPEN = "\\boxed{"
# C0/C1 control characters other than tab and newline: dropped from actions before parsing.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

_TOOLS_REACT = (
    "Tools:\n"
    "search[entity]: searches Wikipedia for the entity and returns the first sentences of its paragraph if it "
    "exists; if not, it returns similar titles to search.\n"
    "lookup[keyword]: returns the next sentence containing the keyword in the current paragraph.\n"
    "finish[answer]: submits your answer and ends the episode."
)
_TOOLS_RETRIEVE = (
    "Tools:\n"
    "search[query]: retrieves the {k} Wikipedia paragraphs that best match the query.\n"
    "lookup[keyword]: returns the next sentence containing the keyword in the best-matching paragraph of the "
    "last search.\n"
    "{finish}"
)
_FINISH_REACT = "finish[answer]: submits your answer and ends the episode."
_FINISH_BOXED = "Give your final answer as \\boxed{answer} (or finish[answer]); that ends the episode."


@functools.cache
def _wide_text_space() -> spaces.Text:
    # Wikipedia text holds every script; the observation space admits the whole Basic Multilingual Plane
    # (less surrogates and control characters) so check_env and Text.contains accept real observations.
    bmp = (chr(c) for c in range(0x20, 0x10000) if not (0x7F <= c < 0xA0 or 0xD800 <= c < 0xE000))
    return text_space(charset=frozenset(CHARSET).union(bmp))


def _observation_space() -> spaces.Text:
    # Building a 63k-character Text space takes ~50 ms; each env gets a shallow copy (own RNG, shared tables).
    return copy.copy(_wide_text_space())


@dataclass
class _Dataset:
    """One loaded file, shared by every env of the process that reads it."""

    path: Path
    questions: list[Question]
    by_id: dict[str, int]
    open_index: OpenIndex | None = field(default=None)

    local: OrderedDict[int, LocalSearch] = field(default_factory=OrderedDict)

    def index(self) -> OpenIndex:
        if self.open_index is None:
            contexts = [q.context for q in self.questions]
            cache = None
            if sum(len(c) for c in contexts) >= DISK_CACHE_MIN_PARAGRAPHS:
                from agentgym.data import cache_dir

                st = self.path.stat()
                name = f"{self.path.stem}-{st.st_size}-{st.st_mtime_ns}-{INDEX_VERSION}"
                cache = cache_dir("hotpotqa", "bm25") / name
            self.open_index = OpenIndex.from_questions(contexts, cache=cache)
        return self.open_index

    def local_search(self, index: int) -> LocalSearch:
        # RL replays each question many times (a GRPO group, several epochs): keep recent questions'
        # tokenised paragraphs instead of re-tokenising them on every episode.
        search = self.local.get(index)
        if search is None:
            context = self.questions[index].context
            search = self.local[index] = LocalSearch([Paragraph(title, sentences) for title, sentences in context])
            if len(self.local) > LOCAL_CACHE_SIZE:
                self.local.popitem(last=False)
        else:
            self.local.move_to_end(index)
        return search


_DATASETS: dict[tuple[str, int, int], _Dataset] = {}


def _dataset(path: Path) -> _Dataset:
    path = path.resolve()
    st = os.stat(path)
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _DATASETS:
        questions = load_cached(path)
        _DATASETS[key] = _Dataset(path, questions, {q.id: i for i, q in enumerate(questions)})
    return _DATASETS[key]


# Characters outside the observation space (controls other than white space, surrogates, beyond the BMP).
_OUTSIDE_SPACE = re.compile("[^\t\n\r\x0b\x0c\x20-\x7e\xa0-\ud7ff\ue000-\uffff]")


def _fit(text: str) -> str:
    """``text`` with every character outside the observation space written as a ``\\U0001f680`` escape."""
    if text.isascii() and text.isprintable():
        return text
    return _OUTSIDE_SPACE.sub(lambda m: f"\\U{ord(m.group()):08x}", text)


def _echo(text: str) -> str:
    return text if len(text) <= ECHO_CHARS else text[:ECHO_CHARS] + f"... ({len(text)} characters)"


def first_boxed(text: str) -> str | None:
    """The argument of ``_BOXED.search(text)`` (the first ``\\boxed{...}`` with a non-empty body), or None.

    Linear: the body of an opening ends at the next ``}``; an empty body moves on to the next opening, and once no
    ``}`` follows an opening, none follows any later one.
    """
    start = text.find(_BOXED_OPEN)
    while start >= 0:
        body = start + len(_BOXED_OPEN)
        close = text.find("}", body)
        if close < 0:
            return None
        if close > body:
            return text[body:close]
        start = text.find(_BOXED_OPEN, start + 1)
    return None


def parse_action(text: str) -> tuple[str, str] | str:
    """Split ``verb[argument]`` (verb case-insensitive) into ``(verb, argument)``, or return why it is malformed.

    ``search`` and ``lookup`` arguments may not contain brackets; a ``finish`` answer may contain balanced ones.
    """
    m = _ACTION.match(text)
    if m is None:
        word = _LEADING_WORD.match(text)
        verb = word.group(1).lower() if word else ""
        if verb in VERBS:
            if "[" not in text:
                return f"missing brackets: write {verb}[...]"
            if "]" not in text:
                return f"missing closing bracket: write {verb}[...]"
            return f"text after the closing bracket: send one action, exactly {verb}[...]"
        return "not an action: use search[entity], lookup[keyword] or finish[answer]"
    verb, arg = m.group(1).lower(), m.group(2)
    if verb not in VERBS:
        return f"unknown action {_echo(m.group(1))!r}: use search[entity], lookup[keyword] or finish[answer]"
    if verb == "finish":
        depth = 0
        for ch in arg:
            depth += (ch == "[") - (ch == "]")
            if depth < 0:
                break
        if depth != 0:
            return "unbalanced brackets in the answer: write finish[answer]"
    elif "[" in arg or "]" in arg:
        close = arg.find("]")
        if close >= 0 and "[" not in arg[:close]:
            return f"text after the closing bracket: send one action, exactly {verb}[...]"
        return f"nested brackets in {verb}[...]: titles and keywords contain no square brackets"
    return verb, arg.strip()


class HotpotQAEnv(TextEnv):
    """Multi-hop question answering over Wikipedia paragraphs, with ReAct's search / lookup / finish tools.

    ## Description
    Each episode is one HotpotQA question (Yang et al., 2018) whose answer needs facts from two Wikipedia
    paragraphs. The agent searches for paragraphs, reads sentences from them, and submits an answer, as in
    ReAct's HotpotQA setup (Yao et al., 2023; ``wikienv.py`` and ``wrappers.py`` of ysymyth/ReAct) but
    offline: the "Wikipedia" is the HotpotQA paragraphs themselves.

    Two settings:

    * ``"distractor"``: search runs over the question's own 10 paragraphs (its 2 gold paragraphs and 8
      distractors), as in HotpotQA's distractor setting.
    * ``"open"``: search runs over every distinct paragraph of the loaded file (1,000 for the 100-question
      sample; up to 74,050 for the full dev set, fewer once repeated titles are merged), indexed with BM25
      (``bm25s`` + Snowball stemmer).

    ## Action Space
    A string (``Text``), one action per step, verb case-insensitive:

    * ``search[entity]``: with ``top_k=None`` (ReAct), a title search: if ``entity`` names a paragraph's title
      (ignoring case, punctuation and spacing, or near-exact: difflib ratio >= 0.9) the observation is that
      paragraph's first 5 sentences and it becomes the current paragraph; otherwise
      ``Could not find [entity]. Similar: [...]`` with 5 titles to try (distractor: BM25 blended with title
      likeness; open: BM25). With
      ``top_k=k`` (ERL-style retrieval) the observation lists the ``k`` best BM25 paragraphs as
      ``Doc i (Title: T) text``, an exact title match first; the first becomes the current paragraph.
    * ``lookup[keyword]``: the next sentence of the current paragraph containing ``keyword`` (case-insensitive)
      as ``(Result i / n) sentence``; ``No more results.`` once they run out. A new keyword or a new search
      restarts the count.
    * ``finish[answer]``: submits the answer and ends the episode. With ``answer_format="boxed"`` an action
      containing ``\\boxed{answer}`` (the first one counts) also submits: ERL's solver answers this way. ERL
      stops at the first reply without a tool call; here such a reply without an answer is an invalid
      action (the turn is spent, the episode goes on), as every agentgym env treats malformed actions.

    Malformed actions (no brackets, nested or unbalanced brackets, unknown verb, empty or > 300-character
    query, lookup before any search) leave the state unchanged and return an ``Invalid action: ...``
    observation with ``info["is_action_valid"] = False``. Control characters are dropped before parsing.
    Characters outside the observation space (e.g. emoji echoed from a query) appear as ``\\U0001f680`` escapes.

    ## Observation Space
    A string (``Text`` over the Basic Multilingual Plane). After reset: ``Question: ...`` followed by the tool
    descriptions; after each step: the tool's output.

    ## Starting State
    ``reset(seed=s)`` draws the question with ``self.np_random``; ``options={"index": i}`` or
    ``options={"id": qid}`` selects one (``info["task_id"]`` is the HotpotQA ``_id``);
    ``options={"split": name}`` plays this episode from another file (``agentgym eval --split``).

    ## Rewards
    0 on every step but the one that submits an answer, which earns the answer's token F1 (``reward="f1"``,
    default) or exact match (``reward="em"``) against the gold answer, normalised exactly as the official
    ``hotpot_evaluate_v1.py`` (lowercase, no punctuation, no articles, single spaces; a yes/no/noanswer
    mismatch scores 0). An episode that runs out of steps scores 0. (ReAct's own wrapper
    rewards 1 when the Levenshtein ratio of the normalised answers exceeds 0.633 and reports EM; ERL reports F1.)

    ## Episode End
    Terminated when an answer is submitted. Truncated by the registered ``max_episode_steps``: 7 for ReAct's setup (its
    ``webthink`` loop runs steps 1-7, then forces ``finish[]``), 5 for ERL's (``max_turns=5``).

    ## Information
    On every step: ``is_action_valid``, ``invalid_reason`` (when invalid), ``success`` (EM == 1, i.e. the
    normalised answer equals the gold one), ``task_id``, ``question`` (the question text), ``task_type`` (``bridge`` / ``comparison``),
    ``level``, ``answer`` (the submitted answer, None before), ``em``, ``f1``, ``precision``, ``recall`` (of the
    submitted answer; 0.0 before one), ``sp_recall`` (fraction of the supporting-fact titles among the
    paragraphs the agent has opened or been shown). On the step that ends the episode also ``gold_answer``
    and ``supporting_titles``.

    ## Arguments
    * ``setting``: ``"distractor"`` (default) or ``"open"``.
    * ``split``: ``"dev_distractor"``, ``"dev_fullwiki"``, ``"train"`` or ``"sample"``; default: the full dev
      distractor file when present in ``$AGENTGYM_DATA/hotpotqa``, else the 100-question sample.
    * ``file``: an official HotpotQA JSON file (absolute, or relative to ``$AGENTGYM_DATA/hotpotqa``);
      overrides ``split``.
    * ``reward``: ``"f1"`` (default) or ``"em"``.
    * ``top_k``: None (ReAct title search, default) or the number of paragraphs a search retrieves.
    * ``answer_format``: ``"react"`` (default: ``finish[answer]``) or ``"boxed"`` (also ``\\boxed{answer}``).
    * ``render_mode``: None or ``"ansi"``.

    Missing data raises :class:`agentgym.data.DataNotFoundError` naming ``agentgym data download hotpotqa``.

    ## Registered Configurations
    * ``agentgym/HotpotQA-v0``: ReAct setup, distractor setting, 7 steps, F1 reward.
    * ``agentgym/HotpotQAOpen-v0``: ReAct setup, open setting (BM25 over all paragraphs), 7 steps.
    * ``agentgym/HotpotQAERL-v0``: ERL's setup (microsoft/experiential_rl ``examples/erl_hotpot``): open
      setting, searches retrieve 5 paragraphs (its retriever's ``max_results=5``), answers in ``\\boxed{}``,
      5 turns. ERL retrieves from a dense (E5) index over a 2018 Wikipedia dump; here BM25 over the loaded
      file's paragraphs stands in. ERL trains on rLLM's search reward (F1, with partial answers below F1 0.3
      scored 0 in rLLM's public version) and reports F1; this env's reward stays the plain F1.

    The open setting's BM25 index is built once per process and file; for files of >= 20k paragraphs it is
    also kept under ``agentgym.data.cache_dir("hotpotqa", "bm25")`` (keyed by file name, size and mtime).

    ## Version History
    * v0: initial version (ReAct's WikiEnv tools and observation strings; official HotpotQA metrics).
      Later, without a version bump: actions over :data:`agentgym.core.MAX_ACTION_LENGTH` (65,536 characters)
      are invalid (no recorded episode in leaderboards/ has an action over 280 characters, so no score moves), and
      parsing became linear in the action's length with the same results.
    """

    def __init__(
        self,
        setting: str = "distractor",
        split: str | None = None,
        file: str | os.PathLike[str] | None = None,
        reward: str = "f1",
        top_k: int | None = None,
        answer_format: str = "react",
        render_mode: str | None = None,
    ) -> None:
        super().__init__(render_mode=render_mode)
        if setting not in ("distractor", "open"):
            raise ValueError(f"setting must be 'distractor' or 'open', got {setting!r}")
        if reward not in ("f1", "em"):
            raise ValueError(f"reward must be 'f1' or 'em', got {reward!r}")
        if top_k is not None and (not isinstance(top_k, int) or top_k < 1):
            raise ValueError(f"top_k must be None or a positive int, got {top_k!r}")
        if answer_format not in ("react", "boxed"):
            raise ValueError(f"answer_format must be 'react' or 'boxed', got {answer_format!r}")
        self.setting = setting
        self.reward_type = reward
        self.top_k = top_k
        self.answer_format = answer_format
        self.observation_space = _observation_space()
        self._default_data = _dataset(resolve_file(file=file, split=split))
        self._use(self._default_data)
        self._question: Question | None = None
        self._corpus: ParagraphSearch | None = None
        self._reset_state()

    # -- public helpers -----------------------------------------------------------------------------
    @property
    def questions(self) -> list[Question]:
        """The questions of the loaded file, in file order (``options={"index": i}`` picks ``questions[i]``)."""
        return self._data.questions

    @property
    def question(self) -> Question:
        """The current question (privileged: it holds the gold answer)."""
        if self._question is None:
            raise RuntimeError("call reset() first")
        return self._question

    def __len__(self) -> int:
        return len(self._data.questions)

    # -- gym API --------------------------------------------------------------------------------------
    def _reset_state(self) -> None:
        self._page: Paragraph | None = None
        self._lookup_keyword: str | None = None
        self._lookup_list: list[str] = []
        self._lookup_count = 0
        self._opened: set[str] = set()
        self._searched: set[str] = set()
        self._answer: str | None = None
        self._scores = AnswerScores(0.0, 0.0, 0.0, 0.0)
        self._done = False

    def _use(self, dataset: _Dataset) -> None:
        self._data = dataset
        self.data_path = dataset.path
        self._open: OpenIndex | None = dataset.index() if self.setting == "open" else None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        # options["split"] (what `agentgym eval --split` sends) reads another file for this episode only.
        split = options.get("split")
        self._use(self._default_data if split is None else _dataset(resolve_file(split=split)))
        n = len(self._data.questions)
        if "id" in options:
            qid = options["id"]
            if qid not in self._data.by_id:
                raise ValueError(f"options['id']={qid!r} is not a question id of {self.data_path.name}")
            index = self._data.by_id[qid]
        elif "index" in options:
            index = options["index"]
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
                raise ValueError(f"options['index'] must be an int in [0, {n}), got {index!r}")
        else:
            index = int(self.np_random.integers(n))
        self._question = q = self._data.questions[index]
        self._reset_state()
        self._corpus = self._open if self._open is not None else self._data.local_search(index)
        obs = _fit(f"Question: {q.question}\n{self._tools_text()}")
        self._last_observation = obs
        return obs, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._question is None:
            raise RuntimeError("call reset() before step()")
        if self._done:
            return self._invalid("the episode is over: call reset() to start a new question", terminated=True)
        text = normalize_action(action)
        if (too_long := action_length_error(text)) is not None:
            return self._invalid(too_long)
        text = _CONTROL.sub("", text).strip()
        if self.answer_format == "boxed" and not _ACTION.match(text):
            boxed = first_boxed(text)
            if boxed is not None:
                return self._finish(boxed.strip())
            if "\\boxed{}" in text:
                return self._invalid("empty \\boxed{}: write \\boxed{answer}", quote=text)
            if "\\boxed{" in text:
                return self._invalid("\\boxed{ without a closing brace: write \\boxed{answer}", quote=text)
            return self._invalid(
                "neither a tool call nor an answer: use search[query], lookup[keyword] or \\boxed{answer}", quote=text
            )
        parsed = parse_action(text)
        if isinstance(parsed, str):
            return self._invalid(parsed, quote=text)
        verb, arg = parsed
        if verb == "finish":
            return self._finish(arg)
        if not arg:
            return self._invalid(f"empty {verb}: write {verb}[{'entity' if verb == 'search' else 'keyword'}]")
        if len(arg) > MAX_QUERY_CHARS:
            return self._invalid(f"{verb} argument too long ({len(arg)} characters; at most {MAX_QUERY_CHARS})")
        if verb == "search":
            return self._step(self._search(arg))
        if self._page is None:
            return self._invalid("no paragraph is open: search[entity] first, then lookup[keyword]")
        return self._step(self._lookup(arg))

    def expert_action(self) -> str:
        """Search each supporting-fact title not yet opened (each once), then ``finish[gold answer]``."""
        q = self.question
        for title in q.supporting_titles:
            if title not in self._opened and title not in self._searched:
                return f"search[{title}]"
        return f"finish[{q.answer}]"

    # -- tools ----------------------------------------------------------------------------------------
    def _tools_text(self) -> str:
        if self.top_k is None and self.answer_format == "react":
            return _TOOLS_REACT
        finish = _FINISH_BOXED if self.answer_format == "boxed" else _FINISH_REACT
        if self.top_k is None:
            return _TOOLS_REACT.replace(_FINISH_REACT, finish)
        return _TOOLS_RETRIEVE.format(k=self.top_k, finish=finish)

    def _open_paragraph(self, paragraph: Paragraph) -> None:
        self._page = paragraph
        self._opened.add(paragraph.title)
        self._lookup_keyword, self._lookup_list, self._lookup_count = None, [], 0

    def _search(self, query: str) -> str:
        assert self._corpus is not None
        self._searched.add(query)
        hit = self._corpus.find_title(query)
        if self.top_k is None:
            if hit is None:
                return f"Could not find [{query}]. Similar: {self._corpus.similar_titles(query, SIMILAR_TITLES)}."
            paragraph = self._corpus.paragraph(hit)
            self._open_paragraph(paragraph)
            shown = " ".join(s.strip() for s in paragraph.sentences[:PAGE_SENTENCES] if s.strip())
            return shown or f"The paragraph {paragraph.title!r} is empty."
        ranked = self._corpus.rank(query, self.top_k)
        if hit is not None:
            ranked = [hit] + [i for i in ranked if i != hit][: self.top_k - 1]
        if not ranked:
            return f"No results for [{query}]. Try other words."
        docs = [self._corpus.paragraph(i) for i in ranked]
        for doc in reversed(docs):  # the best one ends up current, every shown one counts as opened
            self._open_paragraph(doc)
        return "\n".join(f"Doc {j} (Title: {d.title}) {d.text}" for j, d in enumerate(docs, 1))

    def _lookup(self, keyword: str) -> str:
        assert self._page is not None
        if keyword != self._lookup_keyword:
            needle = keyword.lower()
            self._lookup_keyword = keyword
            self._lookup_list = [s.strip() for s in self._page.sentences if needle in s.lower()]
            self._lookup_count = 0
        if self._lookup_count >= len(self._lookup_list):
            return "No more results."
        self._lookup_count += 1
        return f"(Result {self._lookup_count} / {len(self._lookup_list)}) {self._lookup_list[self._lookup_count - 1]}"

    # -- endings and info -------------------------------------------------------------------------------
    def _finish(self, answer: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._answer = answer
        self._scores = score_answer(answer, self.question.answer)
        self._done = True
        reward = self._scores.f1 if self.reward_type == "f1" else self._scores.em
        obs = f"Episode finished, reward = {round(reward, 4)}"
        self._last_observation = obs
        return obs, float(reward), True, False, self._info(final=True)

    def _step(self, obs: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs = _fit(obs)  # queries are echoed and Wikipedia text may hold any character
        self._last_observation = obs
        return obs, 0.0, False, False, self._info()

    def _invalid(
        self, reason: str, quote: str | None = None, terminated: bool = False
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        obs = _fit(f"Invalid action: {reason}." + (f" You sent: {_echo(quote)!r}" if quote else ""))
        self._last_observation = obs
        return obs, 0.0, terminated, False, self._info(is_action_valid=False, invalid_reason=reason)

    def _info(self, final: bool = False, **validity: Any) -> dict[str, Any]:
        q = self.question
        s = self._scores
        info = self.make_info(
            task_id=q.id,
            success=s.em == 1.0,
            **validity,
            question=q.question,
            task_type=q.type,
            level=q.level,
            answer=self._answer,
            em=s.em,
            f1=s.f1,
            precision=s.precision,
            recall=s.recall,
            sp_recall=supporting_title_recall(self._opened, q.supporting_titles),
        )
        if final:
            info["gold_answer"] = q.answer
            info["supporting_titles"] = q.supporting_titles
        return info
