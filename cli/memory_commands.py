"""The member's commands: remember, derive, correct, supersede, forget, read and recall.

Each has a parser function (``*_parser(sub)``, which also names its handler) and a handler taking
the gateway and the parsed arguments; ``command.gateway_command`` connects with the member token and
turns a failed call into its status code on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import datetime
import uuid

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import command, options
from client import choices
from servicekit import limits
from servicekit.render import for_terminal as shown
from servicekit.render import person, quote
from servicekit.vocabulary import name_of


def statement_options(parser: argparse.ArgumentParser) -> None:
    """``--relation`` and ``--attribute`` (docs/entities.md, "Relations and attributes")."""
    parser.add_argument(
        "--relation",
        nargs=3,
        action="append",
        default=[],
        metavar=("SUBJECT", "PREDICATE", "OBJECT"),
        help='a relation the memory states, e.g. Maria works_at "Nutrifax Ltd"; names resolved as --about (repeatable)',
    )
    parser.add_argument(
        "--attribute",
        nargs=3,
        action="append",
        default=[],
        metavar=("SUBJECT", "KEY", "VALUE"),
        help='an attribute the memory states, e.g. Arowyn school "Crawford Bay School" (repeatable)',
    )


def _statements(args: argparse.Namespace) -> dict:
    """The request fields of ``--relation`` and ``--attribute``."""
    return {
        "relations": [
            m.EntityRelation(subject=m.EntityMention(name=s), predicate=p, object=m.EntityMention(name=o))
            for s, p, o in args.relation
        ],
        "attributes": [
            m.EntityAttribute(subject=m.EntityMention(name=s), key=k, value=v) for s, k, v in args.attribute
        ],
    }


def mentions(names: list[str], ids: list[str]) -> list[m.EntityMention]:
    """The entities of ``--about NAME`` and ``--about-id ID`` as a request's mentions."""
    return [m.EntityMention(name=n) for n in names] + [m.EntityMention(entity_id=i) for i in ids]


def _ts(memory: m.Memory) -> str:
    return memory.created_at.ToDatetime(tzinfo=datetime.UTC).isoformat(timespec="seconds")


def _said(memory: m.Memory) -> str:
    """When the memory says it happened, for the lines that show it (time windows judge by it)."""
    if not memory.HasField("occurred_at"):
        return ""
    return "  happened " + memory.occurred_at.ToDatetime(tzinfo=datetime.UTC).isoformat(timespec="seconds")


def _revised(memory: m.Memory) -> str:
    """``  revision N by WHO`` when someone other than the author made the current revision."""
    if memory.revision == 1 or not memory.revised_by or memory.revised_by == memory.created_by:
        return ""
    return f"  revision {memory.revision} by {person(memory.revised_by, memory.revised_by_name)}"


def describe(memory: m.Memory) -> str:
    """A memory for people: id, revision, kind, audience, purpose, creation time, validity (and an
    invalidation's reason), then title, body, its successor, what it was captured from, links and
    (when read with --history) earlier revisions, one per line."""
    aud = "workspace" if memory.audience == m.AUDIENCE_WORKSPACE else f"member {memory.audience_member_id}"
    # Validity and an invalidation go on the first line, with the other times, where no stored text
    # stands: a title or body line can only imitate them (the reason, stored text too, is quoted).
    ended = f"  invalidated: {quote(memory.invalidation_reason)}" if memory.invalidated else ""
    text = (
        f"{memory.id}  revision {memory.revision}  {name_of(m.Kind, memory.kind)}  "
        f"{aud}  {name_of(m.Purpose, memory.purpose)}  by {person(memory.created_by, memory.created_by_name)}  "
        f"created {_ts(memory)}{_said(memory)}  {validity_text(memory)}{ended}{_revised(memory)}\n"
        f"  {shown(memory.title)}\n  {shown(memory.body)}"
    )
    if memory.superseded_by_id:
        text += f"\n  superseded by {memory.superseded_by_id}"
    if memory.evidence.span:  # a captured memory: the words of the turn that state it, stored text (quoted)
        text += f"\n  captured from the turn's words {quote(memory.evidence.span)}"
    for link in memory.links:
        target = link.target_memory_id or f"{shown(link.target_entity_name)} ({link.target_entity_id})"
        text += f"\n  {name_of(m.LinkType, link.type)} {target}"
    for rel in memory.relations:
        text += f"\n  states {shown(rel.subject_name)} {rel.predicate} {shown(rel.object_name)}"
    for att in memory.attributes:
        text += f"\n  states {shown(att.subject_name)} {att.key} = {shown(att.value)}"
    for rev in memory.history:
        made = f" by {person(rev.revised_by, rev.revised_by_name)}" if rev.revised_by else ""
        text += f"\n  revision {rev.revision}{made}: {shown(rev.title)} | {shown(rev.body)}"
    said = set()
    for res in memory.entity_resolutions:  # only in a write's answer (docs/entities.md)
        if (res.name, res.entity_id) in said:  # a name given again (a relation, an attribute): said once
            continue
        said.add((res.name, res.entity_id))
        others = f" (also of that name: {', '.join(res.other_entity_ids)})" if res.other_entity_ids else ""
        text += f"\n  entity {shown(res.name)}: {_RESOLVED.get(res.outcome, 'resolved')} {res.entity_id}{others}"
    return text


