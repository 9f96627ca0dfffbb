"""Finding stored items: full-text (FTS5, BM25), by vector (sqlite-vec), and both fused.

**The text score**, in [0, 1], is BM25 with ``k1 = 0``, divided by its largest value for the
query: the share of the query's weight that an item holds,

    text_score(item) = sum(w(t) for t in query if t in item) / sum(w(t) for t in query)

over the query's distinct terms (FTS5's own: stemmed, case and accents folded; English
function words left out unless the query has nothing else), weighed by FTS5's
``w(t) = idf(t) = ln((N - n(t) + 0.5) / (n(t) + 0.5))`` (N items, n(t) of them holding t; at least
1e-6, so a term in half the items or more weighs next to nothing). 1.0: the item holds every
term; 0.7: it holds terms carrying 70% of the weight, e.g. the rare ones and not the common.

A query term that no item holds counts half its idf in the sum: it may be the asker's
wording, which no item could match (``how often ...``), or what they ask about, which nothing
here is about (``kubernetes``); so one such word lowers every score, and a query whose rare
words are all missing finds nothing. Words people ask *with* rather than about
(:data:`WORDING`: ``use``, ``happen``, ``long``, ``kept``) weigh a tenth of that, present or
not: ``which port does the staging database use`` is about the port, the staging database,
and finds ``The staging database listens on port 6543.`` (measured on questions worded as
people ask them: ``benchmarks/recall.py``).

Raw BM25 (FTS5's ``bm25()``, ``k1 = 1.2``, ``b = 0.75``) is unbounded and depends on the
corpus, so no fixed threshold means the same in two memories; with ``k1 = 0`` it counts each
term once whatever its frequency and the item's length, so a long tool output holding every
term scores 1.0, as a short note does. Full BM25 still orders items with equal scores.

The threshold also makes the search cheaper: the MATCH asks only for what an item must hold to
reach it, the terms it cannot do without (ANDed) and, of the others, at least one of the fewest
and rarest without which the rest cannot make up the score (ORed); ``large AND (summary OR
buffer)``. So a query narrows to its rarest words. When
even those are common (more than :data:`RANK_BUDGET` postings: say three words each in a
tenth of 100k items), ranking every match by BM25 would cost tens of milliseconds, so the
newest matches are scored instead (four times the limit, at least 20), and equal scores go
newest first: in a long conversation, of many items equally about the query, the newest.

**The vector score** is the cosine similarity of the query's and the item's vectors, clipped
to [0, 1]. **Hybrid**: each side keeps what reaches the threshold; the two lists are fused by
reciprocal rank (``1 / (60 + rank)`` summed over the lists an item is in), so what both find
comes first; a hit's ``score`` is the higher of its two.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxkit.reference.memory.database import Database

__all__ = [
    "Found",
    "best",
    "combined",
    "depth",
    "distinct_terms",
    "expression",
    "fuse",
    "idf",
    "nearest",
    "plan",
    "query_words",
    "text_search",
    "vector_search",
    "weigh",
    "where_clause",
]

MAX_TERMS = 32
"""Distinct query terms used (the first ones): a pasted page is not a query."""
RRF_K = 60
RANK_BUDGET = 10_000
"""Postings (items per term, summed over the MATCH's terms) up to which matches are ranked by
BM25; past it, the newest matches are scored instead (see the module)."""
ABSENT_WEIGHT = 0.5
"""What a query term no item holds weighs, relative to its idf (see the module)."""
_WORD = re.compile(r"[^\W_]+")
STOP_WORDS = frozenset(
    """a about above after again all am an and any are as at be been before being below between
    both but by can could did do does doing down during each few for from further had has have
    having he her here hers him his how i if in into is it its itself just me more most my no
    nor not now of off on once only or other our ours out over own same she should so some such
    than that the their theirs them then there these they this those through to too under until
    up very was we were what when where which while who whom why will with would you your
    yours""".split()  # noqa: SIM905 - a paragraph of words reads better than 130 strings
)
"""English function words, dropped from a query (never from what is stored) unless it has
nothing else: ``why did the deploy fail`` asks about ``deploy`` and ``fail``, and a memory that
happens never to hold ``why`` must not count that against every item."""
WORDING = frozenset(
    """use uses used using go goes going went gone get gets getting got make makes making made
    need needs needed keep keeps keeping kept run runs running ran work works working worked
    happen happens happening happened take takes taking took taken find finds found know knows
    knew known tell tells told say says said mean means meant call calls called set sets put
    puts show shows showed shown give gives gave given see sees saw seen look looks looked want
    wants wanted like likes come comes came live lives lived last lasts lasted change changes
    changed send sends sent hold holds held stay stays stayed allow allows allowed wait waits
    waited let lets help helps begin begins start starts started stop stops stopped end ends
    ended try tries tried ask asks asked seem seems turn turns move moves moved leave
    leaves left bring brings brought write writes wrote written read reads become becomes
    became check checks checked handle handles handled deal manage manages managed owns
    long old new big large small little good bad best better many much often ever never
    always usually first last next different right wrong real main current usual
    enough sure possible able exactly actually really still already soon later
    thing things way ways kind kinds sort type part parts place places people person someone
    anyone something anything everything stuff info information detail details lot lots
    please thanks hi hello ok okay yes also even else""".split()  # noqa: SIM905
)
"""Words people ask with rather than about (``which port does the staging database *use*``,
``how *long* are logs *kept*``): common verbs and their forms, common adjectives and vague
nouns. Kept in the query, but each weighs :data:`WORDING_WEIGHT` of its idf, present or
absent: a memory where one unrelated note says ``happens`` must not make ``when do deploys
happen`` a question about that note."""
WORDING_WEIGHT = 0.1
_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True)
class Term:
    word: str
    """As written in the query, quoted into MATCH as a phrase (so FTS5 stems it itself)."""
    df: int
    weight: float


@dataclass(frozen=True, slots=True)
class Found:
    """One item a search found: its score in [0, 1] and, for text, FTS5's BM25 (lower is
    better) to order equal scores."""

    id: int
    score: float
    bm25: float = 0.0


def idf(items: int, holding: int) -> float:
    """FTS5's inverse document frequency (``fts5_aux.c``), floored at 1e-6 as there."""
    value = math.log((items - holding + 0.5) / (holding + 0.5))
    return value if value > 0 else 1e-6


