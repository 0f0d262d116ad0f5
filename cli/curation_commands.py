"""Curation commands: ``recallatron duplicates [decide]`` and ``recallatron flags [resolve]`` (issue 9).

- ``duplicates``: the caller's duplicate proposals for ``--purpose`` (ListDuplicateProposals), a
  page at a time; each shows the cosine and both memory ids, then the two memories.
- ``duplicates decide A_ID B_ID --keep-both | --supersede-with KEEP_ID [--revision N] | --forget ID``
  (DecideDuplicateProposal). ``--revision`` is the revision of the memory superseded as you read
  it; without it the command reads that memory first and uses its revision now, so a change made
  since you looked is not caught.
- ``flags``: the conflict flags whose two memories you can read (ListConflictFlags; ``--all`` adds
  resolved ones).
- ``flags resolve FLAG_ID --acknowledge | --undo [--revision N]`` (ResolveConflictFlag).
  ``--revision`` is the newer memory's revision as you read it; without it, undo uses the revision
  the flag shows now (the same caveat).

Options go after the subcommand's name (``recallatron duplicates decide A B --keep-both --json``).
"""

from __future__ import annotations

import argparse
import sys

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import command, options
from cli.memory_commands import describe
from client import choices
from servicekit.render import person
from servicekit.vocabulary import name_of


def _short(memory: m.Memory) -> str:
    """One memory in a proposal or flag: ``describe`` indented by two more spaces."""
    return "\n".join("  " + line for line in describe(memory).splitlines())


def _usage(message: str) -> int:
    """A usage error found after parsing: the message on stderr, exit status 2 (as argparse's)."""
    print(f"usage error: {message}", file=sys.stderr)
    return 2


def _page_lines(shown: int, total: int, token: str) -> list[str]:
    lines = [f"{shown} shown of {total}"]
    if token:
        lines.append(f"next page: --page-token {token}")
    return lines


def duplicates_text(resp: g.ListDuplicateProposalsResponse) -> str:
    """A page of proposals for people: ``cosine A_ID B_ID`` and both memories per proposal, then the
    counts, the window and what it lacked, and the next page's token."""
    lines = []
    for p in resp.proposals:
        lines.append(f"cosine {p.cosine:.4f}  {p.memory_a.id}  {p.memory_b.id}")
        lines += [_short(p.memory_a), _short(p.memory_b)]
    if not resp.proposals:
        lines.append("no duplicate proposals")
    lines += _page_lines(len(resp.proposals), resp.total_size, resp.next_page_token)
    lines.append(
        f"compared the {resp.memories_considered} newest memories you can read; "
        f"{resp.memories_without_vectors} without a vector yet"
    )
    if not resp.dense_available:
        lines.append("dense_available=false: no vectors to compare (embed service down or vectors not built yet)")
    return "\n".join(lines)


