"""Imports: entities and memories brought into a workspace under import keys (AdminService.ImportMemories).

An import key (``legacy:item:42``, ``export:<old memory id>``) is unique per workspace and kept on
the row (migration 0008_import_key.sql), also after a forget: an item whose key was imported before
answers ``already imported`` with the first import's id and writes nothing, so a re-run, or a run
killed half way and run again, ends as one clean run did.

A written memory is a real memory: it goes through ``memories.insert_many`` like any Remember (keyword
index, embedding job, provenance links), so it is recallable, readable, correctable and forgettable,
and a forget reaches whatever was derived from it. What an import adds: the author is a member the
operator names, created/updated times and revisions are kept as given (none more than
``vocabulary.MAX_FUTURE_SKEW`` ahead of the clock: an imported time is a past one), and a supersede link joins
it to an older imported memory (as ``lifecycle.supersede`` would: the older leaves recall and the
successor keeps the older's sources, so a forget of one of them still reaches it; two confident
memories are flagged for review: ``store_service.records.lifecycle_rules``, which Supersede uses too).

Each item is validated and answered on its own; the items written are written in one transaction,
and imports of one workspace serialise on an advisory lock, so two concurrent runs cannot write one
key twice (the unique index would fail the second call otherwise).
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field

import psycopg
from recallatron.memory.v1 import memory_pb2 as m

from servicekit import deadlines
from servicekit.checks import check_imported_memory, check_key, is_key
from servicekit.errors import FailedPrecondition, InvalidArgument, NotFound, ServiceError
from servicekit.limits import MAX_IMPORT_BATCH, MAX_NAME_CHARS
from servicekit.text import name_key
from store_service.database import named
from store_service.records import entities, lifecycle_rules
from store_service.records.idempotency import RequestKey
from store_service.records.memories import Insert, NewMemory, insert_many

# pg_advisory_xact_lock(class, key) of a workspace's imports ("im"): one workspace, one database.
_LOCK_CLASS = 0x696D
_NO_REQUEST = RequestKey("", "", b"")


@dataclass
class Outcome:
    """One item's answer: its id (None when failed), whether it was written now, or its error."""

    id: uuid.UUID | None = None
    created: bool = False
    error: ServiceError | None = None

    @property
    def status(self) -> int:
        """The ImportStatus of this outcome."""
        if self.error is not None:
            return m.IMPORT_STATUS_FAILED
        return m.IMPORT_STATUS_CREATED if self.created else m.IMPORT_STATUS_ALREADY_IMPORTED


@dataclass
class _Item:
    """A validated ImportedMemory, its keys not yet resolved."""

    key: str
    new: NewMemory
    mentions: list
    entity_keys: list[str]
    revisions: list[tuple[str, str, float, datetime.datetime | None, datetime.datetime | None]]
    derived_keys: list[str]
    supersedes_key: str
    # An Invalidate's (end, reason) as exported; None when it was not invalidated.
    ended: tuple[datetime.datetime, str] | None = None
    # What it states, entities by key: (subject key, predicate, object key) and (subject key, key, value).
    relations: list[tuple[str, str, str]] = field(default_factory=list)
    attributes: list[tuple[str, str, str]] = field(default_factory=list)


@dataclass
class _Known:
    """A memory imported before (or earlier in this call), as later items need it."""

    id: uuid.UUID
    audience: uuid.UUID | None
    purpose: str
    superseded: bool
    forgotten: bool
    sources: list[uuid.UUID] = field(default_factory=list)


def check_sizes(entity_count: int, memory_count: int) -> None:
    """INVALID_ARGUMENT for a call with no items, or more than ``MAX_IMPORT_BATCH`` of either kind."""
    if entity_count + memory_count == 0:
        raise InvalidArgument("an import needs at least one entity or memory", field="memories")
    for count, name in ((entity_count, "entities"), (memory_count, "memories")):
        if count > MAX_IMPORT_BATCH:
            raise InvalidArgument(
                f"an import holds at most {MAX_IMPORT_BATCH} {name}; this one has {count}",
                field=name,
                limit=MAX_IMPORT_BATCH,
            )