def _phrase(word: str) -> str:
    return f'"{word}"'  # words are letters and digits only, so never hold a quote


def query_words(query: str) -> list[str]:
    """The query's words a search weighs: its function words left out unless it has nothing
    else (any engine then tokenizes them its own way)."""
    words = _WORD.findall(query)[: MAX_TERMS * 8]
    return [word for word in words if word.casefold() not in STOP_WORDS] or words


def weigh(word: str, items: int, df: int) -> float:
    """A query word's weight: its idf among ``items``, half of it when no item holds it, a
    tenth of that for a word people ask with (:data:`WORDING`)."""
    weight = idf(items, df) * (1.0 if df else ABSENT_WEIGHT)
    if word.casefold() in WORDING:
        weight *= WORDING_WEIGHT
    return weight


def query_terms(db: Database, query: str) -> list[tuple[str, str]]:
    """The query's distinct terms as ``(word, key)``: FTS5 tokenizes each word (in a scratch
    table), so stems, folding and splitting are exactly the index's."""
    words = query_words(query)
    if not words:
        return []
    execute = db.connection.execute
    execute("INSERT INTO temp.query_words(query_words) VALUES ('delete-all')")
    db.connection.executemany(
        "INSERT INTO temp.query_words(rowid, word) VALUES (?, ?)", enumerate(words)
    )
    tokens: dict[int, list[str]] = {}
    for doc, term in execute("SELECT doc, term FROM temp.query_terms ORDER BY doc, offset"):
        tokens.setdefault(doc, []).append(term)
    return distinct_terms(words, [tokens.get(index, []) for index in range(len(words))])


def distinct_terms(words: Sequence[str], tokens: Sequence[Sequence[str]]) -> list[tuple[str, str]]:
    """``(word, key)`` for each word whose tokens (its index's, in order) no earlier word
    had, at most :data:`MAX_TERMS`; words without tokens are left out."""
    terms: dict[str, str] = {}
    for word, parts in zip(words, tokens, strict=True):
        key = " ".join(parts)
        if key and key not in terms:
            terms[key] = word
            if len(terms) == MAX_TERMS:
                break
    return [(word, key) for key, word in terms.items()]


def _weigh(db: Database, terms: list[tuple[str, str]], items: int) -> list[Term]:
    execute = db.connection.execute
    weighed = []
    for word, key in terms:
        if " " in key:  # one word that FTS5 splits in two: count the phrase
            (df,) = execute(
                "SELECT count(*) FROM items_fts WHERE items_fts MATCH ?", (_phrase(word),)
            ).fetchone()
        else:
            row = execute("SELECT doc FROM items_terms WHERE term = ?", (key,)).fetchone()
            df = row[0] if row else 0
        weighed.append(Term(word, df, weigh(word, items, df)))
    return weighed


