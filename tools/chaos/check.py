"""What a chaos run checks after each restart, against the workspace database and through the gateway.

- Acknowledged writes are there: every memory of every client's model is stored as the model says
  (revision and body, superseded by the successor it was given, or forgotten), and the database
  holds no memory of the clients that no model knows (a write done twice, or half-known).
- Nothing half-written is visible (``HALF_WRITTEN``: each query counts violations).
- What was forgotten stays forgotten: Read is NOT_FOUND and a lexical recall of every word its text
  ever carried finds nothing.
- The embeddings catch up: after the backlog drains, every live memory has a vector of its revision.
"""

from __future__ import annotations

import uuid

import grpc
import psycopg
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from store_service.search import lexical_index
from tools.chaos.load import Client, Known

# Each query counts rows that a half-done write would leave behind; all must be 0.
HALF_WRITTEN = {
    "revision without its memory": """SELECT count(*) FROM memory_revision r
        WHERE NOT EXISTS (SELECT 1 FROM memory m WHERE m.id = r.memory_id)""",
    "link without both ends": """SELECT count(*) FROM memory_link l
        WHERE NOT EXISTS (SELECT 1 FROM memory m WHERE m.id = l.memory_id)
           OR (l.target_memory_id IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM memory t WHERE t.id = l.target_memory_id))
           OR (l.target_entity_id IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM entity e WHERE e.id = l.target_entity_id))""",
    "live memory whose history is not revisions 1..n-1": """SELECT count(*) FROM memory m
        WHERE m.forgotten_at IS NULL AND (SELECT count(*) FROM memory_revision r
              WHERE r.memory_id = m.id AND r.revision BETWEEN 1 AND m.revision - 1) <> m.revision - 1""",
    "forgotten memory with text, history, vector, job or postings": """SELECT count(*) FROM memory m
        WHERE m.forgotten_at IS NOT NULL AND (m.title <> '' OR m.body <> ''
              OR EXISTS (SELECT 1 FROM memory_revision r WHERE r.memory_id = m.id)
              OR EXISTS (SELECT 1 FROM memory_embedding e WHERE e.memory_id = m.id)
              OR EXISTS (SELECT 1 FROM embedding_job j WHERE j.memory_id = m.id)
              OR EXISTS (SELECT 1 FROM lexical_document d WHERE d.memory_id = m.id))""",
    "live memory missing from the keyword index": """SELECT count(*) FROM memory m
        WHERE m.forgotten_at IS NULL AND NOT EXISTS (SELECT 1 FROM lexical_document d WHERE d.memory_id = m.id)""",
    "superseded or invalidated memory that kept its vector": """SELECT count(*) FROM memory m
        WHERE m.retired_at IS NOT NULL AND EXISTS (SELECT 1 FROM memory_embedding e WHERE e.memory_id = m.id)""",
    "vector of another revision than the memory's": """SELECT count(*) FROM memory_embedding e
        JOIN memory m ON m.id = e.memory_id WHERE e.memory_revision <> m.revision""",
}
VECTORS_MISSING = """SELECT count(*) FROM memory m WHERE m.forgotten_at IS NULL AND m.retired_at IS NULL
    AND NOT EXISTS (SELECT 1 FROM memory_embedding e WHERE e.memory_id = m.id AND e.memory_revision = m.revision)"""


def half_written(conn: psycopg.Connection) -> dict[str, int]:
    """Violations per ``HALF_WRITTEN`` check, plus whether the keyword statistics differ from a
    recount (1) or not (0) and how many block problems ``lexical_index.block_problems`` finds."""
    found = {name: conn.execute(query).fetchone()[0] for name, query in HALF_WRITTEN.items()}
    found["keyword statistics differ from a recount"] = int(
        lexical_index.maintained(conn) != lexical_index.recount(conn)
    )
    found["keyword postings the packed blocks do not hold exactly"] = len(lexical_index.block_problems(conn))
    return found


def vectors_missing(conn: psycopg.Connection) -> int:
    """Live memories without a vector of their current revision."""
    return conn.execute(VECTORS_MISSING).fetchone()[0]


def _holds(known: Known, row) -> bool:
    """Whether a stored row (created_by, revision, title, body, superseded_by_id, forgotten_at)
    is what the model says."""
    _, revision, title, body, successor, forgotten_at = row
    if known.state == "forgotten":
        return forgotten_at is not None and title == "" and body == ""
    if forgotten_at is not None or (revision, body) != (known.revision, known.body):
        return False
    return successor is None if known.state == "live" else str(successor) == known.successor


def stored_as_modelled(conn: psycopg.Connection, clients: list[Client]) -> tuple[set[str], int]:
    """The memory ids stored as their client's model says, and the number of the clients' stored
    memories that no model knows (each one a write done twice or never answered)."""
    members = {uuid.UUID(c.member_id): c for c in clients}
    rows = conn.execute(
        "SELECT id, created_by, revision, title, body, superseded_by_id, forgotten_at FROM memory "
        "WHERE created_by = ANY(%s)",
        (list(members),),
    ).fetchall()
    good, unknown = set(), 0
    for row in rows:
        known = members[row[1]].mine.get(str(row[0]))
        if known is None:
            unknown += 1
        elif _holds(known, row[1:]):
            good.add(str(row[0]))
    return good, unknown


def still_forgotten(clients: list[Client]) -> tuple[int, int]:
    """(forgotten memories in the models, those that read as NOT_FOUND and whose every word a
    lexical recall no longer finds), asked through the gateway as their own member."""
    total = gone = 0
    for client in clients:
        for memory_id, known in client.mine.items():
            if known.state != "forgotten":
                continue
            total += 1
            try:
                client.stub.Read(g.ReadRequest(id=memory_id), metadata=client.md, timeout=30)
                continue
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.NOT_FOUND:
                    continue
            hits = [
                client.stub.Recall(
                    g.RecallRequest(query=word, purpose=m.PURPOSE_CONVERSATION, mode=m.RECALL_MODE_LEXICAL),
                    metadata=client.md,
                    timeout=30,
                ).items
                for word in known.markers
            ]
            gone += not any(hits)
    return total, gone
