"""Relations and attributes stated by memories (docs/entities.md, "Relations and attributes").

A memory may state typed relations between entities (``subject -[predicate]-> object``) and
attributes of entities (``subject.key = value``). They are the memory's own claims: written with it
(Remember, RememberBatch, Derive, Supersede, imports), never edited, readable exactly when it is,
current while it is, valid when it is (they carry no time of their own), and deleted when it is
forgotten. Their entities are named as the memory's ``entities`` are and become entities the memory
is about, so a caller who can read the memory can see them (store_service/records/entities.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import psycopg
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.checks import check_mentions, check_snake, check_statement_counts, check_value
from servicekit.errors import InvalidArgument
from store_service.database import named


def _mention(mention, field: str) -> None:
    if not mention.entity_id and not mention.name:
        raise InvalidArgument(f"{field} needs an entity_id or a name", field=field)
    check_mentions([mention], field=field)


@dataclass(frozen=True)
class Stated:
    """A write's relations and attributes, checked (``check``)."""

    relations: tuple = ()
    attributes: tuple = ()

    def mentions(self) -> list:
        """Every entity mention of the statements, in order: each relation's subject and object, then
        each attribute's subject."""
        out = []
        for r in self.relations:
            out += [r.subject, r.object]
        return out + [a.subject for a in self.attributes]

    def fields(self) -> dict:
        """The statements as a request's fingerprint takes them (README.md, "Retries and request ids")."""

        def who(mention) -> str:
            return f"id:{uuid.UUID(mention.entity_id)}" if mention.entity_id else f"name:{mention.name.strip()}"

        if not (self.relations or self.attributes):
            return {}
        return {
            "relations": [[who(r.subject), r.predicate, who(r.object)] for r in self.relations],
            "attributes": [[who(a.subject), a.key, a.value] for a in self.attributes],
        }

    def rows(self, ids: list[uuid.UUID]) -> tuple[list[tuple], list[tuple]]:
        """(relations, attributes) as rows, given the entity id of each of ``mentions()`` in order:
        ``(ordinal, subject, predicate, object)`` and ``(ordinal, subject, key, value)``."""
        it = iter(ids)
        relations = [(n, next(it), r.predicate, next(it)) for n, r in enumerate(self.relations)]
        attributes = [(n, next(it), a.key, a.value) for n, a in enumerate(self.attributes)]
        return relations, attributes


def check(req) -> Stated:
    """The ``relations`` and ``attributes`` of a write request, checked: INVALID_ARGUMENT naming the
    part (``relations[2].predicate``) for too many, a predicate or key that is not snake_case, a
    blank, over-long or NUL-holding value, or a mention with neither id nor name, or a blank or
    over-long name; NOT_FOUND for a malformed entity id (as ``entities``)."""
    check_statement_counts(req)
    for n, r in enumerate(req.relations):
        _mention(r.subject, f"relations[{n}].subject")
        check_snake(r.predicate, f"relations[{n}].predicate", "predicate")
        _mention(r.object, f"relations[{n}].object")
    for n, a in enumerate(req.attributes):
        _mention(a.subject, f"attributes[{n}].subject")
        check_snake(a.key, f"attributes[{n}].key", "key")
        check_value(a.value, f"attributes[{n}].value")
    return Stated(tuple(req.relations), tuple(req.attributes))


def mention_ids(mentions, resolutions) -> list[uuid.UUID]:
    """The entity id of each of ``mentions`` in order, an id as given and a name as resolved
    (``resolutions``: one per name mention, in order, as ``entities.create_named`` reports them)."""
    names = iter(resolutions)
    return [uuid.UUID(x.entity_id) if x.entity_id else uuid.UUID(next(names).entity_id) for x in mentions]


def write(conn: psycopg.Connection, stated: list[tuple[uuid.UUID, list[tuple], list[tuple]]]) -> None:
    """Inserts the rows of ``Stated.rows`` of each written memory: (memory id, relations, attributes);
    one statement per table, none for none."""
    relations = [(mid, *r) for mid, rels, _ in stated for r in rels]
    attributes = [(mid, *a) for mid, _, atts in stated for a in atts]
    if relations:
        conn.execute(
            """INSERT INTO entity_relation (memory_id, ordinal, subject_id, predicate, object_id)
               SELECT * FROM unnest(%s::uuid[], %s::int[], %s::uuid[], %s::text[], %s::uuid[])""",
            [list(col) for col in zip(*relations, strict=True)],
        )
    if attributes:
        conn.execute(
            """INSERT INTO entity_attribute (memory_id, ordinal, subject_id, key, value)
               SELECT * FROM unnest(%s::uuid[], %s::int[], %s::uuid[], %s::text[], %s::text[])""",
            [list(col) for col in zip(*attributes, strict=True)],
        )


def attach(conn: psycopg.Connection, memories: dict[uuid.UUID, m.Memory]) -> None:
    """Fills each memory's ``relations`` and ``attributes`` (one query). The memories are readable
    to the caller, so their statements and the entities they name are too."""
    if not memories:
        return
    for r in named(conn).execute(
        """SELECT r.memory_id, r.ordinal, s.id AS subject_id, s.name AS subject_name, r.predicate AS word,
                  o.id AS object_id, o.name AS object_name, NULL AS value
             FROM entity_relation r JOIN entity s ON s.id = r.subject_id JOIN entity o ON o.id = r.object_id
            WHERE r.memory_id = ANY(%(ids)s)
           UNION ALL
           SELECT a.memory_id, a.ordinal, s.id, s.name, a.key, NULL, NULL, a.value
             FROM entity_attribute a JOIN entity s ON s.id = a.subject_id
            WHERE a.memory_id = ANY(%(ids)s)
            ORDER BY memory_id, ordinal""",
        {"ids": list(memories)},
    ):
        memory = memories[r.memory_id]
        if r.object_id is not None:
            memory.relations.add(
                subject_id=str(r.subject_id),
                subject_name=r.subject_name,
                predicate=r.word,
                object_id=str(r.object_id),
                object_name=r.object_name,
            )
        else:
            memory.attributes.add(subject_id=str(r.subject_id), subject_name=r.subject_name, key=r.word, value=r.value)


def erase(conn: psycopg.Connection, memory_ids: list[uuid.UUID]) -> None:
    """Deletes what forgotten memories stated (their text, as the body is)."""
    conn.execute("DELETE FROM entity_relation WHERE memory_id = ANY(%s)", (memory_ids,))
    conn.execute("DELETE FROM entity_attribute WHERE memory_id = ANY(%s)", (memory_ids,))