def plan(terms: Sequence[Term], threshold: float) -> tuple[list[Term], list[Term]] | None:
    """What every item able to reach ``threshold`` holds: ``(all_of, any_of)``, all of the
    first and, unless it is empty, at least one of the second (the fewest, rarest terms
    without which the rest cannot make up the score); None when no item can."""
    total = sum(term.weight for term in terms)
    floor = threshold * total - _TOLERANCE * total
    present = [term for term in terms if term.df > 0]
    held = sum(term.weight for term in present)
    if not present or held < floor:
        return None
    all_of = [term for term in present if held - term.weight < floor]
    need = floor - sum(term.weight for term in all_of)
    if all_of and need <= 0:
        return all_of, []
    others = sorted((term for term in present if term not in all_of), key=lambda t: -t.weight)
    any_of, rest = [], sum(term.weight for term in others)
    for term in others:
        if rest < need:
            break
        any_of.append(term)
        rest -= term.weight
    return all_of, any_of


def expression(all_of: Sequence[Term], any_of: Sequence[Term]) -> str:
    """The FTS5 MATCH of a :func:`plan`."""
    parts = [_phrase(term.word) for term in all_of]
    if len(any_of) == 1 or (any_of and not all_of):
        parts.append(" OR ".join(_phrase(term.word) for term in any_of))
    elif any_of:
        parts.append("(" + " OR ".join(_phrase(term.word) for term in any_of) + ")")
    return " AND ".join(parts)


