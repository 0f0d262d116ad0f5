"""The memory tools, each one gateway RPC: its input schema follows the RPC's request message. The
seven operations and capture write and read memories; find_entities, search_history, list_memories
and get_context look things up (FindEntities, SearchHistory, ListMemories, GetContext).

Enum inputs take the short names the CLI uses (``note``, ``workspace``, ``conversation``;
servicekit.vocabulary). Each tool returns the RPC's response as structured content (the protobuf
JSON mapping with proto field names and every field, as ``recallatron ... --json`` prints it) and a
compact text rendering (``render``) as its content, both within the size bound
RECALLATRON_MCP_MAX_TOKENS and RECALLATRON_MCP_MAX_CHARS (``render.result``). A failed call is a
tool error whose text is ``<gRPC status name>: <message>``, exactly what the CLI prints on stderr;
arguments the input schema refuses are ``INVALID_ARGUMENT: <field>: <why>`` (``invalid_arguments``)
and never reach the gateway.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Annotated, Literal

import grpc
from google.protobuf import timestamp_pb2
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from client import choices
from mcp_server import guidance, render
from servicekit import limits, settings
from servicekit.errors import error_info
from servicekit.render import CHARS_PER_TOKEN, Bound

# One gRPC call may not outlast this many seconds: a stuck gateway becomes DEADLINE_EXCEEDED for the
# model instead of a tool call that never returns. A cold Recall (first cross-encoder load) takes a
# few seconds on a 2-core machine; a minute leaves ample room.
CALL_TIMEOUT_S = 60.0

Purpose = Literal[tuple(choices.PURPOSES)]
Kind = Literal[tuple(choices.KINDS)]
Audience = Literal[tuple(choices.AUDIENCES)]
Mode = Literal[tuple(choices.MODES)]

MemoryId = Annotated[str, Field(description="Memory UUID, as shown in brackets in a result.")]
Revision = Annotated[int, Field(description="The revision of the memory as you last read it.")]
Body = Annotated[str, Field(description="The memory's text: non-blank, at most 65,536 bytes of UTF-8.")]
Title = Annotated[str, Field(description="Short title, at most 1,000 characters; may be empty.")]
Confidence = Annotated[float | None, Field(description="Your confidence in it, 0..1; unset means 1.")]
RequestId = Annotated[str, Field(description="Optional id that makes a retry of this call return the first result.")]
About = Annotated[
    list[str],
    Field(
        description="Names of entities the memory is about: each links to the entity of that name you can see, "
        "or a new one when there is none."
    ),
]
AboutIds = Annotated[list[str], Field(description="UUIDs of existing entities the memory is about.")]
# A chat agent's memory is its member's alone unless the agent chooses the workspace: what a user says
# to their assistant ("I prefer tea") is not the team's to read.
AudienceChoice = Annotated[
    Audience, Field(description="member (the default): you alone; workspace: every member of the workspace.")
]

Metadata = client.Metadata
Superseded = Literal[tuple(choices.SUPERSEDED)]

# The most a bundle may hold in one result is a quarter of the result bound (``register``).
ContextBudget = Annotated[
    int,
    Field(
        ge=0,
        le=limits.CONTEXT_MAX_BUDGET,
        description=f"Most tokens of the bundle: 0 means {limits.CONTEXT_DEFAULT_BUDGET:,}, else "
        f"{limits.CONTEXT_MIN_BUDGET}..{limits.CONTEXT_MAX_BUDGET:,}; a budget over a quarter of what one result "
        "holds (RECALLATRON_MCP_MAX_TOKENS, default 8,000) is lowered to that quarter.",
    ),
]
Time = Annotated[
    str | None, Field(description="An RFC 3339 time (2026-03-02T08:00:00Z) or a date (2026-03-02); unset: no bound.")
]
ValidFrom = Annotated[
    str | None, Field(description="When the claim became true, RFC 3339 or a date; unset: occurred_at, else now.")
]
AsOf = Annotated[
    str | None,
    Field(description="What held at this time (RFC 3339 or a date): memories valid then, replaced or ended ones too."),
]
KnownAt = Annotated[
    str | None,
    Field(description="What was known at this time (RFC 3339 or a date): memories written by then, as they read then."),
]
PageToken = Annotated[
    str,
    Field(
        max_length=4096,
        description="The next_page_token of the previous page, every other argument unchanged (page_size may "
        "change); empty: the first page.",
    ),
]

CAPTURE_GUIDANCE = (
    "Use it when the user states something worth keeping (a fact about them, a preference, a decision, "
    "a date): pass the turn as it was said and, for each memory, the exact words of the turn that state "
    "it as its span. A proposal is stored only when its span occurs in the turn, its body is not empty and "
    "you cannot already read a memory with the same body; otherwise it is skipped with the reason, which "
    "is not an error. Propose only what the turn states, never what it merely implies or what you "
    "inferred, and pass a request_id (such as the turn's id) so that a retry stores nothing twice."
)


class Relation(BaseModel):
    """A relation the memory states (recallatron.memory.v1.EntityRelation), by entity names."""

    subject: Annotated[str, Field(min_length=1, max_length=200, description="The subject entity's name.")]
    predicate: Annotated[
        str, Field(min_length=1, max_length=64, description="A lower-case snake_case verb phrase: works_at, sister_of.")
    ]
    object: Annotated[str, Field(min_length=1, max_length=200, description="The object entity's name.")]


class Attribute(BaseModel):
    """An attribute of an entity the memory states (recallatron.memory.v1.EntityAttribute)."""

    subject: Annotated[str, Field(min_length=1, max_length=200, description="The entity's name.")]
    key: Annotated[str, Field(min_length=1, max_length=64, description="A lower-case snake_case key: school, grade.")]
    value: Annotated[str, Field(min_length=1, max_length=1000, description="The value, e.g. Crawford Bay School.")]


Relations = Annotated[
    list[Relation],
    Field(
        description="Relations the memory states between entities, e.g. {subject: Maria, predicate: works_at, "
        "object: Nutrifax Ltd}; names resolve as about's do, and the memory is about them too. At most 20."
    ),
]
Attributes = Annotated[
    list[Attribute],
    Field(
        description="Attributes of entities the memory states, e.g. {subject: Arowyn, key: school, value: "
        "Crawford Bay School}. At most 20."
    ),
]


def _statements(relations: list[Relation], attributes: list[Attribute]) -> dict:
    """The request fields of the tools' ``relations`` and ``attributes``."""
    return {
        "relations": [
            m.EntityRelation(
                subject=m.EntityMention(name=r.subject), predicate=r.predicate, object=m.EntityMention(name=r.object)
            )
            for r in relations
        ],
        "attributes": [
            m.EntityAttribute(subject=m.EntityMention(name=a.subject), key=a.key, value=a.value) for a in attributes
        ],
    }


