"""Entity commands (docs/entities.md): look up, merge, undo a merge, and review duplicates.

- ``entities NAME``: the entities of that name or alias you can see (FindEntities), each with its
  aliases, readable mentions and standing merges.
- ``entities merge B_ID --into A_ID [--reason R]`` (MergeEntity), ``entities unmerge B_ID``
  (UnmergeEntity).
- ``entities duplicates``: pairs proposed for review, best first (ListEntityDuplicates), each with
  the command that would merge it. Nothing merges by itself.
- ``entity NAME|ID [--as-of T] [--known-at T]``: the entity page (GetEntity): names and aliases, the
  attributes and relations current memories state (or those valid at T), each with its memory, and
  the timeline of memories about it, a page at a time.

An entity literally named "merge", "unmerge" or "duplicates" is looked up with ``--name``.
"""

from __future__ import annotations

import argparse
import sys

from recallatron.gateway.v1 import gateway_pb2 as g

import client
from cli import command, options
from cli.memory_commands import describe
from servicekit.render import for_terminal as shown
from servicekit.render import minute_utc, person
from servicekit.vocabulary import ENTITY_DUPLICATE_REASONS

ACTIONS = ("merge", "unmerge", "duplicates")


def entities_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron entities``."""
    en = sub.add_parser(
        "entities",
        help="look entities up by name; merge, unmerge, and review duplicates",
        description="entities NAME | entities merge B_ID --into A_ID [--reason R] | entities unmerge B_ID | "
        "entities duplicates",
    )
    en.add_argument("words", nargs="*", metavar="NAME | merge B_ID | unmerge B_ID | duplicates")
    en.add_argument("--name", help="look up this name (for an entity named like an action)")
    en.add_argument("--into", metavar="A_ID", help="merge: the entity to merge into")
    en.add_argument("--reason", default="", help="merge: why (recorded with the merge)")
    en.add_argument("--page-size", type=options.int32, default=0, help="duplicates per page (default 50, at most 200)")
    en.add_argument("--page-token", default="", help="duplicates: the token a previous page printed")
    options.gateway_options(en)
    en.set_defaults(handler=entities)


def _usage(message: str) -> int:
    print(f"usage error: {message}", file=sys.stderr)
    return 2


def entities(args: argparse.Namespace, settings) -> int:
    """Dispatches on the first word (module docstring); usage errors exit 2 before any call."""
    words = args.words
    if args.name is not None:
        if words:
            return _usage("give either --name or a name, not both")
        return find(args, settings)
    if not words:
        return _usage("give a name, or merge B_ID --into A_ID, unmerge B_ID, or duplicates")
    action = words[0]
    if action == "merge":
        if len(words) != 2 or not args.into:
            return _usage("entities merge B_ID --into A_ID [--reason R]")
        return merge(args, settings)
    if action == "unmerge":
        if len(words) != 2:
            return _usage("entities unmerge B_ID")
        return unmerge(args, settings)
    if action == "duplicates":
        if len(words) != 1:
            return _usage("entities duplicates takes no name")
        return duplicates(args, settings)
    args.name = " ".join(words)
    return find(args, settings)


def _entity_lines(e: g.Entity) -> list[str]:
    """``ID  NAME`` (as FindEntities always printed it), then its aliases, mentions and merges."""
    lines = [f"{e.id}  {shown(e.name)}"]
    if e.aliases:
        lines.append("    also known as " + ", ".join(shown(a) for a in e.aliases))
    lines.append(f"    {e.mentions} memor{'y' if e.mentions == 1 else 'ies'} about it you can read")
    for merge_ in e.merges:
        why = f": {shown(merge_.reason)}" if merge_.reason else ""
        who = person(merge_.merged_by, merge_.merged_by_name)
        lines.append(f"    merged {merge_.entity_id} by {who} at {minute_utc(merge_.merged_at)}{why}")
    return lines


@command.gateway_command
def find(gw: client.Gateway, args: argparse.Namespace) -> int:
    """FindEntities: each entity's lines, or ``no entities``."""
    resp = gw.memory.FindEntities(g.FindEntitiesRequest(name=args.name), metadata=gw.metadata)
    command.emit(resp, args.json, "\n".join(x for e in resp.entities for x in _entity_lines(e)) or "no entities")
    return 0


@command.gateway_command
def merge(gw: client.Gateway, args: argparse.Namespace) -> int:
    """MergeEntity: ``merged B into A``."""
    req = g.MergeEntityRequest(entity_id=args.words[1], into_id=args.into, reason=args.reason)
    resp = gw.memory.MergeEntity(req, metadata=gw.metadata)
    command.emit(
        resp,
        args.json,
        f"merged {resp.merge.entity_id} into {resp.merge.into_id}\n"
        f"undo: recallatron entities unmerge {resp.merge.entity_id}",
    )
    return 0