def duplicates_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron duplicates`` and ``recallatron duplicates decide``."""
    dp = sub.add_parser("duplicates", help="duplicate proposals: pairs of memories at cosine 0.80 or more")
    dp.add_argument("--page-size", type=options.int32, default=0, help="proposals per page (default 50, at most 200)")
    dp.add_argument("--page-token", default="", help="the token a previous page printed")
    options.gateway_options(dp)
    dp.set_defaults(handler=list_duplicates)
    actions = dp.add_subparsers(dest="action")
    de = actions.add_parser("decide", help="decide about a pair: keep both, supersede one by the other, or forget one")
    de.add_argument("a_id", metavar="A_ID")
    de.add_argument("b_id", metavar="B_ID")
    how = de.add_mutually_exclusive_group(required=True)
    how.add_argument("--keep-both", action="store_true", help="keep both; the pair is never proposed again")
    how.add_argument("--supersede-with", metavar="KEEP_ID", help="keep KEEP_ID; the other is superseded by it")
    how.add_argument("--forget", metavar="ID", help="forget ID (and everything derived from it)")
    de.add_argument(
        "--revision",
        type=options.int64,
        help="with --supersede-with: the revision of the memory superseded, as you read it",
    )
    de.add_argument("--reason", default="", help="with --forget: why")
    options.gateway_options(de, purpose=False)
    de.set_defaults(handler=decide)


@command.gateway_command
def list_duplicates(gw: client.Gateway, args: argparse.Namespace) -> int:
    """ListDuplicateProposals: prints the page, or its protobuf JSON."""
    resp = gw.memory.ListDuplicateProposals(
        g.ListDuplicateProposalsRequest(
            purpose=choices.PURPOSES[args.purpose], page_size=args.page_size, page_token=args.page_token
        ),
        metadata=gw.metadata,
    )
    command.emit(resp, args.json, duplicates_text(resp))
    return 0


@command.gateway_command
def decide(gw: client.Gateway, args: argparse.Namespace) -> int:
    """DecideDuplicateProposal: prints what was done, or the protobuf JSON."""
    if args.revision is not None and args.supersede_with is None:
        return _usage("--revision goes with --supersede-with")
    if args.reason and args.forget is None:
        return _usage("--reason goes with --forget")
    req = g.DecideDuplicateProposalRequest(memory_a_id=args.a_id, memory_b_id=args.b_id)
    if args.keep_both:
        req.decision = m.DUPLICATE_DECISION_KEEP_BOTH
    elif args.supersede_with is not None:
        req.decision, req.keep_id = m.DUPLICATE_DECISION_SUPERSEDE, args.supersede_with
        revision = args.revision
        if revision is None:
            # The other one of the pair is superseded; read its revision now (the server judges the ids).
            target = args.b_id if args.supersede_with == args.a_id else args.a_id
            revision = gw.memory.Read(g.ReadRequest(id=target), metadata=gw.metadata).memory.revision
        req.expected_revision = revision
    else:
        req.decision, req.forget_id, req.reason = m.DUPLICATE_DECISION_FORGET, args.forget, args.reason
    resp = gw.memory.DecideDuplicateProposal(req, metadata=gw.metadata)
    if resp.decision == m.DUPLICATE_DECISION_KEEP_BOTH:
        text = f"kept both {args.a_id} and {args.b_id}: the pair is not proposed again"
    elif resp.decision == m.DUPLICATE_DECISION_SUPERSEDE:
        text = f"{resp.superseded.id} superseded by {resp.kept.id}"
        if resp.conflict_flag_id:
            text += f"\nconflict flagged for review: {resp.conflict_flag_id} (both confidences 0.8 or more)"
    else:
        text = "forgot " + ", ".join(resp.forgotten_ids)
    command.emit(resp, args.json, text)
    return 0


def flag_text(flag: m.ConflictFlag) -> str:
    """A conflict flag for people: id, state and time, then the older and the newer memory."""
    when = flag.flagged_at.ToJsonString()
    head = f"{flag.id}  {name_of(m.ConflictFlagState, flag.state)}  flagged {when}"
    if flag.resolved_by:
        head += f"  resolved by {person(flag.resolved_by, flag.resolved_by_name)}"
    if flag.restored_memory_id:
        head += f"  restored as {flag.restored_memory_id}"
    return "\n".join([head, "  older:", _short(flag.older), "  newer:", _short(flag.newer)])


def flags_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron flags`` and ``recallatron flags resolve``."""
    fl = sub.add_parser("flags", help="conflict flags: a confident memory superseded by a confident one")
    fl.add_argument("--all", action="store_true", help="also acknowledged and undone flags")
    fl.add_argument("--page-size", type=options.int32, default=0, help="flags per page (default 50, at most 200)")
    fl.add_argument("--page-token", default="", help="the token a previous page printed")
    options.gateway_options(fl, purpose=False)
    fl.set_defaults(handler=list_flags)
    actions = fl.add_subparsers(dest="action")
    rs = actions.add_parser("resolve", help="acknowledge a flag, or undo its supersession")
    rs.add_argument("flag_id", metavar="FLAG_ID")
    how = rs.add_mutually_exclusive_group(required=True)
    how.add_argument("--acknowledge", action="store_true", help="let the supersession stand")
    how.add_argument("--undo", action="store_true", help="supersede the newer by a new memory with the older's text")
    rs.add_argument("--revision", type=options.int64, help="with --undo: the newer memory's revision, as you read it")
    options.gateway_options(rs, purpose=False)
    rs.set_defaults(handler=resolve)


@command.gateway_command
def list_flags(gw: client.Gateway, args: argparse.Namespace) -> int:
    """ListConflictFlags: prints the page, or its protobuf JSON."""
    resp = gw.memory.ListConflictFlags(
        g.ListConflictFlagsRequest(page_size=args.page_size, page_token=args.page_token, include_resolved=args.all),
        metadata=gw.metadata,
    )
    lines = [flag_text(f) for f in resp.flags] or ["no conflict flags"]
    command.emit(
        resp, args.json, "\n".join(lines + _page_lines(len(resp.flags), resp.total_size, resp.next_page_token))
    )
    return 0


def _shown_revision(gw: client.Gateway, flag_id: str) -> int:
    """The newer memory's revision as the flag shows it now; 0 when no open flag has that id (the
    server then answers for the id)."""
    token = ""
    while True:
        page = gw.memory.ListConflictFlags(
            g.ListConflictFlagsRequest(page_size=200, page_token=token), metadata=gw.metadata
        )
        for flag in page.flags:
            if flag.id == flag_id:
                return flag.newer.revision
        token = page.next_page_token
        if not token:
            return 0


@command.gateway_command
def resolve(gw: client.Gateway, args: argparse.Namespace) -> int:
    """ResolveConflictFlag: prints the flag as it is now (and the restored memory), or the protobuf JSON."""
    if args.revision is not None and not args.undo:
        return _usage("--revision goes with --undo")
    req = g.ResolveConflictFlagRequest(flag_id=args.flag_id)
    if args.acknowledge:
        req.resolution = m.CONFLICT_RESOLUTION_ACKNOWLEDGE
    else:
        req.resolution = m.CONFLICT_RESOLUTION_UNDO
        req.expected_revision = args.revision if args.revision is not None else _shown_revision(gw, args.flag_id)
        if req.expected_revision == 0:
            req.expected_revision = 1  # no open flag with that id: let the server say what the id is
    resp = gw.memory.ResolveConflictFlag(req, metadata=gw.metadata)
    text = flag_text(resp.flag)
    if resp.HasField("restored"):
        text += "\nrestored:\n" + _short(resp.restored)
    command.emit(resp, args.json, text)
    return 0


PARSERS = (duplicates_parser, flags_parser)