class Proposal(BaseModel):
    """One memory proposed from a turn (recallatron.memory.v1.CaptureProposal)."""

    span: Annotated[str, Field(description="The exact words of the turn that state this memory, copied from it.")]
    body: Annotated[str, Field(description="The memory as it will be stored; at most 65,536 bytes of UTF-8.")]
    title: Title = ""
    kind: Kind = "note"
    audience: AudienceChoice = "member"
    confidence: Confidence = None
    about: About = []  # noqa: RUF012 - pydantic copies defaults
    about_ids: AboutIds = []  # noqa: RUF012


def _timestamp(text: str | None, field: str = "occurred_at") -> timestamp_pb2.Timestamp | None:
    """RFC 3339 text, or a date (``YYYY-MM-DD``: its midnight, UTC) -> Timestamp; a tool error
    INVALID_ARGUMENT naming ``field`` for anything else."""
    if text is None:
        return None
    ts = timestamp_pb2.Timestamp()
    try:
        ts.FromJsonString(text)
    except ValueError:
        try:
            day = datetime.date.fromisoformat(text.strip()) if len(text.strip()) == 10 else None
        except ValueError:
            day = None
        if day is None:
            raise ToolError(
                f"INVALID_ARGUMENT: {field} {text!r} is not an RFC 3339 time (2026-03-02T08:00:00Z) "
                "between years 1 and 9999 in UTC, nor a date (2026-03-02)"
            ) from None
        ts.FromDatetime(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC))
    return ts