@command.gateway_command
def unmerge(gw: client.Gateway, args: argparse.Namespace) -> int:
    """UnmergeEntity: ``unmerged B from A``."""
    resp = gw.memory.UnmergeEntity(g.UnmergeEntityRequest(entity_id=args.words[1]), metadata=gw.metadata)
    command.emit(resp, args.json, f"unmerged {resp.merge.entity_id} from {resp.merge.into_id}")
    return 0


@command.gateway_command
def duplicates(gw: client.Gateway, args: argparse.Namespace) -> int:
    """ListEntityDuplicates: per proposal its score and reason, both entities, and the merge command."""
    req = g.ListEntityDuplicatesRequest(page_size=args.page_size, page_token=args.page_token)
    resp = gw.memory.ListEntityDuplicates(req, metadata=gw.metadata)
    lines = []
    for p in resp.proposals:
        lines.append(f"{p.score:.2f}  {ENTITY_DUPLICATE_REASONS.get(p.reason, 'proposed')}")
        lines += ["  " + x for x in _entity_lines(p.entity_a)]
        lines += ["  " + x for x in _entity_lines(p.entity_b)]
        lines.append(f"  merge: recallatron entities merge {p.entity_b.id} --into {p.entity_a.id}")
    if not resp.proposals:
        lines.append("no entity duplicate proposals")
    lines.append(f"{len(resp.proposals)} shown of {resp.total_size}")
    if resp.next_page_token:
        lines.append(f"next page: --page-token {resp.next_page_token}")
    command.emit(resp, args.json, "\n".join(lines))
    return 0


def entity_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron entity``."""
    en = sub.add_parser("entity", help="an entity page: aliases, attributes, relations and timeline")
    en.add_argument("entity", metavar="NAME|ID")
    en.add_argument("--as-of", type=options.instant, metavar="T", help="attributes and relations that held at T")
    en.add_argument("--known-at", type=options.instant, metavar="T", help="as they were known at T")
    en.add_argument("--page-size", type=options.int32, default=0, help="timeline memories per page (default 20)")
    en.add_argument("--page-token", default="", help="the token a previous page printed")
    options.gateway_options(en)
    en.set_defaults(handler=entity)


def _source(claim) -> str:
    """Where a claim comes from: its memory, its author, and since when it holds."""
    who = person(claim.created_by, claim.created_by_name)
    return f"(memory {claim.memory_id}, by {who}, valid from {minute_utc(claim.valid_from)})"


def page_text(resp: g.GetEntityResponse, as_of=None) -> str:
    """An entity page for people: the entity's lines, its attributes and relations each with the
    memory that states it, then the timeline's memories and the next page's token."""
    lines = _entity_lines(resp.entity)
    if resp.other_entity_ids:
        lines.append("    also of that name: " + ", ".join(resp.other_entity_ids))
    if as_of is not None:
        lines.append(f"as of {minute_utc(as_of)}: the attributes and relations of the memories valid then")
    lines.append("attributes:" if resp.attributes else "attributes: none")
    lines += [f"  {a.key} = {shown(a.value)}  {_source(a)}" for a in resp.attributes]
    relations = [(r, "") for r in resp.relations_out] + [(r, "<- ") for r in resp.relations_in]
    lines.append("relations:" if relations else "relations: none")
    lines += [f"  {way}{r.predicate} {shown(r.entity_name)} ({r.entity_id})  {_source(r)}" for r, way in relations]
    if resp.claims_left_out:
        lines.append(f"  ({resp.claims_left_out} older claims left out; their memories are on the timeline)")
    for x in resp.undone_merges:
        why = f": {shown(x.reason)}" if x.reason else ""
        lines.append(
            f"    undone: {x.entity_id} merged into {x.into_id} by {person(x.merged_by, x.merged_by_name)}, "
            f"undone by {person(x.undone_by, x.undone_by_name)} at {minute_utc(x.undone_at)}{why}"
        )
    lines.append(f"timeline: {len(resp.timeline)} shown of {resp.timeline_size}, the latest said first")
    lines += ["  " + line for mem in resp.timeline for line in describe(mem).splitlines()]
    if resp.next_page_token:
        lines.append(f"next page: --page-token {resp.next_page_token}")
    return "\n".join(lines)


@command.gateway_command
def entity(gw: client.Gateway, args: argparse.Namespace) -> int:
    """GetEntity: the page (``page_text``), or its protobuf JSON."""
    req = g.GetEntityRequest(
        entity=args.entity,
        as_of=args.as_of,
        known_at=args.known_at,
        page_size=args.page_size,
        page_token=args.page_token,
    )
    resp = gw.memory.GetEntity(req, metadata=gw.metadata)
    command.emit(resp, args.json, page_text(resp, args.as_of))
    return 0


entities.quiet_logs = True  # it dispatches to gateway commands only

PARSERS = (entities_parser, entity_parser)
