"""Request ids (AIP-155) bound to the caller, the operation and a fingerprint of the request.

A write that carries a ``request_id`` (Remember, each RememberBatch entry, Derive, Supersede) stores
it on the memory it creates, with the operation and the request's fingerprint: the sha256 of the
canonical encoding (``canonical``) of the fields that define the write, normalised as the write uses
them. A later write by the same member with the same request id

- of the same operation and fingerprint is a retry: it writes nothing and is answered with the first
  result, the memory as the caller may read it now (NOT_FOUND when it may not);
- of another operation or fingerprint is refused with ALREADY_EXISTS (ErrorInfo reason
  ``REQUEST_ID_REUSED``, metadata ``request_id`` and the ``operation`` the id is bound to) and writes
  nothing: a different write is never answered with the first one's result.

Request ids are per member (another member's identical id is another id) and shared by the three
operations. They are kept as long as the memory they created, which is the life of the workspace
(memories are never deleted; a forgotten one stays as a tombstone): an id is never released for
reuse. Forgetting the memory erases its fingerprint with its text (a hash of a forgotten body
would let anyone holding the database confirm a guess of it); the id stays used, and any request
with it is NOT_FOUND. Ids written before fingerprints were kept (migration 0006) have none: any
request with such an id is ALREADY_EXISTS, because it can no longer be matched to the first.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import uuid
from dataclasses import dataclass

from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import AlreadyExists, NotFound, ServiceError

REMEMBER, DERIVE, SUPERSEDE = "remember", "derive", "supersede"


@dataclass(frozen=True)
class RequestKey:
    """A write's request id ("" for none), its operation and its fingerprint (``fingerprint``)."""

    request_id: str
    operation: str
    fingerprint: bytes


def canonical(operation: str, fields: dict) -> bytes:
    """The canonical encoding of a write: JSON of ``{"operation": ..., **fields}`` with sorted keys, no
    whitespace, UTF-8 text as is (RFC 8259; Python's ``json`` writes a float as its shortest
    round-trip repr). ``fields`` hold only str, int, float, None and lists of them."""
    return json.dumps(
        {"operation": operation, **fields}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    ).encode("utf-8")


def fingerprint(operation: str, fields: dict) -> bytes:
    """The sha256 (32 bytes) of ``canonical(operation, fields)``."""
    return hashlib.sha256(canonical(operation, fields)).digest()


def key(request_id: str, operation: str, fields: dict) -> RequestKey:
    """The ``RequestKey`` of a write; no fingerprint is computed without a request id."""
    return RequestKey(request_id, operation, fingerprint(operation, fields) if request_id else b"")


def mention_fields(mentions) -> dict:
    """Entity mentions (already checked) as the write uses them: the ids given, each once and sorted,
    and the names of the entities created, stripped and sorted (each name mention creates one)."""
    return {
        "entity_ids": sorted({str(uuid.UUID(x.entity_id)) for x in mentions if x.entity_id}),
        "entity_names": sorted(x.name.strip() for x in mentions if not x.entity_id),
    }


def instant(value: datetime.datetime | None) -> str | None:
    """A timestamp as the database keeps it (UTC, microseconds), in ISO 8601; None stays None."""
    return None if value is None else value.astimezone(datetime.UTC).isoformat()


def audience_name(value: int) -> str | None:
    """``workspace`` or ``member`` for an audience as sent; None for unspecified."""
    return {m.AUDIENCE_WORKSPACE: "workspace", m.AUDIENCE_MEMBER: "member"}.get(value)


def answer(
    wanted: RequestKey, operation: str | None, stored: bytes | None, forgotten: bool, first: m.Memory | NotFound
) -> m.Memory | ServiceError:
    """The answer to ``wanted`` when its request id is already bound to a memory written by
    ``operation`` with fingerprint ``stored`` (None: erased by a forget, or never kept), whose first
    result as the caller may see it now is ``first``."""
    if forgotten:
        return NotFound("memory not found")
    if stored is None:
        return AlreadyExists(
            f"request_id {wanted.request_id!r} was used before request fingerprints were kept, so this request "
            "cannot be matched to its first use; a new write needs a new request_id",
            request_id=wanted.request_id,
            operation=operation or "",
        )
    if operation != wanted.operation or stored != wanted.fingerprint:
        return reused(wanted.request_id, operation or "")
    return first


def reused(request_id: str, operation: str) -> AlreadyExists:
    """ALREADY_EXISTS for a request id already bound to a different request (of ``operation``)."""
    return AlreadyExists(
        f"request_id {request_id!r} was already used for a different request ({operation}); "
        "a new write needs a new request_id",
        request_id=request_id,
        operation=operation,
    )
