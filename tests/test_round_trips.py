"""How many round trips a candidate arm's answer makes (libpq's own trace of the protocol): a question
with no term the keyword arm can score makes none, and an answer that reads runs its statements in
one snapshot (store_service.database.read_snapshot), begun by a single BEGIN."""

from __future__ import annotations

import tempfile
import uuid

import numpy as np
import psycopg
import pytest
from conftest import scratch_workspace_db
from pgvector.psycopg import register_vector
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.errors import InvalidArgument
from store_service.search import answers, candidates


@pytest.fixture
def workspace_conn(pg):
    with scratch_workspace_db(pg) as url, psycopg.connect(url) as conn:
        register_vector(conn)  # as the store's pools do
        yield conn


def _traced(conn: psycopg.Connection, run) -> list[str]:
    """The messages the client sent while ``run`` ran: one ``Query`` (simple protocol) or ``Sync``
    (extended) ends each round trip."""
    with tempfile.TemporaryFile("w+") as trace:
        conn.pgconn.trace(trace.fileno())
        try:
            run()
        finally:
            conn.pgconn.untrace()
        trace.seek(0)
        return [line for line in trace.read().splitlines() if "\tF\t" in line]


def _round_trips(sent: list[str]) -> int:
    return sum(1 for line in sent if "\tQuery\t" in line or "\tSync\t" in line)


CALLER = m.Caller(
    workspace_id=str(uuid.uuid4()), member_id=str(uuid.uuid4()), granted_purposes=[m.PURPOSE_CONVERSATION]
)


@pytest.mark.parametrize("query", ["", "   ", "the of and a", "?!.,"])
def test_a_question_with_nothing_to_score_makes_no_round_trip(workspace_conn, query):
    req = s.LexicalCandidatesRequest(caller=CALLER, purpose=m.PURPOSE_CONVERSATION, query=query, limit=10)
    answered = []
    sent = _traced(workspace_conn, lambda: answered.append(answers.lexical(req)(workspace_conn)))
    assert _round_trips(sent) == 0 and list(answered[0].candidates) == []


def test_a_bad_entity_filter_is_refused_before_any_statement():
    req = s.LexicalCandidatesRequest(
        caller=CALLER, purpose=m.PURPOSE_CONVERSATION, query="kestrel", limit=10, entity_ids=["not-a-uuid"]
    )
    with pytest.raises(InvalidArgument, match="entity_ids must be UUIDs"):
        answers.lexical(req)  # the request's check: no connection yet
    dense = s.DenseCandidatesRequest(
        caller=CALLER, purpose=m.PURPOSE_CONVERSATION, vector=[0.1] * 384, limit=10, entity_ids=["x"]
    )
    with pytest.raises(InvalidArgument, match="entity_ids must be UUIDs"):
        answers.dense(dense)


def test_the_meaning_arms_plan_settings_end_with_its_statements_whoever_holds_the_transaction(workspace_conn):
    vector = [1.0] + [0.0] * 383
    req = s.DenseCandidatesRequest(
        caller=CALLER, purpose=m.PURPOSE_CONVERSATION, vector=vector, limit=10, input_version="v"
    )
    inside = _traced(workspace_conn, lambda: answers.dense(req)(workspace_conn))
    alone = _traced(
        workspace_conn,
        lambda: candidates.dense(
            workspace_conn, CALLER, "conversation", np.array(vector, dtype=np.float32), "v", 0.3, 10
        ),
    )
    assert workspace_conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    # In the answer's snapshot the verdicts' statements follow, so the settings are reset; a
    # snapshot of its own ends at its COMMIT, which ends them without a round trip more.
    assert sum("RESET plan_cache_mode" in line for line in inside) == 1
    assert not any("RESET" in line for line in alone)
    assert _round_trips(alone) == _round_trips(inside) - 1


def test_an_answer_that_reads_begins_one_read_only_snapshot_and_ends_it(workspace_conn):
    req = s.LexicalCandidatesRequest(caller=CALLER, purpose=m.PURPOSE_CONVERSATION, query="kestrel hovers", limit=10)
    sent = _traced(workspace_conn, lambda: answers.lexical(req)(workspace_conn))
    queries = [line.split("\tQuery\t", 1)[1].strip() for line in sent if "\tQuery\t" in line]
    assert queries[0].startswith('"BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"'), queries
    assert queries[-1].startswith('"COMMIT"'), queries
    assert not any("SET TRANSACTION" in q for q in queries)
    assert workspace_conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert (workspace_conn.isolation_level, workspace_conn.read_only) == (None, None)
