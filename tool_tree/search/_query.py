"""Queries that ask for several things: split into clauses, rank each, fuse the rankings.

"Find the cheapest flight, convert the price to euros and email it to Ana" needs three tools.
Ranked as one bag of words, the need with the most words fills every slot. Here the query is
cut into clauses at sentence ends, semicolons and the words that chain requests ("then",
"also", "and" after a comma, ...; in Chinese and Japanese the full-width 。！？； and a full-width
comma before 然后, 顺便, 还有, ...); each clause is ranked on its own, and the rankings of the
whole query and of every clause are fused by weighted reciprocal rank (Cormack et al. 2009)::

    fused(d) = w_full / (k + rank_full(d)) + Σ_clauses w_clause / (k + rank_clause(d))

so the best tool of every clause reaches the first results while a tool the whole query
ranks high keeps its place. A query with one clause is ranked as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_CLAUSES = 4
"""Clauses ranked on their own at most: the first three, then the rest of the query as one; the
whole query is always ranked."""
MIN_CLAUSE_WORDS = 2
"""Shorter pieces are joined to the clause before them: "and also" alone asks for nothing. Two CJK
characters count as one word (the index reads them as character bigrams)."""
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")

_SENTENCE = r"(?<=[.!?;])\s+|(?<=[。！？；])\s*"
"""A sentence end: ASCII punctuation before a space, or the full-width punctuation of Chinese and Japanese,
which no space follows."""
_CHAIN_WORD = r"(?:and\s+)?(?:then|afterwards|after\s+that|also|additionally|as\s+well\s+as|plus)\b"
_REQUEST = (
    r"(?:then\s+)?(?:please\s+)?(?:can|could|would|will|tell|give|show|find|get|send|check|recommend|suggest|let"
    r"|help|make|create|convert|save|email|book|search|look)\b"
)
_TASK_VERB = (
    r"(?:then\s+)?(?:please\s+)?(?:list|read|write|delete|remove|update|add|open|fetch|post|upload|download|move"
    r"|copy|translate|summari[sz]e|schedule|commit|push|pull|run|share|set|print|compare|calculate|stage|rename"
    r"|archive|notify|order|buy|pay|cancel|reply|draft|publish|generate|analy[sz]e|track|invite|remind|play"
    r"|export|import|sync|call|text|message|plan|reserve|compute|estimate|review|describe|explain|deploy|merge"
    r"|tag|label|assign|close|clone|install|note|log|record|store|put|fill|submit|sign)\b"
)
"""Verbs that start a task of their own after "and" (the ``tasks`` splitter; not a default)."""
_CJK_CHAIN = r"，\s*(?=然后|再|顺便|并|还有|另外|同时|最后|帮我)"
"""A full-width comma before a word that chains requests in Chinese ("then", "again", "while at it", "and", "also",
"besides", "at the same time", "finally", "help me"); the word stays in its clause."""
_CHAIN = rf"(?:{_SENTENCE})(?:{_CHAIN_WORD})?|,?\s+{_CHAIN_WORD}|,\s+and\s+|\s+and\s+(?={_REQUEST})|{_CJK_CHAIN}"
SPLITTERS = {
    "none": None,
    "sentences": re.compile(_SENTENCE),
    "chains": re.compile(_CHAIN, re.IGNORECASE),
    "tasks": re.compile(f"{_CHAIN}|\\s+and\\s+(?={_TASK_VERB})", re.IGNORECASE),
    "and": re.compile(f"{_CHAIN}|\\s+and\\s+", re.IGNORECASE),
}
"""Ways to cut a query, from none to aggressive; ``RankingConfig.clauses`` names one."""


def split_clauses(query: str, splitter: str = "chains") -> list[str]:
    """The clauses of ``query`` (at most ``MAX_CLAUSES``, the last holding the rest), or ``[]`` when it has only one.

    >>> split_clauses("Will it rain in London tomorrow? Also, suggest some cafes near the museums.")
    ['Will it rain in London tomorrow?', 'suggest some cafes near the museums.']
    """
    pattern = SPLITTERS[splitter]
    if pattern is None:
        return []
    clauses: list[str] = []
    for piece in pattern.split(" ".join(query.split())):  # single spaces: the patterns never rescan a long run
        piece = piece.strip(" ,;:-\n\t，")
        if not piece:
            continue
        if clauses and _words(piece) < MIN_CLAUSE_WORDS:
            clauses[-1] = f"{clauses[-1]} {piece}"
        else:
            clauses.append(piece)
    if len(clauses) > 1 and _words(clauses[0]) < MIN_CLAUSE_WORDS:
        clauses[1] = f"{clauses[0]} {clauses[1]}"
        del clauses[0]
    if len(clauses) > MAX_CLAUSES:  # the rest is one clause: a request's later needs are not dropped
        clauses[MAX_CLAUSES - 1 :] = [" ".join(clauses[MAX_CLAUSES - 1 :])]
    return clauses if len(clauses) > 1 else []


def _words(piece: str) -> int:
    """Words of ``piece``: those between spaces, plus one for every two CJK characters."""
    return len(piece.split()) + len(_CJK_CHAR.findall(piece)) // 2


FUSIONS = ("rrf", "max", "maxrank")
"""``rrf``: weighted reciprocal rank, summed; ``max``: each tool keeps its best weighted share of a
ranking's top score; ``maxrank``: each tool keeps its best weighted reciprocal rank."""


def fuse_rankings(
    rankings: Sequence[dict[int, float]], weights: Sequence[float], k: float, how: str = "rrf"
) -> dict[int, float]:
    """Fuse score maps, the first being the whole query's (ties by tool number).

    ``rrf`` sums ``weight / (k + rank)``; ``maxrank`` keeps the largest ``weight / (k + rank)``
    instead, so the first tool of every clause ranks with the first of the whole query, and tools
    that the whole query and a clause agree on do not crowd out the other clauses' (the sum would
    count them twice); ``max`` keeps the largest ``weight · score / top score``.
    """
    fused: dict[int, float] = {}
    for scores, weight in zip(rankings, weights, strict=True):
        if weight <= 0.0 or not scores:
            continue
        if how == "max":
            top = max(scores.values())
            if top <= 0.0:
                continue
            for d, s in scores.items():
                share = weight * s / top
                if share > fused.get(d, 0.0):
                    fused[d] = share
            continue
        # best score first, ties by tool number: the sort is stable, also in reverse
        ranked = sorted(sorted(scores), key=scores.__getitem__, reverse=True)
        for rank, d in enumerate(ranked, start=1):
            if scores[d] <= 0.0:
                break
            value = weight / (k + rank)
            if how == "maxrank":
                if value > fused.get(d, 0.0):
                    fused[d] = value
            else:
                fused[d] = fused.get(d, 0.0) + value
    return fused