def author_ids(items) -> set[uuid.UUID]:
    """The well-formed author ids of ImportedMemory messages (malformed ones fail their item later)."""
    out = set()
    for item in items:
        try:
            out.add(uuid.UUID(item.author_member_id))
        except ValueError:
            continue
    return out


def _prepare(item: m.ImportedMemory, authors: dict[uuid.UUID, m.Caller]) -> _Item:
    """Validates one ImportedMemory without the database (``servicekit.checks.check_imported_memory``,
    which ``recallatron import`` runs on a file too); raises the ServiceError it fails with."""
    it = check_imported_memory(item, authors)
    new = NewMemory(
        it.kind,
        item.title,
        item.body,
        it.audience,
        it.purpose,
        it.confidence,
        it.origin,
        it.occurred_at,
        it.valid_from,
        id=uuid.uuid4(),
        created_by=it.author,
        created_at=it.created_at,
        updated_at=it.updated_at,
        revision=len(it.revisions) + 1,
        import_key=it.key,
        reason=item.reason or None,
    )
    ended = (it.valid_until, it.invalidation_reason) if it.valid_until is not None else None
    return _Item(
        it.key,
        new,
        list(item.entities),
        it.entity_keys,
        it.revisions,
        it.derived_keys,
        it.supersedes_key,
        ended,
        [(r.subject_key, r.predicate, r.object_key) for r in item.relations],
        [(a.subject_key, a.key, a.value) for a in item.attributes],
    )


def import_items(
    conn: psycopg.Connection,
    authors: dict[uuid.UUID, m.Caller],
    entity_msgs,
    memory_msgs,
    validate_only: bool = False,
) -> tuple[list[Outcome], list[Outcome]]:
    """Imports ImportedEntity and ImportedMemory messages into the workspace of ``conn``, in one
    transaction; one Outcome per entity and per memory, in order. ``authors`` are the members of the
    workspace among the items' authors (``ControlPlane.members``).

    An item fails alone: INVALID_ARGUMENT for a bad field, NOT_FOUND for an author not in
    ``authors`` or an entity id not in the workspace, FAILED_PRECONDITION naming an import key that
    is not imported (nor earlier in this call), a forgotten source, or a supersede target already
    superseded, forgotten, of another purpose or of a narrower audience. With ``validate_only`` the
    transaction is rolled back: the outcomes are real, the ids of created items are not kept.
    """
    check_sizes(len(entity_msgs), len(memory_msgs))
    prepared: list[_Item | ServiceError] = []
    for item in memory_msgs:
        try:
            prepared.append(_prepare(item, authors))
        except ServiceError as exc:
            prepared.append(exc)
    with conn.transaction() as tx:
        conn.execute("SELECT pg_advisory_xact_lock(%s, 0)", (_LOCK_CLASS,))
        entity_out, entity_keys = _import_entities(conn, entity_msgs, prepared)
        memory_out = _import_memories(conn, authors, prepared, entity_keys)
        if validate_only:
            raise psycopg.Rollback(tx)
        deadlines.check_before_commit()
    return entity_out, memory_out


def _import_entities(conn: psycopg.Connection, msgs, items) -> tuple[list[Outcome], dict[str, uuid.UUID]]:
    """Writes the new entities; returns their outcomes and every entity key this call may name."""
    out: list[Outcome] = []
    named_keys = {k for it in items if isinstance(it, _Item) for k in it.entity_keys}
    # Only well-formed keys are looked up: a NUL in a query parameter fails the whole statement
    # (PostgreSQL text holds no NUL), and that entity is to fail alone, below.
    wanted = sorted(named_keys | {e.import_key for e in msgs if is_key(e.import_key)})
    known = dict(conn.execute("SELECT import_key, id FROM entity WHERE import_key = ANY(%s)", (wanted,)).fetchall())
    rows = []
    for msg in msgs:
        try:
            key = check_key(msg.import_key, "import_key")
            name = msg.name.strip()
            if not name or len(name) > MAX_NAME_CHARS or "\x00" in name:
                raise InvalidArgument(
                    f"an entity name must be 1..{MAX_NAME_CHARS} characters without NUL", field="name"
                )
        except ServiceError as exc:
            out.append(Outcome(error=exc))
            continue
        if key in known:
            out.append(Outcome(known[key]))
            continue
        known[key] = uuid.uuid4()
        rows.append((known[key], name, key, name_key(name)))
        out.append(Outcome(known[key], created=True))
    if rows:
        conn.execute(
            """INSERT INTO entity (id, name, import_key, name_key)
               SELECT * FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::text[])""",
            [list(col) for col in zip(*rows, strict=True)],
        )
    return out, known


