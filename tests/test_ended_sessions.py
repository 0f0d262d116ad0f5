"""A session of the store's ended by the server's administrator (``pg_terminate_backend``: what a
workspace's move does to every session of its source, store_service/control/moves.py) just after the
pool lent it. While a move of the workspace runs (recorded, its lock held: ``moving``), a read is made
again on a fresh session and answers; a write is not made again (its session may have ended at its
COMMIT) and says UNAVAILABLE, so its client retries it. Outside a move, a lost session is a server's
trouble and a read says UNAVAILABLE at once."""

from __future__ import annotations

import contextlib
import threading
import types
import uuid

import grpc
import psycopg
import pytest
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

from servicekit.errors import error_info
from store_service import server
from store_service.control.plane import ControlPlane, whole_workspace
from store_service.database import Pool

LEX = m.RECALL_MODE_LEXICAL
# The store's own threads, whose connections are not a call's.
BACKGROUND = {"embedding-worker", "db-health", "move-recovery"}


class EndNextLent:
    """Ends, from another session, the backend of the next ``count`` connections the pools lend to
    ``db_name``, after the pool's own check passed: the first statement of the call then fails."""

    def __init__(self, stack, ws: str, monkeypatch) -> None:
        self.stack, self.ws, self.count, self.ended = stack, ws, 0, 0
        self.db_name = ControlPlane(stack.store.dbs).workspace(ws).db_name
        self.lock = threading.Lock()
        lend = Pool.getconn

        def getconn(pool, timeout=None):
            conn = lend(pool, timeout)
            with self.lock:
                due = (
                    self.count > 0
                    and conn.info.dbname == self.db_name
                    and threading.current_thread().name not in BACKGROUND
                )
                self.count -= due
            if due:
                with stack.db(ws) as killer:  # waits until the backend is gone
                    assert killer.execute("SELECT pg_terminate_backend(%s, 5000)", (conn.info.backend_pid,)).fetchone()[
                        0
                    ]
                self.ended += 1
            return conn

        monkeypatch.setattr(Pool, "getconn", getconn)

    def arm(self, count: int = 1) -> None:
        with self.lock:
            self.count = count


@pytest.fixture
def ending(stack, monkeypatch):
    ws = stack.workspace("sessions ended by an administrator")
    alice = stack.member(ws)
    alice.remember("The harbour cranes are inspected every spring.")
    stack.wait_backlog_empty()
    return EndNextLent(stack, ws, monkeypatch), alice


@contextlib.contextmanager
def moving(stack, ws: str):
    """A move of ``ws`` running, as the store sees one: recorded and its lock held (the server it
    names is not configured, so no store's recovery takes it up)."""
    control = psycopg.connect(stack.store.dbs.control_conninfo, autocommit=True)
    try:
        with whole_workspace(control, uuid.UUID(ws), "test"):
            control.execute("UPDATE workspace SET moving_to = 'elsewhere' WHERE id = %s", (ws,))
            try:
                yield
            finally:
                control.execute("UPDATE workspace SET moving_to = NULL WHERE id = %s", (ws,))
    finally:
        control.close()


def test_the_reads_made_again_are_store_methods():
    methods = set(s.DESCRIPTOR.services_by_name["StoreService"].methods_by_name)
    assert server.READS - methods == {"_lexical_candidates"}  # LexicalCandidates' inner, rerouted part
    assert not {"Remember", "Correct", "Forget", "RecordShown", "Capture", "KeepMemory"} & server.READS


@pytest.mark.parametrize("mode", [LEX, m.RECALL_MODE_HYBRID])
def test_a_recall_whose_session_a_move_ends_answers(stack, ending, mode):
    end, alice = ending
    with moving(stack, end.ws):
        end.arm()
        found = alice.recall("harbour cranes inspected", mode=mode)
    assert end.ended == 1
    assert [item.memory.body for item in found.items] == ["The harbour cranes are inspected every spring."]


def test_a_read_whose_session_a_move_ends_answers(stack, ending):
    end, alice = ending
    memory = alice.remember("The ferry leaves at nine.")
    with moving(stack, end.ws):
        end.arm()
        assert alice.read(memory.id).body == "The ferry leaves at nine."
    assert end.ended == 1


def test_a_read_ended_twice_in_a_move_says_unavailable_once(stack, ending):
    end, alice = ending
    with moving(stack, end.ws):
        end.arm(2)
        with pytest.raises(grpc.RpcError) as failed:
            alice.recall("harbour cranes", mode=LEX)
        assert end.ended == 2
        assert len(alice.recall("harbour cranes", mode=LEX).items) == 1  # and the next call answers
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    assert error_info(failed.value).reason == "WORKSPACE_UNAVAILABLE"


def test_a_read_whose_session_is_ended_outside_a_move_says_unavailable_at_once(stack, ending):
    end, alice = ending
    end.arm()
    with pytest.raises(grpc.RpcError) as failed:
        alice.recall("harbour cranes", mode=LEX)
    assert end.ended == 1 and end.count == 0
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    assert error_info(failed.value).reason == "WORKSPACE_UNAVAILABLE"
    assert len(alice.recall("harbour cranes", mode=LEX).items) == 1


def test_a_write_whose_session_a_move_ends_is_not_made_again(stack, ending):
    end, alice = ending
    request = g.RememberRequest(
        purpose=m.PURPOSE_CONVERSATION,
        audience=m.AUDIENCE_WORKSPACE,
        body="The gate code changes on Monday.",
        request_id="r1",
    )
    with moving(stack, end.ws):
        end.arm()
        with pytest.raises(grpc.RpcError) as failed:
            stack.memory.Remember(request, metadata=alice.md())
    assert end.ended == 1
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    with stack.db(end.ws) as conn:
        assert conn.execute("SELECT count(*) FROM memory WHERE body LIKE 'The gate code%'").fetchone()[0] == 0
    kept = stack.memory.Remember(request, metadata=alice.md()).memory  # the client's retry, same request id
    with stack.db(end.ws) as conn:
        assert conn.execute("SELECT count(*) FROM memory WHERE body LIKE 'The gate code%'").fetchone()[0] == 1
    assert alice.read(kept.id).body == "The gate code changes on Monday."


def test_a_read_whose_deadline_has_passed_is_not_made_again(stack, ending, monkeypatch):
    end, alice = ending
    # The store's view of the call's deadline only (the gateway shares this process): already past.
    monkeypatch.setattr(server, "deadlines", types.SimpleNamespace(remaining=lambda: -0.5))
    with moving(stack, end.ws):
        end.arm(2)
        with pytest.raises(grpc.RpcError) as failed:
            alice.recall("harbour cranes", mode=LEX)
    assert end.ended == 1 and end.count == 1  # one session ended, no second attempt to end
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
