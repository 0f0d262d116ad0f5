"""``recallatron capture``: store what a conversation turn states explicitly (gateway Capture).

The turn is given as it was said; each proposed memory names the span of the turn that states it.
One proposal comes from the flags (``--span``, with ``--body`` defaulting to the span), several from
``--proposals FILE``: JSON Lines, each line one ``recallatron.memory.v1.CaptureProposal`` in protobuf
JSON (``span``, ``body``, ``title``, ``kind``, ``audience``, ``confidence``, ``entities``), the
command's ``--audience`` for a line that names none and the span for a line without a body. The store
judges each proposal (stored, or skipped with its reason: a skip is an answer, not an error, so the
exit status is 0); a malformed request fails whole, its status code and message on stderr (exit
status 1).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from google.protobuf import json_format
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import command, dataset, options
from cli.memory_commands import describe, mentions
from client import choices
from servicekit.render import for_terminal as shown
from servicekit.vocabulary import name_of

# The flags that describe the one proposal of --span; --proposals lines carry their own.
PROPOSAL_FLAGS = {"body": "--body", "title": "--title", "kind": "--kind", "confidence": "--confidence"}
PROPOSAL_LISTS = {"about": "--about", "about_id": "--about-id"}


def capture_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron capture``."""
    cp = sub.add_parser(
        "capture",
        help="store what a conversation turn states, each memory with the words of the turn that state it",
        description="A proposal is stored only when its span occurs in the turn (case, spacing and Unicode "
        "forms aside), its body is not blank and you cannot already read a memory with the same body; "
        "otherwise it is skipped with the reason (exit status 0). When one is stored, the whole turn goes "
        "to your own history (chat capture).",
    )
    cp.add_argument("turn", help="the conversation turn, as it was said")
    cp.add_argument("--span", help="the words of the turn that state the memory (one proposal)")
    cp.add_argument("--body", help="the memory as it will be stored (default: the span)")
    cp.add_argument("--title")
    cp.add_argument("--kind", choices=choices.KINDS, help="default: note")
    cp.add_argument(
        "--audience",
        default="workspace",
        choices=choices.AUDIENCES,
        help="workspace (the default: every member reads it) or member (you alone); with --proposals, for "
        "each line that names none",
    )
    cp.add_argument("--confidence", type=float, help="0..1 (default 1)")
    cp.add_argument("--about", action="append", default=[], help="entity name the memory is about (repeatable)")
    cp.add_argument("--about-id", action="append", default=[], help="existing entity id (repeatable)")
    cp.add_argument(
        "--proposals",
        type=Path,
        metavar="FILE",
        help="several proposals: JSON Lines, each a CaptureProposal in protobuf JSON, e.g. "
        '{"span": "my sister Ana moved to Porto", "body": "Ana lives in Porto.", "kind": "KIND_FACT", '
        '"entities": [{"name": "Ana"}]}',
    )
    cp.add_argument("--request-id", default="", help="makes a retry answer with the first outcomes, writing nothing")
    options.gateway_options(cp)
    cp.set_defaults(handler=capture, parser=cp)


def proposals(args: argparse.Namespace) -> list[m.CaptureProposal]:
    """The proposals the command line gives: --span's one, or --proposals' lines. A usage error (exit
    2) for neither, both, or a --span flag without --span; SystemExit naming the file and line for a
    line that is not a CaptureProposal, before anything is sent."""
    parser: argparse.ArgumentParser = args.parser
    given = ["--span"] if args.span is not None else []
    given += [flag for name, flag in PROPOSAL_FLAGS.items() if getattr(args, name) is not None]
    given += [flag for name, flag in PROPOSAL_LISTS.items() if getattr(args, name)]
    if args.proposals is not None:
        if given:
            parser.error(f"{', '.join(given)}: with --proposals, each line carries its own proposal")
        return _from_file(args.proposals, choices.AUDIENCES[args.audience])
    if args.span is None:
        parser.error("give --span (the words of the turn that state the memory) or --proposals FILE")
    return [
        m.CaptureProposal(
            span=args.span,
            body=args.span if args.body is None else args.body,
            title=args.title or "",
            kind=choices.KINDS.get(args.kind, 0),
            audience=choices.AUDIENCES[args.audience],
            confidence=args.confidence,
            entities=mentions(args.about, args.about_id),
        )
    ]


def _from_file(path: Path, audience: int) -> list[m.CaptureProposal]:
    """The proposals of a JSON Lines file, ``audience`` where a line names none."""
    out = []
    for n, row in dataset.read_jsonl_lines(path):
        if not isinstance(row, dict):
            raise SystemExit(f"{path}:{n}: not a JSON object (one CaptureProposal a line)")
        try:
            proposal = json_format.ParseDict(row, m.CaptureProposal())
        except json_format.ParseError as exc:  # its message names the field, and the fields there are
            raise SystemExit(f"{path}:{n}: not a CaptureProposal: {' '.join(str(exc).split())}") from None
        if proposal.audience == m.AUDIENCE_UNSPECIFIED:
            proposal.audience = audience
        if "body" not in row:  # as --body: the span itself, unless the line gives another body
            proposal.body = proposal.span
        out.append(proposal)
    if not out:
        raise SystemExit(f"{path}: no proposals")
    return out


def capture_text(resp: g.CaptureResponse) -> str:
    """A Capture answer for people: one line per proposal (stored, with the memory, or skipped and
    why), numbered as the request's ``proposals[i]`` (which the server's errors name), then the count."""
    lines = ["replayed: the first answer to this request id; nothing written"] if resp.replayed else []
    stored = 0
    for i, result in enumerate(resp.results):
        if result.HasField("memory"):
            stored += 1
            lines.append(f"proposal {i}: stored\n{describe(result.memory)}")
        else:
            skip = result.skipped
            known = f" (memory {skip.known_memory_id})" if skip.known_memory_id else ""
            reason = name_of(m.CaptureSkipReason, skip.reason)
            lines.append(f"proposal {i}: skipped, {reason}: {shown(skip.message)}{known}")
    lines.append(f"{stored} stored, {len(resp.results) - stored} skipped")
    return "\n".join(lines)


@command.gateway_command
def capture(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Capture: prints each proposal's outcome, or the protobuf JSON."""
    resp = gw.memory.Capture(
        g.CaptureRequest(
            purpose=choices.PURPOSES[args.purpose],
            turn=args.turn,
            proposals=proposals(args),
            request_id=args.request_id,
        ),
        metadata=gw.metadata,
    )
    command.emit(resp, args.json, capture_text(resp))
    return 0
