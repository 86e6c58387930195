"""Search over HotpotQA paragraphs: title look-up, BM25 ranking, ``Could not find`` suggestions.

Two corpora share one interface (:class:`ParagraphSearch`):

* :class:`LocalSearch`, the ``distractor`` setting: a question's own 10 paragraphs, ranked by a small
  pure-Python BM25 (no extra dependency; 10 documents need no index). It is kept instead of bm25s because
  it is faster at equal results: ``tests/benchmarks/test_bench_hotpotqa.py::test_bench_local_pool_index_and_rank``
  builds both on every sample question and asserts identical rankings for its question, supporting titles and
  answer (400 queries); indexing and ranking one question took 0.52 ms median by hand vs 1.77 ms with bm25s
  (2-core machine, load ~15). ``tests/envs/test_hotpotqa.py`` checks the equality in the default run.
* :class:`OpenIndex`, the ``open`` setting: every distinct paragraph of the loaded file (a small offline
  Wikipedia), indexed once per process with ``bm25s`` and a Snowball English stemmer (``PyStemmer``).

Both use Lucene's BM25 (k1 0.9, b 0.4, the Anserini defaults that WebShop's search also uses) over
title + text, lowercased word tokens of two or more characters without English stop words.
A search names a page the way Wikipedia's search box does for ReAct: an exact title (ignoring case,
punctuation and spacing) or a near-exact one (difflib ratio >= 0.9 on the normalised titles) opens that
paragraph; anything else gets ``Could not find``, with the best-ranked titles as suggestions.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import shutil
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

#: BM25 parameters (Lucene/Anserini defaults).
K1, B = 0.9, 0.4
#: A search opens a paragraph whose normalised title is at least this similar to the query.
TITLE_MATCH_RATIO = 0.9

_TOKEN = re.compile(r"\w{2,}")  # runs of >= 2 word characters (bm25s/sklearn's default pattern)
_NON_ALNUM = re.compile(r"[\W_]+", re.UNICODE)
# A short English stop list (the common function words); removing them keeps BM25 from ranking by "the".
STOPWORDS: frozenset[str] = frozenset(
    "a an and are as at be been but by for from had has have he her his if in into is it its of on or she "
    "that the their them then there these they this to was were which while who whom will with would".split()
)


@dataclass(frozen=True)
class Paragraph:
    """One Wikipedia paragraph: its title and its sentences as HotpotQA split them."""

    title: str
    sentences: tuple[str, ...]

    @property
    def text(self) -> str:
        return " ".join(s.strip() for s in self.sentences if s.strip())


def title_key(text: str) -> str:
    """A title or query reduced for matching: NFKC, case-folded, punctuation as spaces, single spaces."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NON_ALNUM.sub(" ", text).split())


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens (>= 2 characters) without stop words."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


def _title_ratio(a_key: str, b_key: str, floor: float = 0.0) -> float:
    """difflib's ratio of two title keys, or 0.0 when it provably falls below ``floor``.

    difflib is quadratic; the length bound 2 min / (la + lb) and ``quick_ratio`` (character multisets) are
    upper bounds on the ratio, and skip the full computation for a long query against a short title.
    """
    total = len(a_key) + len(b_key)
    if not total or 2 * min(len(a_key), len(b_key)) / total < floor:
        return 0.0
    matcher = difflib.SequenceMatcher(None, a_key, b_key, autojunk=False)
    if matcher.quick_ratio() < floor:
        return 0.0
    return matcher.ratio()


class ParagraphSearch(Protocol):
    """What the env needs from a corpus."""

    def paragraph(self, index: int) -> Paragraph: ...

    def find_title(self, query: str) -> int | None:
        """The paragraph a query names (exact or near-exact title), or None."""
        ...

    def rank(self, query: str, k: int) -> list[int]:
        """Up to ``k`` paragraphs by BM25 score, best first (only those sharing a term with the query)."""
        ...

    def similar_titles(self, query: str, k: int) -> list[str]:
        """Up to ``k`` titles to suggest after a failed search, best first."""
        ...


class LocalSearch:
    """Search over one question's paragraphs (the ``distractor`` setting).

    BM25 by hand rather than with bm25s: the same rankings, ~3x faster for 10 paragraphs (see the module docstring).
    """

    def __init__(self, paragraphs: Sequence[Paragraph]) -> None:
        self.paragraphs = list(paragraphs)
        self._keys = [title_key(p.title) for p in self.paragraphs]
        self._tf: list[Counter[str]] | None = None  # built on first ranking: most steps never need it

    def paragraph(self, index: int) -> Paragraph:
        return self.paragraphs[index]

    def find_title(self, query: str) -> int | None:
        for i, p in enumerate(self.paragraphs):
            if p.title == query:
                return i
        key = title_key(query)
        if not key:
            return None
        for i, k in enumerate(self._keys):
            if k == key:
                return i
        best, best_ratio = None, TITLE_MATCH_RATIO
        for i, k in enumerate(self._keys):
            r = _title_ratio(key, k, TITLE_MATCH_RATIO)
            if r >= best_ratio:
                best, best_ratio = i, r
        return best

    def _scores(self, query: str) -> list[float]:
        if self._tf is None:
            self._tf = [Counter(tokenize(p.title + " " + p.text)) for p in self.paragraphs]
            self._len = [sum(tf.values()) for tf in self._tf]
            self._avgdl = max(1e-9, sum(self._len) / max(1, len(self._len)))
            self._df = Counter(t for tf in self._tf for t in tf)
        n = len(self._tf)
        scores = [0.0] * n
        for term in set(tokenize(query)):
            df = self._df.get(term, 0)
            if not df:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            for i, tf in enumerate(self._tf):
                f = tf.get(term, 0)
                if f:
                    scores[i] += idf * f * (K1 + 1) / (f + K1 * (1 - B + B * self._len[i] / self._avgdl))
        return scores

    def rank(self, query: str, k: int) -> list[int]:
        scores = self._scores(query)
        order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
        return order[:k]

    def similar_titles(self, query: str, k: int) -> list[str]:
        # Blend text relevance (BM25 scaled to [0, 1]) with title likeness, so a misspelt title and a
        # descriptive query both surface the paragraphs they mean.
        scores = self._scores(query)
        top = max(scores, default=0.0) or 1.0
        key = title_key(query)
        # Title likeness below 0.5 counts as none: it is noise, and skipping it keeps long queries fast.
        blend = [s / top + _title_ratio(key, tk, 0.5) for s, tk in zip(scores, self._keys)]
        order = sorted(range(len(blend)), key=lambda i: (-blend[i], i))
        return [self.paragraphs[i].title for i in order[:k]]


