"""HotpotQA speed targets: reset <= 5 ms and step <= 1 ms (distractor); open search <= 5 ms (100-question pool).

Also the open search over a pool of >= 50k paragraphs: the real dev distractor set (7,405 x 10 paragraphs)
when ``$AGENTGYM_DATA/hotpotqa/hotpot_dev_distractor_v1.json`` exists, else a synthetic Wikipedia-like pool
of 60k paragraphs. Run with ``python -m pytest tests/benchmarks/test_bench_hotpotqa.py -o addopts=""``.
"""

from __future__ import annotations

import itertools
import time

import gymnasium as gym
import numpy as np
import pytest

import agentgym  # noqa: F401
from agentgym.data import data_dir
from agentgym.envs.hotpotqa.search import OpenIndex, Paragraph
from tests.conftest import require_data

pytestmark = pytest.mark.benchmark(group="hotpotqa")

SYNTHETIC_POOL = 60_000


@pytest.fixture(scope="module")
def sample():
    return require_data("hotpotqa", "hotpot_dev_distractor_sample100.json")


def _env(env_id: str = "agentgym/HotpotQA-v0", **kwargs):
    return gym.make(env_id, split="sample", **kwargs)


def test_reset_distractor(benchmark, sample):
    env = _env()
    indices = itertools.cycle(range(100))
    benchmark(lambda: env.reset(options={"index": next(indices)}))
    assert benchmark.stats["median"] < 5e-3


def _bench_step(benchmark, env, action_for, warm: list[str] = ()):
    """Time one step on a freshly reset env (the reset and the warm-up steps are not timed)."""
    indices = itertools.cycle(range(100))

    def setup():
        env.reset(options={"index": next(indices)})
        for a in warm:
            env.step(a if "{" not in a else a.format(title=env.unwrapped.question.supporting_titles[0]))
        return (action_for(env.unwrapped.question),), {}

    benchmark.pedantic(env.step, setup=setup, rounds=300, warmup_rounds=5)


def test_step_search_hit_distractor(benchmark, sample):
    _bench_step(benchmark, _env(), lambda q: f"search[{q.supporting_titles[0]}]")
    assert benchmark.stats["median"] < 1e-3


def test_step_search_miss_distractor(benchmark, sample):
    # A miss ranks all 10 paragraphs (BM25 + title likeness) to list similar titles: the costliest step.
    _bench_step(benchmark, _env(), lambda q: f"search[{q.question}]")
    assert benchmark.stats["median"] < 1e-3


def test_step_search_miss_distractor_cold(benchmark, sample):
    # The same on a question not seen before in this process (its paragraphs are tokenised on this step).
    env = _env()
    data = env.unwrapped._data

    def action_for(q):
        data.local.clear()
        env.reset(options={"index": data.by_id[q.id]})
        return f"search[{q.question}]"

    _bench_step(benchmark, env, action_for)
    assert benchmark.stats["median"] < 1e-3


def test_step_lookup_distractor(benchmark, sample):
    _bench_step(benchmark, _env(), lambda q: "lookup[the]", warm=["search[{title}]"])
    assert benchmark.stats["median"] < 1e-3


def test_step_finish_distractor(benchmark, sample):
    _bench_step(benchmark, _env(), lambda q: f"finish[{q.answer}]")
    assert benchmark.stats["median"] < 1e-3


def test_search_open_sample_pool(benchmark, sample):
    _bench_step(benchmark, _env("agentgym/HotpotQAOpen-v0"), lambda q: f"search[{q.question}]")
    assert benchmark.stats["median"] < 5e-3


def test_search_erl_top5_sample_pool(benchmark, sample):
    _bench_step(benchmark, _env("agentgym/HotpotQAERL-v0"), lambda q: f"search[{q.question}]")
    assert benchmark.stats["median"] < 5e-3


