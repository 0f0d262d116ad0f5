"""Checks of a request's input that the store makes and a client makes before it sends, written once:
``recallatron import`` runs them on every record of an export file, and ``import-legacy`` on the
old store's rows, so a bad file is refused whole before any write, with the store's own message.

Pure: no database. A check raises the ServiceError the store answers with (INVALID_ARGUMENT, or
NOT_FOUND for a malformed entity id, as for an unknown one). The whole-message checks
(``check_imported_memory``, ``check_history_turn``) are what ImportMemories and AppendHistory check of
an item before they touch the database; the store adds only what needs it (members, import keys).
"""

from __future__ import annotations

import datetime
import re
import uuid
from collections.abc import Container
from dataclasses import dataclass

from recallatron.memory.v1 import memory_pb2 as m

from servicekit import vocabulary
from servicekit.errors import InvalidArgument, NotFound
from servicekit.limits import (
    MAX_BODY_BYTES,
    MAX_CHAT_ID_CHARS,
    MAX_FUTURE_SKEW,
    MAX_KEY_CHARS,
    MAX_MENTIONS,
    MAX_NAME_CHARS,
    MAX_REASON_CHARS,
    MAX_REQUEST_ID_CHARS,
    MAX_REVISIONS,
    MAX_SESSION_ID_CHARS,
    MAX_SOURCES,
    MAX_TITLE_CHARS,
)
from servicekit.text import is_blank

_KINDS = vocabulary.names(m.Kind)
_PURPOSES = vocabulary.names(m.Purpose)
_ORIGINS = vocabulary.names(m.Origin)
# A history turn's accepted role names and what is stored: ``rheo`` is the old store's name of the assistant.
TURN_ROLES = {"user": "user", "assistant": "assistant", "rheo": "assistant"}


def check_not_ahead(when: datetime.datetime, field: str, now: datetime.datetime | None = None) -> datetime.datetime:
    """``when`` (aware), or INVALID_ARGUMENT naming ``field`` when it lies more than ``MAX_FUTURE_SKEW``
    after ``now`` (default: the clock)."""
    now = now or datetime.datetime.now(datetime.UTC)
    if when > now + MAX_FUTURE_SKEW:
        hours = MAX_FUTURE_SKEW / datetime.timedelta(hours=1)
        raise InvalidArgument(
            f"{field} {when.astimezone(datetime.UTC).isoformat().replace('+00:00', 'Z')} is in the future: more "
            f"than {hours:g} hours after the clock ({now.astimezone(datetime.UTC):%Y-%m-%dT%H:%M:%SZ})",
            field=field,
        )
    return when


def time_range(
    req, start_field: str = "start_time", end_field: str = "end_time"
) -> tuple[datetime.datetime | None, datetime.datetime | None]:
    """A request's optional start and end Timestamps (fields ``start_field`` and ``end_field``) of a
    half-open range ``[start, end)``, as aware datetimes or None; INVALID_ARGUMENT naming the field
    for an invalid instant or an end not after the start. Stored times are whole microseconds, so a
    bound with nanoseconds is raised to the next microsecond: the range then holds exactly the stored
    times it held (a datetime would cut them, taking in the microsecond before the bound)."""
    start = _bound(req, start_field)
    end = _bound(req, end_field)
    if start is not None and end is not None:
        given = [(t.seconds, t.nanos) for t in (getattr(req, start_field), getattr(req, end_field))]
        if given[1] <= given[0]:
            raise InvalidArgument(f"{end_field} must be after {start_field}", field=end_field)
    return start, end


def _bound(req, field: str) -> datetime.datetime | None:
    """One bound of ``time_range``: None when unset, else the instant raised to a whole microsecond."""
    if not req.HasField(field):
        return None
    stamp = getattr(req, field)
    when = check_timestamp(stamp, field)
    if stamp.nanos % 1000:
        try:
            when += datetime.timedelta(microseconds=1)
        except OverflowError:  # within a microsecond of year 9999's end: after every stored time anyway
            pass
    return when