# How a name given at a write found its entity, as ``describe`` says it.
_RESOLVED = {
    m.ENTITY_RESOLUTION_OUTCOME_CREATED: "new",
    m.ENTITY_RESOLUTION_OUTCOME_LINKED: "the one you can see,",
    m.ENTITY_RESOLUTION_OUTCOME_CHOSEN: "chosen of several (docs/entities.md),",
}


def _ended(memory: m.Memory) -> str:
    """For a recall item: a mark and its validity when it no longer holds, else nothing. A history
    recall (--history) and a read in time mix such memories with current ones, so the mark comes
    right after the id, in brackets, where a reader scanning the list sees it: ``[superseded by
    ID]``, ``[invalidated]``, or ``[ended]`` for a claim superseded by a memory the reader may not
    read (its successor is not theirs to see, docs/time.md)."""
    if not memory.HasField("valid_until"):
        return ""
    if memory.invalidated:
        how = "[invalidated]"
    elif memory.superseded_by_id:
        how = f"[superseded by {memory.superseded_by_id}]"
    else:
        how = "[ended]"
    return f"  {how}  {validity_text(memory)}"


def validity_text(memory: m.Memory) -> str:
    """When the memory's claim held: ``valid from T`` and, once it ended, ``until T``."""
    until = f" until {_utc(memory.valid_until)}" if memory.HasField("valid_until") else ""
    return f"valid from {_utc(memory.valid_from)}{until}"


def time_window_text(tw: g.TimeWindow) -> str:
    """The time words a recall read: what they say, the window, and what was done with it."""
    start = _utc(tw.start) if tw.HasField("start") else "any time"
    end = _utc(tw.end) if tw.HasField("end") else "any time"
    how = "in each arm, those said then first" if tw.applied else "not used: --after/--before given"
    return f"time: read {shown(tw.words)} as said from {start} to before {end} ({how})"