def _synthetic_pool(n: int, seed: int = 0) -> tuple[list[Paragraph], list[str]]:
    """``n`` Wikipedia-like paragraphs: Zipf-distributed words over a 50k vocabulary, 2-word titles."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=int(rng.integers(3, 10)))) for _ in range(50_000)]
    ranks = np.minimum(rng.zipf(1.3, size=(n, 80)) - 1, len(vocab) - 1)
    paragraphs, queries = [], []
    for i in range(n):
        words = [vocab[r] for r in ranks[i]]
        title = f"{words[0].title()} {vocab[int(rng.integers(len(vocab)))].title()} {i}"
        sentences = tuple(" ".join(words[j : j + 20]).capitalize() + "." for j in range(0, 80, 20))
        paragraphs.append(Paragraph(title, sentences))
        if i % (n // 500) == 0:
            queries.append(" ".join(words[5:12]))
    return paragraphs, queries


@pytest.fixture(scope="module")
def large_pool():
    full = data_dir() / "hotpotqa" / "hotpot_dev_distractor_v1.json"
    start = time.perf_counter()
    if full.is_file():
        env = gym.make("agentgym/HotpotQAOpen-v0", split="dev_distractor")
        index = env.unwrapped._open
        queries = [q.question for q in env.unwrapped.questions[:500]]
        source = "dev distractor"
    else:
        paragraphs, queries = _synthetic_pool(SYNTHETIC_POOL)
        start = time.perf_counter()  # time the index, not the generator
        index = OpenIndex(paragraphs)
        source = "synthetic"
    print(f"\nopen index over {len(index)} paragraphs ({source}) built in {time.perf_counter() - start:.1f} s")
    return index, queries


def test_search_open_large_pool(benchmark, large_pool):
    index, queries = large_pool
    assert len(index) >= 50_000
    cycle = itertools.cycle(queries)

    def search():
        # What a failed title search costs in the open setting: title look-up, then the similar titles.
        query = next(cycle)
        if index.find_title(query) is None:
            index.similar_titles(query, 5)

    benchmark(search)
    benchmark.extra_info["pool"] = len(index)


# -- the distractor setting's per-question BM25: hand-written vs bm25s ------------------------------
def _bm25s_local(paragraphs):
    """The same BM25 (Lucene variant, k1 0.9, b 0.4, our tokens) built with bm25s for one question's pool."""
    import bm25s

    from agentgym.envs.hotpotqa.search import K1, B, tokenize

    model = bm25s.BM25(k1=K1, b=B, method="lucene")
    model.index([tokenize(p.title + " " + p.text) for p in paragraphs], show_progress=False)

    def rank(query: str, k: int) -> list[int]:
        tokens = [t for t in dict.fromkeys(tokenize(query)) if t in model.vocab_dict]
        if not tokens:
            return []
        scores = model.get_scores(tokens)
        return sorted((i for i in range(len(scores)) if scores[i] > 0), key=lambda i: (-scores[i], i))[:k]

    return rank


def _local_workload(sample):
    from agentgym.envs.hotpotqa.data import load_questions

    work = []
    for q in load_questions(sample):
        paragraphs = [Paragraph(t, tuple(s)) for t, s in q.context]
        work.append((paragraphs, [q.question, *q.supporting_titles, q.answer]))
    return work


@pytest.mark.parametrize("impl", ["hand", "bm25s"])
def test_bench_local_pool_index_and_rank(benchmark, sample, impl):
    """Index one question's 10 paragraphs and rank its queries (question, supporting titles, answer), per question.

    Both give the same rankings on every query of the sample (asserted); the hand version is kept only while it is
    the faster one (``agentgym.envs.hotpotqa.search.LocalSearch``).
    """
    from agentgym.envs.hotpotqa.search import LocalSearch

    work = _local_workload(sample)
    hand = [[LocalSearch(p).rank(query, 10) for query in queries] for p, queries in work]
    ours = [[_bm25s_local(p)(query, 10) for query in queries] for p, queries in work]
    assert hand == ours
    cycle = itertools.cycle(work)

    def one_question():
        paragraphs, queries = next(cycle)
        if impl == "hand":
            search = LocalSearch(paragraphs)
            return [search.rank(q, 10) for q in queries]
        rank = _bm25s_local(paragraphs)
        return [rank(q, 10) for q in queries]

    benchmark(one_question)