_CACHE_DONE = "complete"


def _save_atomically(model, cache: Path) -> None:
    # Write beside the target and rename, so a concurrent reader never sees half an index.
    tmp = cache.with_name(f"{cache.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save(str(tmp))
    (tmp / _CACHE_DONE).write_text("ok\n")
    try:
        os.replace(tmp, cache)
    except OSError:  # another process got there first; its index is the same
        shutil.rmtree(tmp, ignore_errors=True)


def _require_bm25():
    try:
        import bm25s
        import Stemmer
    except ImportError as e:
        from gymnasium.error import DependencyNotInstalled

        raise DependencyNotInstalled(
            'the HotpotQA "open" setting needs bm25s and PyStemmer: pip install "agentgym[hotpotqa]"'
        ) from e
    return bm25s, Stemmer


class OpenIndex:
    """BM25 (``bm25s`` + Snowball stemmer) over a pool of distinct paragraphs (the ``open`` setting).

    Args:
        paragraphs: the pool; paragraphs are deduplicated by title (first one kept) by :meth:`from_questions`.
    """

    def __init__(self, paragraphs: Sequence[Paragraph], cache: Path | None = None) -> None:
        bm25s, Stemmer = _require_bm25()
        self.paragraphs = list(paragraphs)
        self._stemmer = Stemmer.Stemmer("english")
        self._titles: dict[str, int] = {}
        self._exact: dict[str, int] = {}
        for i, p in enumerate(self.paragraphs):
            self._titles.setdefault(p.title, i)
            self._exact.setdefault(title_key(p.title), i)
        #: True when the BM25 arrays came from ``cache`` rather than from tokenising the pool.
        self.loaded_from_cache = cache is not None and (cache / _CACHE_DONE).is_file()
        if self.loaded_from_cache:
            self._model = bm25s.BM25.load(str(cache))
        else:
            corpus = [self._stem(tokenize(p.title + " " + p.text)) for p in self.paragraphs]
            self._model = bm25s.BM25(k1=K1, b=B, method="lucene")
            self._model.index(corpus, show_progress=False)
            if cache is not None:
                _save_atomically(self._model, cache)
        self._vocab: dict[str, int] = self._model.vocab_dict
        self._last: tuple[tuple[str, int], tuple[int, ...]] | None = None

    @classmethod
    def from_questions(
        cls, contexts: Sequence[Sequence[tuple[str, Sequence[str]]]], cache: Path | None = None
    ) -> OpenIndex:
        """Pool every paragraph of every question's context, one per title (the first seen wins).

        Args:
            contexts: each question's ``context``.
            cache: a folder for the BM25 arrays: loaded when complete, else written after building. The
                caller keys it by the source file, since nothing here checks that it matches the pool.
        """
        seen: dict[str, Paragraph] = {}
        for context in contexts:
            for title, sentences in context:
                if title not in seen:
                    seen[title] = Paragraph(title, tuple(sentences))
        return cls(list(seen.values()), cache=cache)

    def __len__(self) -> int:
        return len(self.paragraphs)

    def _stem(self, tokens: list[str]) -> list[str]:
        return self._stemmer.stemWords(tokens)

    def paragraph(self, index: int) -> Paragraph:
        return self.paragraphs[index]

    def title_index(self, title: str) -> int | None:
        """The paragraph with this exact title (or, failing that, equal after :func:`title_key`), or None."""
        hit = self._titles.get(title)
        return hit if hit is not None else self._exact.get(title_key(title))

    def find_title(self, query: str) -> int | None:
        if query in self._titles:
            return self._titles[query]
        key = title_key(query)
        if not key:
            return None
        hit = self._exact.get(key)
        if hit is not None:
            return hit
        best, best_ratio = None, TITLE_MATCH_RATIO
        for i in self.rank(query, 5):
            r = _title_ratio(key, title_key(self.paragraphs[i].title), TITLE_MATCH_RATIO)
            if r >= best_ratio:
                best, best_ratio = i, r
        return best

    def rank(self, query: str, k: int) -> list[int]:
        # A failed title search ranks the same query twice (near-exact title check, then suggestions).
        last = self._last  # one read: envs in other threads may share this index
        if last is not None and last[0] == (query, k):
            return list(last[1])
        ranked = self._rank(query, k)
        self._last = ((query, k), tuple(ranked))
        return ranked

    def _rank(self, query: str, k: int) -> list[int]:
        import numpy as np

        tokens = [t for t in dict.fromkeys(self._stem(tokenize(query))) if t in self._vocab]
        if not tokens or k <= 0:
            return []
        scores = self._model.get_scores(tokens)
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.lexsort((top, -scores[top]))]  # by score, ties by pool order: deterministic
        return [int(i) for i in top if scores[i] > 0]

    def similar_titles(self, query: str, k: int) -> list[str]:
        return [self.paragraphs[i].title for i in self.rank(query, k)]