def _utc(ts) -> str:
    return ts.ToDatetime(tzinfo=datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _titled(title: str) -> str:
    """``Title: `` before a body, or nothing for an untitled memory."""
    return f"{shown(title)}: " if title else ""


def recall_text(resp: g.RecallResponse) -> str:
    """A Recall answer for people: one summary line, then each item with its ranks and scores."""
    lines = [
        f"mode={name_of(m.RecallMode, resp.mode)} dense_available={str(resp.dense_available).lower()} "
        f"reranked={str(resp.reranked).lower()} passed={resp.counts.fused} returned={resp.counts.returned}"
    ]
    if resp.HasField("time_window"):
        lines.append(time_window_text(resp.time_window))
    for it in resp.items:
        # A score of an arm that did not rank the memory (or did not run) is "-", never a 0.000 that
        # reads as a measured one.
        cosine = f"{it.cosine:.3f}" if it.dense_rank else "-"
        rerank = f"{it.rerank_score:.3f}" if resp.reranked else "-"
        lines.append(
            f"{it.rank:>3}. lexical_rank={it.lexical_rank or '-'} dense_rank={it.dense_rank or '-'} "
            f"cosine={cosine} fused={it.fused_score:.5f} rerank={rerank}  "
            f"{it.memory.id}{_ended(it.memory)}{_said(it.memory)}  "
            f"by {person(it.memory.created_by, it.memory.created_by_name)}\n"
            f"     {_titled(it.memory.title)}{shown(it.memory.body[:160])}"
        )
    return "\n".join(lines)


def remember_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron remember``."""
    rm = sub.add_parser("remember", help="store a memory")
    rm.add_argument("--kind", default="note", choices=choices.KINDS)
    rm.add_argument("--title", default="")
    rm.add_argument(
        "--audience",
        default="workspace",
        choices=choices.AUDIENCES,
        help="workspace (the default: every member reads it) or member (you alone)",
    )
    rm.add_argument("--confidence", type=float)
    rm.add_argument("--request-id", default="")
    rm.add_argument(
        "--about",
        action="append",
        default=[],
        help="entity name to mention: the entity of that name you can see, else a new one (repeatable)",
    )
    rm.add_argument("--about-id", action="append", default=[], help="existing entity id to mention (repeatable)")
    rm.add_argument(
        "--occurred-at",
        type=options.instant,
        metavar="T",
        help="when what it tells happened: an ISO 8601 date or date-time, UTC unless it names an offset "
        "(--after/--before and time words judge by it; unset, by when it is written)",
    )
    statement_options(rm)
    options.valid_from_option(rm)
    rm.add_argument("body")
    options.gateway_options(rm)
    rm.set_defaults(handler=remember)


@command.gateway_command
def remember(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Remember: prints the stored memory, or its protobuf JSON."""
    resp = gw.memory.Remember(
        g.RememberRequest(
            purpose=choices.PURPOSES[args.purpose],
            kind=choices.KINDS[args.kind],
            title=args.title,
            body=args.body,
            audience=choices.AUDIENCES[args.audience],
            confidence=args.confidence,
            request_id=args.request_id,
            entities=mentions(args.about, args.about_id),
            occurred_at=args.occurred_at,
            valid_from=args.valid_from,
            **_statements(args),
        ),
        metadata=gw.metadata,
    )
    command.emit(resp, args.json, describe(resp.memory))
    return 0


def derive_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron derive``."""
    dv = sub.add_parser("derive", help="derive a memory from readable sources")
    dv.add_argument("--source", action="append", required=True, help="source memory id (repeatable)")
    dv.add_argument("--kind", default="summary", choices=choices.KINDS)
    dv.add_argument("--title", default="")
    dv.add_argument("--request-id", default="")
    dv.add_argument(
        "--about",
        action="append",
        default=[],
        help="entity name to mention: the entity of that name you can see, else a new one (repeatable)",
    )
    statement_options(dv)
    options.valid_from_option(dv, default="the time of writing")
    dv.add_argument("body")
    options.gateway_options(dv)
    dv.set_defaults(handler=derive)


@command.gateway_command
def derive(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Derive: prints the derived memory, or its protobuf JSON."""
    resp = gw.memory.Derive(
        g.DeriveRequest(
            source_ids=args.source,
            kind=choices.KINDS[args.kind],
            title=args.title,
            body=args.body,
            request_id=args.request_id,
            entities=mentions(args.about, []),
            valid_from=args.valid_from,
            **_statements(args),
        ),
        metadata=gw.metadata,
    )
    command.emit(resp, args.json, describe(resp.memory))
    return 0


def correct_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron correct``."""
    co = sub.add_parser("correct", help="fix a memory in place under its current revision")
    co.add_argument("id")
    co.add_argument("--revision", type=int, required=True, help="the revision you read")
    co.add_argument("--title")
    co.add_argument("--confidence", type=float)
    options.valid_from_option(co, "a new start of validity", default="the current start")
    # Required, so that options may follow it (an optional positional would be taken before them).
    co.add_argument("body", help='the new body, or "" to keep it (with --title, --confidence or --valid-from)')
    options.gateway_options(co)
    co.set_defaults(handler=correct)


@command.gateway_command
def correct(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Correct under --revision: prints the corrected memory (ABORTED naming the current revision when stale)."""
    resp = gw.memory.Correct(
        g.CorrectRequest(
            id=args.id,
            expected_revision=args.revision,
            title=args.title,
            body=args.body or None,
            confidence=args.confidence,
            valid_from=args.valid_from,
        ),
        metadata=gw.metadata,
    )
    command.emit(resp, args.json, describe(resp.memory))
    return 0


def supersede_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron supersede``."""
    su = sub.add_parser("supersede", help="replace a memory by a new one")
    su.add_argument("id")
    su.add_argument("--revision", type=int, required=True)
    su.add_argument("--kind", choices=choices.KINDS, help="default: keep the superseded memory's kind")
    su.add_argument("--title", default="", help="default: keep the superseded memory's title")
    su.add_argument("--confidence", type=float, help="the new claim's confidence, 0..1 (default 1)")
    su.add_argument("--audience", choices=choices.AUDIENCES, help="may narrow to member; default: keep")
    su.add_argument("--request-id", default="")
    su.add_argument("--about", action="append", default=[], help="entity name the new memory is about (repeatable)")
    statement_options(su)
    options.valid_from_option(
        su, "when the new claim became true (the old one holds until then)", default="the time of writing"
    )
    su.add_argument("body")
    options.gateway_options(su)
    su.set_defaults(handler=supersede)


@command.gateway_command
def supersede(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Supersede under --revision: prints the new memory, or its protobuf JSON."""
    resp = gw.memory.Supersede(
        g.SupersedeRequest(
            id=args.id,
            expected_revision=args.revision,
            kind=choices.KINDS.get(args.kind, 0),  # unset: the store keeps the target's kind
            title=args.title,  # empty: the store keeps the target's title
            body=args.body,
            audience=choices.AUDIENCES.get(args.audience, 0),
            request_id=args.request_id,
            valid_from=args.valid_from,
            entities=mentions(args.about, []),
            confidence=args.confidence,
            **_statements(args),
        ),
        metadata=gw.metadata,
    )
    flagged = f"\nconflict flagged for review: {resp.conflict_flag_id}" if resp.conflict_flag_id else ""
    command.emit(resp, args.json, describe(resp.memory) + flagged)
    return 0


def invalidate_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron invalidate``."""
    iv = sub.add_parser("invalidate", help="end a claim that no longer holds, without a successor")
    iv.add_argument("id")
    iv.add_argument("--revision", type=int, required=True, help="the revision you read")
    iv.add_argument("--reason", required=True, help="why it no longer holds")
    iv.add_argument("--at", type=options.instant, metavar="T", help="when it stopped holding (default: now)")
    options.gateway_options(iv)
    iv.set_defaults(handler=invalidate)


@command.gateway_command
def invalidate(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Invalidate under --revision: prints the memory, its validity now ended."""
    resp = gw.memory.Invalidate(
        g.InvalidateRequest(id=args.id, expected_revision=args.revision, reason=args.reason, at=args.at),
        metadata=gw.metadata,
    )
    command.emit(resp, args.json, describe(resp.memory))
    return 0


def forget_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron forget``."""
    fg = sub.add_parser("forget", help="forget a memory and everything derived from it")
    fg.add_argument("id")
    fg.add_argument("--reason", required=True)
    fg.add_argument(
        "--revision", type=options.int64, default=0, help="the revision you read: refused (ABORTED) if it changed since"
    )
    options.gateway_options(fg)
    fg.set_defaults(handler=forget)


@command.gateway_command
def forget(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Forget: prints the ids forgotten (the memory and everything derived from it)."""
    resp = gw.memory.Forget(
        g.ForgetRequest(id=args.id, reason=args.reason, expected_revision=args.revision), metadata=gw.metadata
    )
    command.emit(resp, args.json, "forgot " + ", ".join(resp.forgotten_ids))
    return 0


def read_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron read``."""
    rd = sub.add_parser("read", help="read one memory")
    rd.add_argument("id")
    rd.add_argument("--history", action="store_true")
    options.gateway_options(rd)
    rd.set_defaults(handler=read)


@command.gateway_command
def read(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Read (with --history, earlier revisions too): prints the memory, or its protobuf JSON."""
    resp = gw.memory.Read(g.ReadRequest(id=args.id, include_history=args.history), metadata=gw.metadata)
    command.emit(resp, args.json, describe(resp.memory))
    return 0


def about_ids(gw: client.Gateway, about: list[str]) -> list[str]:
    """The entity ids ``--about`` names: an id as it is, a name as every entity of that name (or
    alias) the caller can see (FindEntities); SystemExit naming a name none has."""
    out = []
    for given in about:
        try:
            out.append(str(uuid.UUID(given)))
            continue
        except ValueError:
            pass
        found = gw.memory.FindEntities(g.FindEntitiesRequest(name=given), metadata=gw.metadata).entities
        if not found:
            raise SystemExit(f"NOT_FOUND: no entity named {shown(given)} that you can see (recallatron entities NAME)")
        out += [e.id for e in found]
    return out


def recall_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron recall``."""
    rc = sub.add_parser("recall", help="recall memories for a question")
    rc.add_argument("question")
    rc.add_argument("--mode", choices=choices.MODES)
    rc.add_argument("--top-k", type=options.int32, default=limits.DEFAULT_TOP_K)
    rc.add_argument("--no-rerank", action="store_true")
    rc.add_argument("--about-id", action="append", default=[], help="only memories about this entity id")
    rc.add_argument(
        "--about",
        action="append",
        default=[],
        metavar="NAME|ID",
        help="only memories about this entity or its aliases: an id, or a name (every entity of it you can see)",
    )
    rc.add_argument("--history", action="store_true", help="include superseded memories (keyword arm only)")
    options.window_options(rc)
    rc.add_argument(
        "--reference-time",
        type=options.instant,
        metavar="T",
        help="what the question's time words are read against ('last month'); default now",
    )
    rc.add_argument("--no-time-words", action="store_true", help="read no time in the question's words")
    options.gateway_options(rc)
    rc.set_defaults(handler=recall)


@command.gateway_command
def recall(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Recall: prints the summary line and the items, or the protobuf JSON."""
    resp = gw.memory.Recall(
        g.RecallRequest(
            query=args.question,
            purpose=choices.PURPOSES[args.purpose],
            mode=choices.MODES.get(args.mode, 0),
            top_k=args.top_k,
            skip_rerank=args.no_rerank,
            entity_ids=args.about_id + about_ids(gw, args.about),
            include_superseded=args.history,
            reference_time=args.reference_time,
            skip_time_words=args.no_time_words,
            **options.in_time(args),
        ),
        metadata=gw.metadata,
    )
    command.emit(resp, args.json, recall_text(resp))
    return 0


def list_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron list``."""
    ls = sub.add_parser("list", help="browse the memories you can read, newest first")
    ls.add_argument("--kind", choices=choices.KINDS)
    ls.add_argument("--audience", choices=choices.AUDIENCES, help="workspace, or member (your own member-only ones)")
    ls.add_argument("--purpose", choices=choices.PURPOSES, help="one purpose (default: every purpose granted)")
    ls.add_argument("--about-id", default="", help="only memories about this entity id")
    ls.add_argument("--derived-from", default="", help="only memories derived directly from this memory id")
    ls.add_argument(
        "--created-after", type=options.instant, help="created at or after this time (ISO 8601, UTC by default)"
    )
    ls.add_argument("--created-before", type=options.instant, help="created before this time")
    ls.add_argument("--updated-after", type=options.instant, help="last changed at or after this time")
    ls.add_argument("--updated-before", type=options.instant, help="last changed before this time")
    options.window_options(ls)
    ls.add_argument(
        "--superseded",
        choices=choices.SUPERSEDED,
        help="current (the default), superseded (or invalidated), or all; with --as-of or --known-at the "
        "default is what held or was known then",
    )
    ls.add_argument("--history", action="store_true", help="with earlier revisions")
    ls.add_argument("--page-size", type=options.int32, default=0, help="memories per page (default 50, at most 200)")
    ls.add_argument("--page-token", default="", help="the token a previous page printed")
    ls.add_argument("--all", action="store_true", help="follow the pages to the end")
    options.gateway_options(ls, purpose=False)
    ls.set_defaults(handler=list_memories)


def list_request(args: argparse.Namespace) -> g.ListMemoriesRequest:
    """The ListMemoriesRequest of ``recallatron list``'s filters (unset ones left unset)."""
    return g.ListMemoriesRequest(
        kind=choices.KINDS.get(args.kind, 0),
        audience=choices.AUDIENCES.get(args.audience, 0),
        purpose=choices.PURPOSES.get(args.purpose, 0),
        entity_id=args.about_id,
        derived_from_id=args.derived_from,
        created_after=args.created_after,
        created_before=args.created_before,
        updated_after=args.updated_after,
        updated_before=args.updated_before,
        superseded=choices.SUPERSEDED.get(args.superseded, 0),
        include_history=args.history,
        page_size=args.page_size,
        page_token=args.page_token,
        **options.in_time(args),
    )


def list_text(resp: g.ListMemoriesResponse) -> str:
    """A page for people: each memory as ``describe`` shows it, then the count and the next page's token."""
    lines = [describe(mem) for mem in resp.memories] or ["no memories"]
    lines.append(f"{len(resp.memories)} shown of {resp.total_size}")
    if resp.next_page_token:
        lines.append(f"next page: --page-token {resp.next_page_token}")
    return "\n".join(lines)


@command.gateway_command
def list_memories(gw: client.Gateway, args: argparse.Namespace) -> int:
    """ListMemories: prints the page (with --all every page, as one response) and the next page's token."""
    req = list_request(args)
    resp = gw.memory.ListMemories(req, metadata=gw.metadata)
    while args.all and resp.next_page_token:
        req.page_token = resp.next_page_token
        more = gw.memory.ListMemories(req, metadata=gw.metadata)
        resp.memories.extend(more.memories)
        resp.next_page_token, resp.total_size = more.next_page_token, more.total_size
    command.emit(resp, args.json, list_text(resp))
    return 0


PARSERS = (
    remember_parser,
    derive_parser,
    correct_parser,
    supersede_parser,
    invalidate_parser,
    forget_parser,
    read_parser,
    recall_parser,
    list_parser,
)