def _known_memories(conn: psycopg.Connection, items) -> dict[str, _Known]:
    """The memories imported before under any key the items carry or name, with the sources of
    those an item supersedes."""
    keys = set()
    for it in items:
        if isinstance(it, _Item):
            keys |= {it.key, *it.derived_keys, it.supersedes_key} - {""}
    rows = (
        named(conn)
        .execute(
            """SELECT id, import_key, audience_member_id, purpose, retired_at IS NOT NULL AS superseded,
                      forgotten_at IS NOT NULL AS forgotten
                 FROM memory WHERE import_key = ANY(%s)""",
            (sorted(keys),),
        )
        .fetchall()
    )
    known = {r.import_key: _Known(r.id, r.audience_member_id, r.purpose, r.superseded, r.forgotten) for r in rows}
    targets = {
        known[it.supersedes_key].id: it.supersedes_key
        for it in items
        if isinstance(it, _Item) and it.supersedes_key in known
    }
    if targets:
        for mid, sources in lifecycle_rules.sources_of(conn, list(targets)).items():
            known[targets[mid]].sources.extend(sources)
    return known


def _resolve(it: _Item, known: dict[str, _Known], entity_keys: dict[str, uuid.UUID], entity_ids: set) -> tuple:
    """The sources, supersede target and entity mentions of one item; raises the ServiceError it
    fails with. Nothing is changed until the item is known to succeed."""
    sources: list[uuid.UUID] = []
    for k in it.derived_keys:
        src = known.get(k)
        if src is None:
            raise FailedPrecondition(f"derived_from_keys: {k!r} has not been imported", import_key=k)
        if src.forgotten:
            raise FailedPrecondition(f"derived_from_keys: {k!r} was forgotten", import_key=k)
        fault = lifecycle_rules.stem_fault(src.purpose, src.audience, it.new.purpose, it.new.audience)
        if fault == "purpose":
            raise FailedPrecondition(f"derived_from_keys: {k!r} has another purpose", import_key=k)
        if fault == "audience":
            raise FailedPrecondition(
                f"derived_from_keys: {k!r} is member-only, so a memory derived from it must be member-only "
                "for the same member",
                import_key=k,
            )
        sources.append(src.id)
    target = None
    if it.supersedes_key:
        target = known.get(it.supersedes_key)
        why = None
        if target is None:
            why = "has not been imported"
        elif target.forgotten:
            why = "was forgotten"
        elif target.superseded:
            why = "is already superseded or invalidated"
        else:
            why = {
                "purpose": "has another purpose",
                "audience": "has a narrower audience (a supersede may narrow the audience, never widen it)",
            }.get(lifecycle_rules.stem_fault(target.purpose, target.audience, it.new.purpose, it.new.audience))
        if why:
            raise FailedPrecondition(f"supersedes_key: {it.supersedes_key!r} {why}", import_key=it.supersedes_key)
        sources += [s for s in target.sources if s not in sources]
    for mention in it.mentions:
        if mention.entity_id and uuid.UUID(mention.entity_id) not in entity_ids:
            raise NotFound(f"entity {mention.entity_id} not found in this workspace", field="entities")
    for k in it.entity_keys:
        if k not in entity_keys:
            raise FailedPrecondition(f"entity_keys: {k!r} has not been imported", import_key=k)
    return sources, target


