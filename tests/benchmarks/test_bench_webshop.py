"""WebShop speed: search, steps, loading; search on a generated 100k-product catalogue.

Run side by side: ``python -m pytest tests/benchmarks/test_bench_webshop.py --benchmark-only``.
Targets: search <= 1 ms/query (1k), a step <= 2 ms, catalogue + index load <= 3 s, search <= 20 ms
on 100k products.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.conftest import require_data

QUERIES = [
    "gluten free protein shake",
    "men's running shoes x-large black",
    "long lasting hair extension 18 inch",
    "wireless bluetooth headphones with noise cancelling",
    "women's high waist yoga pants",
    "easy to clean non slip bath mat",
    "organic green tea bags",
    "machine washable throw pillow cover 18x18",
]


@pytest.fixture(scope="module")
def data_dir():
    return require_data("webshop", "documents_1k.jsonl").parent


@pytest.fixture(scope="module")
def engine(data_dir):
    from agentgym.envs.webshop.engine import get_engine

    return get_engine(data_dir)


def test_bench_search_1k(benchmark, engine):
    queries = itertools.cycle(QUERIES)
    benchmark(lambda: engine.search_engine.search(next(queries)))
    assert benchmark.stats.stats.median < 1e-3


def test_bench_step_search(benchmark, engine):
    """A search step: query, results page, text observation, available and admissible actions."""
    from agentgym.envs.webshop.env import WebShopEnv

    env = WebShopEnv(engine=engine)
    env.reset(options={"split": "test", "index": 0})
    # distinct queries, so the engine's query cache does not hide the search
    queries = itertools.cycle([f"search[{q} {i}]" for i in range(5000) for q in QUERIES[:1]])
    benchmark(lambda: env.step(next(queries)))
    assert benchmark.stats.stats.median < 2e-3


def test_bench_step_click(benchmark, engine):
    """Clicks between a results page and an item page (each click renders a page and its actions)."""
    from agentgym.envs.webshop.env import WebShopEnv

    env = WebShopEnv(engine=engine)
    env.reset(options={"split": "test", "index": 0})
    _, _, _, _, info = env.step("search[throw pillow cover]")
    asin = info["available_actions"]["clickables"][2]
    actions = itertools.cycle([f"click[{asin}]", "click[< prev]"])
    benchmark(lambda: env.step(next(actions)))
    assert benchmark.stats.stats.median < 2e-3


def test_bench_step_buy(benchmark, engine):
    """The purchase step (the reward: fuzzy matching, cached title nouns)."""
    from agentgym.envs.webshop.env import WebShopEnv

    env = WebShopEnv(engine=engine)
    goal = engine.goals[0]

    def setup():
        env.reset(options={"split": "test", "index": 0})
        env.step(f"search[{goal['instruction_text']}]")
        env.step(f"click[{goal['asin'].lower()}]")
        return (), {}

    setup()
    env.step("click[buy now]")  # tags the titles once (spaCy), as any first purchase does
    benchmark.pedantic(lambda: env.step("click[buy now]"), setup=setup, rounds=200)
    assert benchmark.stats.stats.median < 2e-3


def test_bench_load_catalogue_and_index(benchmark, data_dir):
    """Catalogue + prices + goals + BM25 index, from the files (no process-wide engine cache)."""
    from agentgym.envs.webshop.catalog import load_catalog
    from agentgym.envs.webshop.engine import WebShopEngine

    result = benchmark.pedantic(lambda: WebShopEngine(load_catalog(data_dir)), rounds=3, iterations=1)
    assert len(result.goals) == 6910
    assert benchmark.stats.stats.median < 3.0


@pytest.fixture(scope="module")
def engine_100k(engine):
    """100,000 generated products: texts of 20-120 words drawn from the 1k catalogue's word frequencies."""
    from agentgym.envs.webshop.search import SearchEngine

    words = " ".join(engine.catalog.texts).split()
    vocab, counts = np.unique(np.array(words), return_counts=True)
    p = counts / counts.sum()
    rng = np.random.default_rng(0)
    lengths = rng.integers(20, 120, size=100_000)
    draws = rng.choice(len(vocab), size=int(lengths.sum()), p=p)
    texts, start = [], 0
    for n in lengths:
        texts.append(" ".join(vocab[draws[start : start + n]]))
        start += n
    return SearchEngine(texts)


def test_bench_search_100k(benchmark, engine_100k):
    queries = itertools.cycle(QUERIES)
    benchmark(lambda: engine_100k.search(next(queries)))
    assert engine_100k.num_docs == 100_000
    assert benchmark.stats.stats.median < 20e-3
