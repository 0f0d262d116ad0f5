"""The keyword index of history turns: postings and each owner's BM25 statistics.

Lexemes come from ``store_service.search.analysis`` (``document_terms("", text)``, as a memory without a
title), so a turn is searched exactly as the keyword arm searches memories. Each owner's live turns
are their own partition: ``history_df`` keeps each lexeme's document frequency among them and
``history_stats`` their count and total length (distinct lexemes), so a search's statistics are
the caller's own and nothing another member wrote can shift them. Writers hold the owner's lock
(``store_service.history.turns``), so the sums stay exact.
"""

from __future__ import annotations

import uuid
from collections import defaultdict

import psycopg

from store_service.search import analysis


def terms(text: str) -> dict[str, int]:
    """A turn's lexemes and their term frequencies (the keyword arm's analysis of a body)."""
    return analysis.document_terms("", text)


def update(conn: psycopg.Connection, owner: uuid.UUID, docs: list[tuple[uuid.UUID, dict[str, int]]], sign: int) -> None:
    """Adds (``sign`` +1) or removes (-1) turns' postings and their share of the owner's statistics;
    call under the owner's lock. ``docs`` are (turn id, lexeme -> term frequency) pairs."""
    if not docs:
        return
    df: dict[str, int] = {}
    for _, tfs in docs:
        for lexeme in tfs:
            df[lexeme] = df.get(lexeme, 0) + 1
    if sign > 0:
        conn.execute(
            """INSERT INTO history_posting (owner_member_id, lexeme, turn_id, tf, doc_len)
               SELECT %s, l, i, tf, d FROM unnest(%s::text[], %s::uuid[], %s::int[], %s::int[]) AS u(l, i, tf, d)""",
            (
                owner,
                [lx for _, tfs in docs for lx in tfs],
                [turn_id for turn_id, tfs in docs for _ in tfs],
                [tf for _, tfs in docs for tf in tfs.values()],
                [len(tfs) for _, tfs in docs for _ in tfs],
            ),
        )
    else:
        conn.execute("DELETE FROM history_posting WHERE turn_id = ANY(%s)", ([turn_id for turn_id, _ in docs],))
    lexemes = sorted(df)
    conn.execute(
        """INSERT INTO history_df AS d (owner_member_id, lexeme, df)
           SELECT %s, l, n FROM unnest(%s::text[], %s::bigint[]) AS u(l, n)
           ON CONFLICT (owner_member_id, lexeme) DO UPDATE SET df = d.df + EXCLUDED.df""",
        (owner, lexemes, [sign * df[lx] for lx in lexemes]),
    )
    if sign < 0:
        conn.execute(
            "DELETE FROM history_df WHERE owner_member_id = %s AND lexeme = ANY(%s) AND df <= 0", (owner, lexemes)
        )
    conn.execute(
        """INSERT INTO history_stats AS s (owner_member_id, doc_count, total_len) VALUES (%s, %s, %s)
           ON CONFLICT (owner_member_id) DO UPDATE
           SET doc_count = s.doc_count + EXCLUDED.doc_count, total_len = s.total_len + EXCLUDED.total_len""",
        (owner, sign * len(docs), sign * sum(len(tfs) for _, tfs in docs)),
    )


def recount(conn: psycopg.Connection) -> tuple[dict, dict]:
    """The statistics recounted from the live turns' text, keyed as the maintained tables are (for
    tests): ``({(owner, lexeme): df}, {owner: (doc_count, total_len)})``, zero entries left out."""
    df: dict[tuple, int] = defaultdict(int)
    sums: dict[uuid.UUID, list[int]] = defaultdict(lambda: [0, 0])
    for owner, text in conn.execute("SELECT owner_member_id, text FROM history_turn WHERE forgotten_at IS NULL"):
        found = terms(text)
        sums[owner][0] += 1
        sums[owner][1] += len(found)
        for lexeme in found:
            df[(owner, lexeme)] += 1
    return dict(df), {k: tuple(v) for k, v in sums.items()}


def maintained(conn: psycopg.Connection) -> tuple[dict, dict]:
    """The maintained statistics in ``recount``'s shape (zero entries left out)."""
    df = {(o, lx): n for o, lx, n in conn.execute("SELECT owner_member_id, lexeme, df FROM history_df WHERE df <> 0")}
    sums = {
        o: (n, total)
        for o, n, total in conn.execute(
            "SELECT owner_member_id, doc_count, total_len FROM history_stats WHERE doc_count <> 0 OR total_len <> 0"
        )
    }
    return df, sums