def where_clause(where: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
    """SQL (``AND ...``) keeping items whose metadata has each key equal to its value."""
    if not where:
        return "", []
    if not isinstance(where, Mapping):
        raise TypeError(f"where must be a mapping of metadata keys to values, got {where!r}")
    sql, arguments = [], []
    for key, value in where.items():
        if not isinstance(key, str) or '"' in key:
            raise ValueError(f"where: a metadata key is a string without quotes, got {key!r}")
        path = f'$."{key}"'
        if value is None or isinstance(value, bool):
            kind = "null" if value is None else "true" if value else "false"
            sql.append("json_type(items.metadata, ?) = ?")
            arguments += [path, kind]
        elif isinstance(value, int | float) and math.isfinite(value):
            sql.append(
                "json_type(items.metadata, ?) IN ('integer', 'real') "
                "AND json_extract(items.metadata, ?) = ?"
            )
            arguments += [path, path, value]
        elif isinstance(value, str):
            sql.append(
                "json_type(items.metadata, ?) = 'text' AND json_extract(items.metadata, ?) = ?"
            )
            arguments += [path, path, value]
        else:
            raise ValueError(
                f"where: {key!r} must equal a string, a finite number, a boolean or None, "
                f"got {value!r}"
            )
    return " AND " + " AND ".join(sql), arguments


def text_search(
    db: Database, query: str, limit: int, threshold: float, where: Mapping[str, Any] | None
) -> list[Found]:
    """The best ``limit`` items by text score at or above ``threshold`` (see the module).
    Run it inside one of ``db``'s read transactions, so every count it reads agrees."""
    words = query_terms(db, query)
    if not words:
        return []
    items = db.count()
    if items == 0:
        return []
    terms = _weigh(db, words, items)
    matching = plan(terms, threshold)
    if matching is None:
        return []
    all_of, any_of = matching
    matched = [*all_of, *any_of]
    extra, arguments = where_clause(where)
    wanted = max(4 * limit, 20)
    ranked = sum(term.df for term in matched) <= RANK_BUDGET
    if ranked:  # bm25() reads each phrase's whole posting list, then scores every match
        order, score = "bm25(items_fts)", "bm25(items_fts)"
    else:
        order, score = "items_fts.rowid DESC", "0.0"
    join = " JOIN items ON items.id = items_fts.rowid" if extra else ""
    candidates = db.connection.execute(
        f"SELECT items_fts.rowid, {score} FROM items_fts{join} "
        f"WHERE items_fts MATCH ?{extra} ORDER BY {order} LIMIT ?",
        [expression(all_of, any_of), *arguments, wanted],
    ).fetchall()
    if not candidates:
        return []
    known = [*all_of, *any_of] if len(any_of) == 1 else all_of
    held = {item: sum(term.weight for term in known) for item, _ in candidates}
    unknown = [term for term in terms if term.df > 0 and term not in known]
    if unknown:
        for index, item in db.connection.execute(
            "SELECT t.key, j.value FROM json_each(?) AS t CROSS JOIN json_each(?) AS j "
            "CROSS JOIN items_fts AS f WHERE f.items_fts MATCH t.value AND f.rowid = j.value",
            (
                json.dumps([_phrase(term.word) for term in unknown]),
                json.dumps([item for item, _ in candidates]),
            ),
        ):
            held[item] += unknown[index].weight
    return best(terms, [(item, bm25, held[item]) for item, bm25 in candidates], threshold, limit)


def best(
    terms: Sequence[Term],
    candidates: Sequence[tuple[int, float, float]],
    threshold: float,
    limit: int,
) -> list[Found]:
    """The ``limit`` best of ``(id, rank, weight held)`` by text score at or above
    ``threshold``; equal scores by ``rank`` (lower first: BM25's order), then newest."""
    total = sum(term.weight for term in terms)
    floor = threshold - _TOLERANCE
    found = [
        Found(item, min(1.0, held / total), rank)
        for item, rank, held in candidates
        if held / total >= floor
    ]
    found.sort(key=lambda hit: (-hit.score, hit.bm25, -hit.id))
    return found[:limit]


def vector_search(
    db: Database,
    vector: bytes,
    limit: int,
    threshold: float,
    where: Mapping[str, Any] | None,
) -> list[Found]:
    """The ``limit`` nearest items by cosine similarity, at or above ``threshold``. With
    ``where``, every matching item is compared (exact); without, vec0's KNN."""
    execute = db.connection.execute
    if where:
        extra, arguments = where_clause(where)
        rows = execute(  # (an alias in WHERE would lose the vector's parameter: a subquery)
            "SELECT id, distance FROM (SELECT items.id AS id, "
            "vec_distance_cosine(items_vec.embedding, ?) AS distance "
            f"FROM items JOIN items_vec ON items_vec.rowid = items.id WHERE 1{extra}) "
            "WHERE distance IS NOT NULL ORDER BY distance LIMIT ?",
            [vector, *arguments, limit],
        ).fetchall()
    else:
        rows = execute(
            "SELECT rowid, distance FROM items_vec WHERE embedding MATCH ? AND k = ? "
            "ORDER BY distance",
            (vector, min(limit, 4096)),
        ).fetchall()
    return nearest(rows, threshold)


def nearest(rows: Iterable[tuple[int, float | None]], threshold: float) -> list[Found]:
    """``(id, cosine distance)`` rows, nearest first, as hits: each vector score is
    ``1 - distance`` clipped to [0, 1], kept at or above ``threshold``. A zero vector has no
    direction (sqlite-vec's distance is NULL, pgvector's NaN): it is left out."""
    found = []
    for item, distance in rows:
        if distance is None or math.isnan(distance):
            continue
        score = min(1.0, max(0.0, 1.0 - distance))
        if score >= threshold - _TOLERANCE:
            found.append(Found(item, score))
    return found


def depth(limit: int) -> int:
    """How many of each list a search with vectors reads before fusing them."""
    return max(2 * limit, 10)


def combined(
    text: Sequence[Found], near: Sequence[Found] | None, limit: int
) -> list[tuple[int, float, float | None, float | None]]:
    """``(id, score, text_score, vector_score)``, best first: the text hits alone when there
    is no vector search (``near`` None), else both lists fused (:func:`fuse`)."""
    if near is None:
        return [(hit.id, hit.score, hit.score, None) for hit in text[:limit]]
    return fuse(text, near, limit)


def fuse(
    text: Sequence[Found], vector: Sequence[Found], limit: int
) -> list[tuple[int, float, float | None, float | None]]:
    """Reciprocal rank fusion: ``(id, score, text_score, vector_score)``, best first."""
    fused: dict[int, float] = {}
    by_text = {hit.id: hit.score for hit in text}
    by_vector = {hit.id: hit.score for hit in vector}
    for hits in (text, vector):
        for rank, hit in enumerate(hits, 1):
            fused[hit.id] = fused.get(hit.id, 0.0) + 1.0 / (RRF_K + rank)
    ordered = sorted(
        fused,
        key=lambda item: (
            -fused[item],
            -max(by_text.get(item, 0.0), by_vector.get(item, 0.0)),
            -item,
        ),
    )
    return [
        (
            item,
            max(by_text.get(item, 0.0), by_vector.get(item, 0.0)),
            by_text.get(item),
            by_vector.get(item),
        )
        for item in ordered[:limit]
    ]
