"""What a "term" is, in one place: lower case, stop words dropped, a light stemmer.

The lexical index (ocat.memory.storage.lexical_index) stores these terms, queries by them and scores a
candidate's coverage of a query with them, so indexing, querying and scoring always agree.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import lru_cache
from typing import Mapping, Sequence

# A query is searched by at most this many distinct terms (`query_terms`): a pasted book of
# 290k distinct words once passed SQLite's limit on a statement's parameters and failed the
# search. A prompt rarely has more than a hundred; past that, its most repeated terms say
# what it is about.
MAX_QUERY_TERMS = 256
_TOKEN = re.compile(r"[^\W_]+")
# Function words carry no topic; dropping them keeps FTS5 OR-queries small and fast.
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most my
    myself no nor not now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves s t d ll m re ve y also get got really yeah oh hey hi thanks thank like""".split()
)


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper: enough to match plurals and -ing/-ed forms, never below 3 letters."""
    for suffix, replacement in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: len(word) - len(suffix)] + replacement
    return word


def terms(text: str) -> list[str]:
    """The normalised terms of a text, in order (with repeats)."""
    return [stem(t) for t in _TOKEN.findall(text.lower()) if t not in STOP_WORDS and len(t) > 1]


def query_terms(text: str) -> list[str]:
    """The terms a query is searched and scored by: `terms(text)` when it has at most
    MAX_QUERY_TERMS distinct ones, else only its most repeated (the longer first among equals),
    in order. However large the query, a search reads a bounded number of terms."""
    return _bounded(terms(text))


def queries_terms(queries: Sequence[str]) -> list[list[str]]:
    """`query_terms` of each query, each text read once: a query that ends with an earlier one
    after a line break (the chat's second query: the last prompts, then the prompt) takes that
    one's terms instead of reading it again (a pasted book is read once, not twice)."""
    read: dict[str, list[str]] = {}
    for query in queries:
        if query in read:
            continue
        earlier = next((q for q in read if query.endswith("\n" + q)), None)
        if earlier is None:
            read[query] = terms(query)
        else:  # a line break ends every term, so the two texts' terms follow each other
            read[query] = terms(query[: len(query) - len(earlier) - 1]) + read[earlier]
    return [_bounded(read[query]) for query in queries]


def _bounded(found: list[str]) -> list[str]:
    """At most MAX_QUERY_TERMS distinct terms (see `query_terms`)."""
    counts = Counter(found)
    if len(counts) <= MAX_QUERY_TERMS:
        return found
    kept = {t for t, _ in sorted(counts.items(), key=lambda p: (-p[1], -len(p[0]), p[0]))[:MAX_QUERY_TERMS]}
    return [t for t in found if t in kept]


@lru_cache(maxsize=8192)
def term_set(text: str) -> frozenset[str]:
    """The distinct terms of a text; cached, since the same memories come up turn after turn."""
    return frozenset(terms(text))


def idf(doc_freq: int, total: int) -> float:
    """BM25's inverse document frequency; a term never seen scores as the rarest possible."""
    return math.log(1.0 + (total - doc_freq + 0.5) / (doc_freq + 0.5))


# How many postings (term occurrences in records) one BM25 search may read, roughly: FTS5
# scores every record that matches any term, so a term found in a third of a 100k store
# would make each search read 30k postings. Terms are taken rarest first until the next
# would pass this; the rarest term is always searched. At 4,000, a store of up to ~4,000
# records is searched with every term, exactly as before.
POSTINGS_BUDGET = 4000


def within_postings_budget(doc_freqs: Mapping[str, int]) -> list[str]:
    """The terms to search: rarest first, while their postings stay within POSTINGS_BUDGET.

    Unseen terms match nothing and are left out; the rarest seen term is always kept.
    """
    chosen: list[str] = []
    postings = 0
    for term, docs in sorted(((t, d) for t, d in doc_freqs.items() if d > 0), key=lambda p: p[1]):
        if chosen and postings + docs > POSTINGS_BUDGET:
            break
        chosen.append(term)
        postings += docs
    return chosen