def enum_value(mapping: dict[int, str], value: int, field: str) -> str:
    """The stored string of an enum value; INVALID_ARGUMENT for unspecified or unknown values."""
    try:
        return mapping[value]
    except KeyError:
        allowed = ", ".join(sorted(mapping.values()))
        raise InvalidArgument(f"{field} must be one of: {allowed}", field=field) from None


# The spellings of a UUID that PostgreSQL's uuid type also reads the same (either case, hyphens
# between the groups or none, braces). Python's own parser takes more, and some of it as another id:
# "+", "_" or spaces among the digits, digits of other scripts (``int(text, 16)`` reads them).
_UUID_SPELLING = re.compile(
    r"\{?[0-9a-f]{8}(-?)[0-9a-f]{4}\1[0-9a-f]{4}\1[0-9a-f]{4}\1[0-9a-f]{12}\}?", re.IGNORECASE | re.ASCII
)


def spelled_uuid(value: str) -> uuid.UUID | None:
    """The UUID ``value`` spells as ``_UUID_SPELLING`` allows (braces balanced), else None."""
    if isinstance(value, str) and _UUID_SPELLING.fullmatch(value) and value.startswith("{") == value.endswith("}"):
        return uuid.UUID(value)
    return None


def parse_uuid(value: str, field: str = "id", *, missing_is_not_found: bool = False) -> uuid.UUID:
    """Parses a UUID spelled as ``_UUID_SPELLING`` allows; anything else is INVALID_ARGUMENT (or
    NOT_FOUND where asked)."""
    parsed = spelled_uuid(value)
    if parsed is not None:
        return parsed
    if missing_is_not_found:
        raise NotFound(f"{field} not found") from None
    raise InvalidArgument(f"{field} must be a UUID", field=field) from None