def _import_memories(
    conn: psycopg.Connection, authors: dict[uuid.UUID, m.Caller], items, entity_keys: dict[str, uuid.UUID]
) -> list[Outcome]:
    """Resolves and writes the validated items, in order (an item may name an earlier one's key)."""
    known = _known_memories(conn, items)
    mentioned = {uuid.UUID(x.entity_id) for it in items if isinstance(it, _Item) for x in it.mentions if x.entity_id}
    entity_ids = {r[0] for r in conn.execute("SELECT id FROM entity WHERE id = ANY(%s)", (list(mentioned),)).fetchall()}
    out: list[Outcome] = []
    todo: list[tuple[_Item, list[uuid.UUID]]] = []
    supersedes: list[tuple[uuid.UUID, uuid.UUID]] = []
    for it in items:
        if isinstance(it, ServiceError):
            out.append(Outcome(error=it))
            continue
        if it.key in known:
            out.append(Outcome(known[it.key].id))
            continue
        try:
            sources, target = _resolve(it, known, entity_keys, entity_ids)
        except ServiceError as exc:
            out.append(Outcome(error=exc))
            continue
        if target is not None:
            target.superseded = True
            supersedes.append((target.id, it.new.id))
        known[it.key] = _Known(it.new.id, it.new.audience, it.new.purpose, False, False, sources)
        todo.append((it, sources))
        out.append(Outcome(it.new.id, created=True))
    if todo:
        _write(conn, authors, todo, entity_keys, supersedes)
    return out


def _write(conn, authors, todo, entity_keys, supersedes) -> None:
    """Inserts the resolved items through ``insert_many`` (one statement per table for the batch),
    then their revisions and supersede links."""
    # An import brings its own entities (grouped by the file's entity keys): every name is a new one.
    mention_ids = [ids for ids, _ in entities.create_named(conn, None, [it.mentions for it, _ in todo])]
    inserts = [
        Insert(
            it.new,
            _NO_REQUEST,
            list(dict.fromkeys(ids + [entity_keys[k] for k in it.entity_keys])),
            sources,
            (
                [(n, entity_keys[s], p, entity_keys[o]) for n, (s, p, o) in enumerate(it.relations)],
                [(n, entity_keys[s], k, v) for n, (s, k, v) in enumerate(it.attributes)],
            ),
        )
        for (it, sources), ids in zip(todo, mention_ids, strict=True)
    ]
    if supersedes:
        # The rows this batch supersedes are locked (in id order, as every writer locks memories)
        # before insert_many takes the keyword statistics lock: a Correct holding one of them and
        # waiting for that lock deadlocked with the import (found by a hostile review).
        conn.execute(
            "SELECT id FROM memory WHERE id = ANY(%s) ORDER BY id FOR UPDATE", (sorted(old for old, _ in supersedes),)
        )
    # Every row names its author (NewMemory.created_by); the caller is only insert_many's default
    # author and request-id reader, and no import row carries a request id.
    insert_many(conn, authors[todo[0][0].new.created_by], inserts)
    revisions = [
        (it.new.id, n, title, body, conf, replaced or datetime.datetime.now(datetime.UTC), valid_from)
        for it, _ in todo
        for n, (title, body, conf, replaced, valid_from) in enumerate(it.revisions, start=1)
    ]
    if revisions:
        conn.execute(
            """INSERT INTO memory_revision (memory_id, revision, title, body, confidence, replaced_at, valid_from)
               SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::text[], %s::text[], %s::float8[],
                                    %s::timestamptz[], %s::timestamptz[])""",
            [list(col) for col in zip(*revisions, strict=True)],
        )
    if supersedes:
        lifecycle_rules.retire(conn, supersedes, touch=False)
    # Invalidated as exported, unless a successor in this batch or an earlier one ended it already.
    replaced = {old for old, _ in supersedes}
    ended = [(it.new.id, *it.ended) for it, _ in todo if it.ended is not None and it.new.id not in replaced]
    if ended:
        ids = [mid for mid, _, _ in ended]
        conn.execute(
            """UPDATE memory m SET valid_until = greatest(e.until, m.valid_from), invalidated = true,
                      invalidation_reason = e.reason, retired_at = greatest(m.updated_at, m.created_at)
                 FROM unnest(%s::uuid[], %s::timestamptz[], %s::text[]) AS e(id, until, reason)
                WHERE m.id = e.id AND m.superseded_by_id IS NULL""",
            [ids, [u for _, u, _ in ended], [r for _, _, r in ended]],
        )
        lifecycle_rules.leave(conn, ids)