def error(text: str) -> CallToolResult:
    """A tool error result whose text is ``text`` (``<status name>: <message>``)."""
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def invalid_arguments(exc: ValidationError) -> CallToolResult:
    """Arguments the input schema refuses, as the gateway would word it: ``INVALID_ARGUMENT: field: why; ...``."""
    reasons = "; ".join(f"{'.'.join(str(part) for part in e['loc'])}: {e['msg']}" for e in exc.errors())
    return error(f"INVALID_ARGUMENT: {reasons}")


def _content(kind: str | None, title: str, body: str, confidence: float | None, request_id: str) -> dict:
    """The request fields Remember, Derive and Supersede share, as keyword arguments (``kind`` None:
    KIND_UNSPECIFIED, which Supersede reads as the old memory's kind)."""
    return dict(
        kind=choices.KINDS[kind] if kind else 0, title=title, body=body, confidence=confidence, request_id=request_id
    )


def _mentions(names: list[str], ids: list[str]) -> list[m.EntityMention]:
    return [m.EntityMention(name=n) for n in names] + [m.EntityMention(entity_id=i) for i in ids]


def register(server: MCPServer, gateway: client.Gateway, metadata_of: Callable[[Context], Metadata]) -> None:
    """Adds the tools to ``server``; each calls ``gateway`` with the credential ``metadata_of(ctx)``.

    ``metadata_of`` raises ToolError (UNAUTHENTICATED) when the request carries no credential."""
    mem = gateway.memory
    config = settings.load()
    bound = Bound(config.mcp_max_tokens, config.mcp_max_chars)

    def call(
        ctx: Context,
        rpc,
        build: Callable[[], object],
        body_offset: int = 0,
        answer: Callable[[grpc.RpcError], CallToolResult | None] = lambda exc: None,
    ) -> CallToolResult:
        """Builds the request, calls ``rpc`` and renders the response within ``bound``; a refusal is
        ``answer(exc)`` when that is a result, else an error result whose text is ``<status name>:
        <message>`` (returned, not raised, so the SDK adds no prefix)."""
        try:
            resp = rpc(build(), metadata=metadata_of(ctx), timeout=CALL_TIMEOUT_S)
        except grpc.RpcError as exc:
            return answer(exc) or error(f"{exc.code().name}: {exc.details()}")
        except ToolError as exc:
            return error(str(exc))
        rendered, structured = render.result(resp, bound, body_offset)
        return CallToolResult(content=[TextContent(type="text", text=rendered)], structured_content=structured)

    def tool(summary: str, **hints: bool):
        """Registers a tool described by ``summary`` plus the guidance; ``hints`` are ToolAnnotations
        (every tool touches only this workspace's memory, so none is open-world)."""
        return server.tool(
            description=guidance.describe(summary), annotations=ToolAnnotations(open_world_hint=False, **hints)
        )

    @tool(
        "Recall memories for a question with hybrid search (keywords and meaning); best first, each "
        "with its provenance, dates and scores. Recall returns only memories you may read.",
        read_only_hint=True,
    )
    def recallatron_recall(
        query: Annotated[str, Field(description="The question, 1..32,768 characters.")],
        ctx: Context,
        purpose: Purpose = "conversation",
        mode: Annotated[Mode | None, Field(description="Retrieval arms; unset means the workspace default.")] = None,
        top_k: Annotated[int, Field(description="How many memories, 1..200.")] = limits.DEFAULT_TOP_K,
        skip_rerank: bool = False,
        include_superseded: Annotated[
            bool, Field(description="Also search replaced memories (keywords only).")
        ] = False,
        entity_ids: Annotated[list[str], Field(description="Only memories about one of these entities.")] = [],  # noqa: B006
        occurred_after: Annotated[
            Time, Field(description="Only memories said at or after this time (else when written): RFC 3339 or a date.")
        ] = None,
        occurred_before: Annotated[
            Time, Field(description="Only memories said before this time: RFC 3339 or a date.")
        ] = None,
        reference_time: Annotated[
            Time, Field(description="What time words in the query ('last month') are read against; unset: now.")
        ] = None,
        skip_time_words: Annotated[bool, Field(description="Read no time in the query's words.")] = False,
        as_of: AsOf = None,
        known_at: KnownAt = None,
    ) -> CallToolResult:
        return call(
            ctx,
            mem.Recall,
            lambda: g.RecallRequest(
                query=query,
                purpose=choices.PURPOSES[purpose],
                mode=choices.MODES[mode] if mode else 0,
                top_k=top_k,
                skip_rerank=skip_rerank,
                include_superseded=include_superseded,
                entity_ids=entity_ids,
                occurred_after=_timestamp(occurred_after, "occurred_after"),
                occurred_before=_timestamp(occurred_before, "occurred_before"),
                reference_time=_timestamp(reference_time, "reference_time"),
                skip_time_words=skip_time_words,
                as_of=_timestamp(as_of, "as_of"),
                known_at=_timestamp(known_at, "known_at"),
            ),
        )

    @tool(
        "Read one memory by id with its provenance and, on request, its earlier revisions. A body too long "
        "for one result is cut and says where the rest starts: pass that as body_offset.",
        read_only_hint=True,
    )
    def recallatron_read(
        id: MemoryId,
        ctx: Context,
        include_history: bool = False,
        body_offset: Annotated[
            int, Field(ge=0, description="Show the body from this character on (a cut body names it).")
        ] = 0,
    ) -> CallToolResult:
        return call(ctx, mem.Read, lambda: g.ReadRequest(id=id, include_history=include_history), body_offset)

    @tool(
        "Remember something durable (origin told, by you): a note, fact, decision or summary, for you "
        "alone unless you pass audience workspace."
    )
    def recallatron_remember(
        body: Body,
        ctx: Context,
        title: Title = "",
        kind: Kind = "note",
        audience: AudienceChoice = "member",
        purpose: Purpose = "conversation",
        confidence: Confidence = None,
        occurred_at: Annotated[str | None, Field(description="When it happened, if known: RFC 3339 or a date.")] = None,
        valid_from: ValidFrom = None,
        about: About = [],  # noqa: B006
        about_ids: AboutIds = [],  # noqa: B006
        relations: Relations = [],  # noqa: B006
        attributes: Attributes = [],  # noqa: B006
        request_id: RequestId = "",
    ) -> CallToolResult:
        return call(
            ctx,
            mem.Remember,
            lambda: g.RememberRequest(
                purpose=choices.PURPOSES[purpose],
                audience=choices.AUDIENCES[audience],
                occurred_at=_timestamp(occurred_at),
                valid_from=_timestamp(valid_from, "valid_from"),
                entities=_mentions(about, about_ids),
                **_statements(relations, attributes),
                **_content(kind, title, body, confidence, request_id),
            ),
        )

    @tool(
        "Derive a memory (origin derived) from memories you read, e.g. a summary; it keeps links to its "
        "sources, and its audience and purpose are the narrowest of theirs."
    )
    def recallatron_derive(
        source_ids: Annotated[list[str], Field(description="UUIDs of the source memories, one or more.")],
        body: Body,
        ctx: Context,
        title: Title = "",
        kind: Kind = "summary",
        confidence: Confidence = None,
        about: About = [],  # noqa: B006
        about_ids: AboutIds = [],  # noqa: B006
        relations: Relations = [],  # noqa: B006
        attributes: Attributes = [],  # noqa: B006
        request_id: RequestId = "",
        valid_from: ValidFrom = None,
    ) -> CallToolResult:
        return call(
            ctx,
            mem.Derive,
            lambda: g.DeriveRequest(
                source_ids=source_ids,
                valid_from=_timestamp(valid_from, "valid_from"),
                entities=_mentions(about, about_ids),
                **_statements(relations, attributes),
                **_content(kind, title, body, confidence, request_id),
            ),
        )

    @tool(
        "Correct a memory in place (a typo, a wrong detail) under the revision you read; the old text "
        "stays as history. To replace a claim that changed, use recallatron_supersede.",
        idempotent_hint=False,
        destructive_hint=False,
    )
    def recallatron_correct(
        id: MemoryId,
        expected_revision: Revision,
        ctx: Context,
        body: Annotated[str | None, Field(description="New body; unset keeps it.")] = None,
        title: Annotated[str | None, Field(description="New title; unset keeps it.")] = None,
        confidence: Annotated[float | None, Field(description="New confidence 0..1; unset keeps it.")] = None,
        valid_from: Annotated[
            str | None, Field(description="A new start of validity, RFC 3339 or a date; unset keeps it.")
        ] = None,
    ) -> CallToolResult:
        return call(
            ctx,
            mem.Correct,
            lambda: g.CorrectRequest(
                id=id,
                expected_revision=expected_revision,
                title=title,
                body=body,
                confidence=confidence,
                valid_from=_timestamp(valid_from, "valid_from"),
            ),
        )

    @tool(
        "Supersede a memory by a new one under the revision you read (the old one stays readable, marked "
        "superseded); the audience may narrow to you, never widen.",
        destructive_hint=False,
    )
    def recallatron_supersede(
        id: MemoryId,
        expected_revision: Revision,
        body: Body,
        ctx: Context,
        title: Annotated[
            str, Field(description="Short title, at most 1,000 characters; empty keeps the old memory's title.")
        ] = "",
        kind: Annotated[Kind | None, Field(description="Unset keeps the old memory's kind.")] = None,
        audience: Annotated[Audience | None, Field(description="Narrow to member; unset keeps the old.")] = None,
        confidence: Confidence = None,
        request_id: RequestId = "",
        valid_from: Annotated[
            str | None,
            Field(description="When the new claim became true (the old held until then): RFC 3339 or a date."),
        ] = None,
        about: About = [],  # noqa: B006
        about_ids: AboutIds = [],  # noqa: B006
        relations: Relations = [],  # noqa: B006
        attributes: Attributes = [],  # noqa: B006
    ) -> CallToolResult:
        return call(
            ctx,
            mem.Supersede,
            lambda: g.SupersedeRequest(
                id=id,
                expected_revision=expected_revision,
                audience=choices.AUDIENCES[audience] if audience else 0,
                valid_from=_timestamp(valid_from, "valid_from"),
                entities=_mentions(about, about_ids),
                **_statements(relations, attributes),
                **_content(kind, title, body, confidence, request_id),
            ),
        )

    @tool(
        'End a claim that stopped being true without a successor ("Maria no longer works at Nutrifax") under '
        "the revision you read; it stays readable with its end and reason and leaves current recall.",
        destructive_hint=False,
    )
    def recallatron_invalidate(
        id: MemoryId,
        expected_revision: Revision,
        reason: Annotated[str, Field(description="Why it no longer holds, 1..1,000 characters.")],
        ctx: Context,
        at: Annotated[str | None, Field(description="When it stopped holding, RFC 3339 or a date; unset: now.")] = None,
    ) -> CallToolResult:
        return call(
            ctx,
            mem.Invalidate,
            lambda: g.InvalidateRequest(
                id=id, expected_revision=expected_revision, reason=reason, at=_timestamp(at, "at")
            ),
        )

    @tool(
        "Forget a memory and everything derived from it (tombstones keep only ids and dates). Use it for "
        "what must not be kept, not for what changed (supersede that).",
        destructive_hint=True,
        idempotent_hint=True,
    )
    def recallatron_forget(
        id: MemoryId,
        reason: Annotated[str, Field(description="Why it is forgotten; kept on the tombstone.")],
        ctx: Context,
    ) -> CallToolResult:
        return call(ctx, mem.Forget, lambda: g.ForgetRequest(id=id, reason=reason))

    @tool(
        f"Capture memories that a conversation turn states explicitly (origin told, the span kept as evidence; "
        f"each for you alone unless its audience is workspace). {CAPTURE_GUIDANCE}"
    )
    def recallatron_capture(
        turn: Annotated[str, Field(description="The conversation turn, as said: 1..65,536 bytes of UTF-8.")],
        proposals: Annotated[list[Proposal], Field(description="The memories it states, 0..20.")],
        ctx: Context,
        purpose: Purpose = "conversation",
        request_id: RequestId = "",
    ) -> CallToolResult:
        return call(
            ctx,
            mem.Capture,
            lambda: g.CaptureRequest(
                purpose=choices.PURPOSES[purpose],
                turn=turn,
                request_id=request_id,
                proposals=[
                    m.CaptureProposal(
                        span=p.span,
                        body=p.body,
                        title=p.title,
                        kind=choices.KINDS[p.kind],
                        audience=choices.AUDIENCES[p.audience],
                        confidence=p.confidence,
                        entities=_mentions(p.about, p.about_ids),
                    )
                    for p in proposals
                ],
            ),
        )

    @tool(
        "Find entities (the people, projects, places and things memories are about) by name or alias, "
        "case-insensitive, among those you can read a memory about. Use it to get an entity's id, then "
        "recall with entity_ids or list with about_id for the memories about it alone, or "
        "recallatron_get_entity for its page.",
        read_only_hint=True,
    )
    def recallatron_find_entities(
        name: Annotated[str, Field(min_length=1, max_length=200, description="The entity's name, 1..200 characters.")],
        ctx: Context,
    ) -> CallToolResult:
        return call(ctx, mem.FindEntities, lambda: g.FindEntitiesRequest(name=name))

    @tool(
        "Read an entity's page: its names and aliases, the attributes and relations memories you can read "
        "state about it (each with the memory that states it: a claim someone made, not a fact), and the "
        "memories about it, the latest said first, a page at a time. Use it when a question is about one "
        "person, project or place; as_of reads what held on a past day.",
        read_only_hint=True,
    )
    def recallatron_get_entity(
        entity: Annotated[
            str, Field(min_length=1, max_length=200, description="The entity's id, or its name or an alias.")
        ],
        ctx: Context,
        as_of: Annotated[
            str | None, Field(description="Attributes and relations that held at this time: RFC 3339 or a date.")
        ] = None,
        page_size: Annotated[int, Field(ge=0, le=100, description="Memories per page, 0..100; 0 means 20.")] = 0,
        page_token: PageToken = "",
    ) -> CallToolResult:
        return call(
            ctx,
            mem.GetEntity,
            lambda: g.GetEntityRequest(
                entity=entity, as_of=_timestamp(as_of, "as_of"), page_size=page_size, page_token=page_token
            ),
        )

    @tool(
        "Search your own conversation history: the turns kept for you alone as evidence of what was said "
        "(by capture or a harness), never memories and never seen by anyone else. With a query, keyword "
        "search, best first; without, every turn oldest first; either narrowed to a time range, a chat or a "
        "session, a page at a time. Use it when the user refers to an earlier conversation ('what did I "
        "say last week about ...') or you need the exact words; memories are what recallatron_recall finds.",
        read_only_hint=True,
    )
    def recallatron_search_history(
        ctx: Context,
        query: Annotated[str, Field(max_length=32_768, description="Keywords; empty: every turn, oldest first.")] = "",
        start_time: Annotated[
            Time, Field(description="Only turns said at or after this time: RFC 3339 or a date.")
        ] = None,
        end_time: Annotated[Time, Field(description="Only turns said before this time: RFC 3339 or a date.")] = None,
        chat_id: Annotated[str, Field(max_length=200, description="Only turns of this chat; empty: every chat.")] = "",
        session_id: Annotated[
            str, Field(max_length=200, description="Only turns of this session; empty: every session.")
        ] = "",
        page_size: Annotated[int, Field(ge=0, le=200, description="Turns per page, 0..200; 0 means 20.")] = 0,
        page_token: PageToken = "",
    ) -> CallToolResult:
        return call(
            ctx,
            mem.SearchHistory,
            lambda: g.SearchHistoryRequest(
                query=query,
                start_time=_timestamp(start_time, "start_time"),
                end_time=_timestamp(end_time, "end_time"),
                chat_id=chat_id,
                session_id=session_id,
                page_size=page_size,
                page_token=page_token,
            ),
        )

    @tool(
        "List the memories you can read, newest first, a page at a time, narrowed by kind, audience, purpose, "
        "entity, source memory, creation or change time, or superseded. Use it to browse or review (what was "
        "stored this week, your own private memories, everything about one entity); to answer a question, "
        "use recallatron_recall.",
        read_only_hint=True,
    )
    def recallatron_list_memories(
        ctx: Context,
        kind: Annotated[Kind | None, Field(description="Only this kind; unset: every kind.")] = None,
        audience: Annotated[
            Audience | None, Field(description="workspace, or member (your own private ones); unset: both.")
        ] = None,
        purpose: Annotated[Purpose | None, Field(description="Only this purpose; unset: every one granted.")] = None,
        about_id: Annotated[str, Field(description="Only memories about this entity (UUID).")] = "",
        derived_from_id: Annotated[str, Field(description="Only memories derived from this memory (UUID).")] = "",
        created_after: Annotated[Time, Field(description="Only memories created at or after this time.")] = None,
        created_before: Annotated[Time, Field(description="Only memories created before this time.")] = None,
        updated_after: Annotated[Time, Field(description="Only memories last changed at or after this time.")] = None,
        updated_before: Annotated[Time, Field(description="Only memories last changed before this time.")] = None,
        occurred_after: Annotated[
            Time, Field(description="Only memories said at or after this time (else when written).")
        ] = None,
        occurred_before: Annotated[Time, Field(description="Only memories said before this time.")] = None,
        superseded: Annotated[
            Superseded | None,
            Field(
                description="current, superseded (or invalidated), or all; unset: current, or with as_of or "
                "known_at what held or was known then."
            ),
        ] = None,
        as_of: AsOf = None,
        known_at: KnownAt = None,
        include_history: Annotated[bool, Field(description="Also show each memory's earlier revisions.")] = False,
        page_size: Annotated[int, Field(ge=0, le=200, description="Memories per page, 0..200; 0 means 50.")] = 0,
        page_token: PageToken = "",
    ) -> CallToolResult:
        return call(
            ctx,
            mem.ListMemories,
            lambda: g.ListMemoriesRequest(
                kind=choices.KINDS[kind] if kind else 0,
                audience=choices.AUDIENCES[audience] if audience else 0,
                purpose=choices.PURPOSES[purpose] if purpose else 0,
                entity_id=about_id,
                derived_from_id=derived_from_id,
                created_after=_timestamp(created_after, "created_after"),
                created_before=_timestamp(created_before, "created_before"),
                updated_after=_timestamp(updated_after, "updated_after"),
                updated_before=_timestamp(updated_before, "updated_before"),
                occurred_after=_timestamp(occurred_after, "occurred_after"),
                occurred_before=_timestamp(occurred_before, "occurred_before"),
                as_of=_timestamp(as_of, "as_of"),
                known_at=_timestamp(known_at, "known_at"),
                superseded=choices.SUPERSEDED[superseded] if superseded else 0,
                include_history=include_history,
                page_size=page_size,
                page_token=page_token,
            ),
        )

    # The bundle's text is held to its budget, and the structured content holds its memories again and
    # the text itself: a budget of a quarter of the result bound leaves both room.
    most_budget = min(bound.tokens, bound.chars // CHARS_PER_TOKEN) // 4

    def bundle_off(exc: grpc.RpcError) -> CallToolResult | None:
        """The bundle being off is an answer, not a failure: the model should recall instead."""
        info = error_info(exc)
        if info is None or info.reason != "CONTEXT_BUNDLE_OFF":
            return None
        text = (
            "The context bundle is off in this workspace (its context_bundle setting, off by default), so "
            "there is no bundle to load; this is not an error. Call recallatron_recall with what the user "
            f"asks instead. (The gateway said {exc.code().name}: {exc.details()})"
        )
        data = {"context_bundle": "off", "status": exc.code().name, "reason": info.reason, "message": exc.details()}
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)

    @tool(
        "Load your context bundle for one purpose: the memories you pinned, the newest summaries, the newest "
        "memory about each entity most mentioned lately and the newest memories, each with its provenance "
        "before its text, cut to a token budget (the last line says what was cut). Use it once at the start "
        "of a conversation for background; recall for anything specific. When the workspace has the bundle "
        "off the result says so (not an error): recall instead.",
        read_only_hint=True,
    )
    def recallatron_get_context(
        ctx: Context,
        purpose: Purpose = "conversation",
        token_budget: ContextBudget = 0,
        as_of: AsOf = None,
        known_at: KnownAt = None,
    ) -> CallToolResult:
        budget = min(token_budget or limits.CONTEXT_DEFAULT_BUDGET, most_budget)
        return call(
            ctx,
            mem.GetContext,
            lambda: g.GetContextRequest(
                purpose=choices.PURPOSES[purpose],
                token_budget=budget,
                as_of=_timestamp(as_of, "as_of"),
                known_at=_timestamp(known_at, "known_at"),
            ),
            answer=bundle_off,
        )