def check_text(title: str, body: str) -> None:
    """Validates a memory's title and body; INVALID_ARGUMENT naming the limit when off."""
    if not body or is_blank(body):
        raise InvalidArgument("body must not be empty or blank (invisible characters count as blank)", field="body")
    size = len(body.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise InvalidArgument(
            f"body is {size} bytes; the limit is {MAX_BODY_BYTES} bytes of UTF-8", field="body", limit=MAX_BODY_BYTES
        )
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidArgument(
            f"title is longer than {MAX_TITLE_CHARS} characters", field="title", limit=MAX_TITLE_CHARS
        )
    if "\x00" in body or "\x00" in title:
        raise InvalidArgument("title and body must not contain NUL characters", field="body")


def check_timestamp(ts, field: str) -> datetime.datetime:
    """A protobuf Timestamp as an aware UTC datetime; INVALID_ARGUMENT naming ``field`` outside years
    1..9999 or with nanoseconds outside 0..999,999,999."""
    try:
        return ts.ToDatetime(tzinfo=datetime.UTC)
    except (ValueError, OverflowError):
        raise InvalidArgument(f"{field} must be a valid timestamp between years 1 and 9999", field=field) from None


def check_confidence(value: float) -> float:
    """Validates a confidence in 0..1 (NaN refused); returns it with -0.0 read as 0.0 (IEEE: -0.0 + 0.0
    is +0.0), so a stored confidence never prints as ``-0``."""
    if not (0.0 <= value <= 1.0):
        raise InvalidArgument("confidence must be between 0 and 1", field="confidence")
    return value + 0.0


def check_request_id(request_id: str) -> None:
    """INVALID_ARGUMENT for an over-long request id or one with NUL."""
    if len(request_id) > MAX_REQUEST_ID_CHARS or "\x00" in request_id:
        raise InvalidArgument(
            f"request_id must be at most {MAX_REQUEST_ID_CHARS} characters, without NUL", field="request_id"
        )


def check_reason(reason: str) -> None:
    """A forget's reason: INVALID_ARGUMENT when over 1,000 characters or holding NUL."""
    if len(reason) > MAX_REASON_CHARS or "\x00" in reason:
        raise InvalidArgument(f"reason must be at most {MAX_REASON_CHARS} characters, without NUL", field="reason")


def check_mentions(mentions, field: str = "entities") -> None:
    """INVALID_ARGUMENT for too many mentions, a malformed id, or an over-long name or one that is
    blank once normalised (invisible characters alone would be one name key, "", for every writer);
    ``field`` names where they were given."""
    if len(mentions) > MAX_MENTIONS:
        raise InvalidArgument(f"at most {MAX_MENTIONS} entity mentions", field=field)
    for mention in mentions:
        if mention.entity_id:
            try:
                uuid.UUID(mention.entity_id)
            except ValueError:
                raise NotFound("entity not found", field=field) from None
        elif is_blank(mention.name) or len(mention.name) > MAX_NAME_CHARS or "\x00" in mention.name:
            raise InvalidArgument(
                f"an entity mention needs an entity_id or a name of 1..{MAX_NAME_CHARS} characters", field=field
            )


# A relation's predicate or an attribute's key: lower-case snake_case, a letter first.
SNAKE = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
MAX_SNAKE_CHARS = 64
MAX_STATEMENTS = 20  # relations, and attributes, per memory
MAX_VALUE_CHARS = 1_000


def check_snake(value: str, field: str, what: str) -> str:
    """A predicate (``what``: "predicate") or attribute key ("key"); INVALID_ARGUMENT naming ``field``."""
    if len(value) > MAX_SNAKE_CHARS or not SNAKE.fullmatch(value):
        example = "works_at" if what == "predicate" else "school"
        raise InvalidArgument(
            f"{field} must be a lower-case snake_case {what} of 1..{MAX_SNAKE_CHARS} characters, a letter first "
            f"(e.g. {example}), not {value[:80]!r}",
            field=field,
        )
    return value


def check_value(value: str, field: str) -> str:
    """An attribute's value: 1..1,000 characters, not blank, without NUL."""
    if is_blank(value) or len(value) > MAX_VALUE_CHARS or "\x00" in value:
        raise InvalidArgument(f"{field} must be 1..{MAX_VALUE_CHARS} characters, not blank, without NUL", field=field)
    return value


def check_statement_counts(item) -> None:
    """INVALID_ARGUMENT for more than ``MAX_STATEMENTS`` relations or attributes."""
    for name in ("relations", "attributes"):
        if len(getattr(item, name)) > MAX_STATEMENTS:
            raise InvalidArgument(f"at most {MAX_STATEMENTS} {name}", field=name)


def check_imported_statements(item: m.ImportedMemory, entity_keys: list[str]) -> None:
    """An imported memory's relations and attributes: the checks of a write's, and every entity
    named by one of its ``entity_keys``."""
    check_statement_counts(item)
    keys = set(entity_keys)

    def named(key: str, field: str) -> None:
        if key not in keys:
            raise InvalidArgument(f"{field} must be one of the memory's entity_keys", field=field)

    for n, r in enumerate(item.relations):
        named(r.subject_key, f"relations[{n}].subject_key")
        check_snake(r.predicate, f"relations[{n}].predicate", "predicate")
        named(r.object_key, f"relations[{n}].object_key")
    for n, a in enumerate(item.attributes):
        named(a.subject_key, f"attributes[{n}].subject_key")
        check_snake(a.key, f"attributes[{n}].key", "key")
        check_value(a.value, f"attributes[{n}].value")


def check_key(value: str, field_name: str) -> str:
    """An import key: 1..200 characters without NUL (INVALID_ARGUMENT naming the field otherwise)."""
    if not is_key(value):
        raise InvalidArgument(f"{field_name} must be 1..{MAX_KEY_CHARS} characters without NUL", field=field_name)
    return value


def is_key(value: str) -> bool:
    """Whether ``value`` passes ``check_key``."""
    return bool(value) and len(value) <= MAX_KEY_CHARS and "\x00" not in value


@dataclass
class ImportedFields:
    """An ImportedMemory's fields as checked, its keys not yet resolved."""

    key: str
    author: uuid.UUID
    kind: str
    purpose: str
    origin: str
    confidence: float
    audience: uuid.UUID | None  # the author for a member-only memory, None for the workspace
    entity_keys: list[str]
    created_at: datetime.datetime | None
    updated_at: datetime.datetime | None
    occurred_at: datetime.datetime | None
    revisions: list[tuple[str, str, float, datetime.datetime | None, datetime.datetime | None]]
    derived_keys: list[str]
    supersedes_key: str
    valid_from: datetime.datetime | None = None
    # An Invalidate's end and reason, both or neither.
    valid_until: datetime.datetime | None = None
    invalidation_reason: str = ""


def _past_time(msg, name: str, now: datetime.datetime, field: str = "") -> datetime.datetime | None:
    """The time ``name`` of ``msg`` if set: a valid timestamp no further ahead than ``MAX_FUTURE_SKEW``
    (an imported time is a past one); INVALID_ARGUMENT naming ``field`` (default ``name``) otherwise."""
    if not msg.HasField(name):
        return None
    return check_not_ahead(check_timestamp(getattr(msg, name), field or name), field or name, now)


def check_imported_memory(item: m.ImportedMemory, members: Container[uuid.UUID] | None = None) -> ImportedFields:
    """Checks one ImportedMemory as ImportMemories does before it reads the database; raises the
    ServiceError it fails with. ``members``: the workspace's member ids, its author NOT_FOUND when not
    one of them; None (a client checking a file) takes the author to be a member."""
    key = check_key(item.import_key, "import_key")
    author = parse_uuid(item.author_member_id, "author_member_id")
    if members is not None and author not in members:
        raise NotFound(
            f"author_member_id {item.author_member_id} is not a member of this workspace", field="author_member_id"
        )
    kind = "note" if item.kind == m.KIND_UNSPECIFIED else enum_value(_KINDS, item.kind, "kind")
    purpose = enum_value(_PURPOSES, item.purpose, "purpose")
    origin = "migrated" if item.origin == m.ORIGIN_UNSPECIFIED else enum_value(_ORIGINS, item.origin, "origin")
    check_text(item.title, item.body)
    confidence = check_confidence(item.confidence) if item.HasField("confidence") else 1.0
    if item.audience == m.AUDIENCE_WORKSPACE:
        audience = None
    elif item.audience == m.AUDIENCE_MEMBER:
        audience = author
    else:
        raise InvalidArgument("audience must be workspace or member", field="audience")
    check_reason(item.reason)
    check_mentions(item.entities)
    if len(item.entities) + len(item.entity_keys) > MAX_MENTIONS:
        raise InvalidArgument(f"at most {MAX_MENTIONS} entity mentions", field="entity_keys")
    entity_keys = [check_key(k, "entity_keys") for k in item.entity_keys]
    check_imported_statements(item, entity_keys)
    now = datetime.datetime.now(datetime.UTC)
    created_at, updated_at = _past_time(item, "created_at", now), _past_time(item, "updated_at", now)
    occurred_at = _past_time(item, "occurred_at", now)
    if len(item.revisions) > MAX_REVISIONS:
        raise InvalidArgument(f"at most {MAX_REVISIONS} revisions", field="revisions")
    revisions = []
    for i, rev in enumerate(item.revisions):
        check_text(rev.title, rev.body)
        rev_conf = check_confidence(rev.confidence) if rev.HasField("confidence") else confidence
        replaced = _past_time(rev, "replaced_at", now, f"revisions[{i}].replaced_at")
        rev_valid_from = _past_time(rev, "valid_from", now, f"revisions[{i}].valid_from")
        revisions.append((rev.title, rev.body, rev_conf, replaced or updated_at or created_at, rev_valid_from))
    if len(item.derived_from_keys) > MAX_SOURCES:
        raise InvalidArgument(f"at most {MAX_SOURCES} derived_from_keys", field="derived_from_keys")
    derived = list(dict.fromkeys(check_key(k, "derived_from_keys") for k in item.derived_from_keys))
    supersedes = check_key(item.supersedes_key, "supersedes_key") if item.supersedes_key else ""
    valid_from = _past_time(item, "valid_from", now)
    valid_until = _past_time(item, "valid_until", now)
    check_reason(item.invalidation_reason)
    if (valid_until is None) != (not item.invalidation_reason.strip()):
        raise InvalidArgument(
            "an invalidated memory needs both valid_until and invalidation_reason", field="invalidation_reason"
        )
    start = valid_from or occurred_at or created_at
    if valid_until is not None and start is not None and valid_until < start:
        raise InvalidArgument("valid_until must not be before the memory's valid_from", field="valid_until")
    return ImportedFields(
        key,
        author,
        kind,
        purpose,
        origin,
        confidence,
        audience,
        entity_keys,
        created_at,
        updated_at,
        occurred_at,
        revisions,
        derived,
        supersedes,
        valid_from,
        valid_until,
        item.invalidation_reason.strip(),
    )


@dataclass
class NewTurn:
    """A validated turn about to be stored."""

    request_id: str
    chat_id: str
    role: str
    text: str
    occurred_at: datetime.datetime
    session_id: str | None
    timed: bool = True  # occurred_at was sent (else it is the time of the call)

    def same_request(self, other: NewTurn) -> bool:
        """Whether two turns are one request sent twice: same chat, role, text and session, and the
        same time where both sent one (an unsent time is the time of each call, never equal)."""
        same = (self.chat_id, self.role, self.text, self.session_id) == (
            other.chat_id,
            other.role,
            other.text,
            other.session_id,
        )
        return same and (not (self.timed and other.timed) or self.occurred_at == other.occurred_at)


def _short_text(value: str, field: str, limit: int, required: bool) -> None:
    """INVALID_ARGUMENT for a blank (when ``required``), over-long or NUL-holding identifier."""
    if required and not value.strip():
        raise InvalidArgument(f"{field} must not be empty", field=field)
    if len(value) > limit or "\x00" in value:
        raise InvalidArgument(f"{field} must be at most {limit} characters, without NUL", field=field, limit=limit)


def check_history_turn(turn, now: datetime.datetime) -> NewTurn:
    """Validates one HistoryTurn without the database; raises the InvalidArgument it fails with.

    NUL characters are dropped from the text first (the old store's clients wrote stray ones); then
    the text must not be blank and must fit ``MAX_BODY_BYTES`` (65,536) bytes of UTF-8, the body limit
    of a memory. An unset ``occurred_at`` means ``now``; a set one is when the turn was said, so no
    more than ``MAX_FUTURE_SKEW`` after ``now`` (AppendHistory and ImportHistory alike)."""
    check_request_id(turn.request_id)
    _short_text(turn.chat_id, "chat_id", MAX_CHAT_ID_CHARS, required=True)
    _short_text(turn.session_id, "session_id", MAX_SESSION_ID_CHARS, required=False)
    role = TURN_ROLES.get(turn.role)
    if role is None:
        raise InvalidArgument(f"role must be one of: {', '.join(TURN_ROLES)}; got {turn.role[:40]!r}", field="role")
    text = turn.text.replace("\x00", "")
    if is_blank(text):
        raise InvalidArgument("text must not be empty or blank (invisible characters count as blank)", field="text")
    size = len(text.encode("utf-8"))
    if size > MAX_BODY_BYTES:
        raise InvalidArgument(
            f"text is {size} bytes; the limit is {MAX_BODY_BYTES} bytes of UTF-8", field="text", limit=MAX_BODY_BYTES
        )
    when = now
    if turn.HasField("occurred_at"):
        when = check_not_ahead(check_timestamp(turn.occurred_at, "occurred_at"), "occurred_at", now)
    return NewTurn(
        turn.request_id, turn.chat_id, role, text, when, turn.session_id or None, turn.HasField("occurred_at")
    )
