"""The member's commands of the expiry gate (store_service/access/expiry.py): ``recallatron expiring`` lists
the memories the gate hides from recall, ``recallatron keep`` brings one back (forgetting one is
``recallatron forget``).

Each has a parser function (``*_parser(sub)``, which also names its handler) and a handler taking
the gateway and the parsed arguments; ``command.gateway_command`` connects with the member token and
turns a failed call into its status code on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import datetime

from google.protobuf import timestamp_pb2
from recallatron.gateway.v1 import gateway_pb2 as g

import client
from cli import command, options
from cli.memory_commands import describe
from client import choices


def _when(ts: timestamp_pb2.Timestamp) -> str:
    return ts.ToDatetime(tzinfo=datetime.UTC).isoformat(timespec="seconds")


def expiring_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron expiring``."""
    ex = sub.add_parser(
        "expiring", help="the memories you can read that the expiry gate hides from recall, oldest updated first"
    )
    ex.add_argument("--purpose", choices=choices.PURPOSES, help="one purpose (default: every purpose granted)")
    ex.add_argument("--superseded", choices=choices.SUPERSEDED, default="current", help="default: current only")
    ex.add_argument("--page-size", type=options.int32, default=0, help="memories per page (default 50, at most 200)")
    ex.add_argument("--page-token", default="", help="the token a previous page printed")
    options.gateway_options(ex, purpose=False)
    ex.set_defaults(handler=expiring)


def expiring_text(resp: g.ListExpiringMemoriesResponse) -> str:
    """A page for people: the gate, each memory as ``describe`` shows it with its last update, the
    count, and the next page's token."""
    if not resp.expiry_days:
        return "the expiry gate is off: recall hides nothing"
    lines = [f"expiry gate: {resp.expiry_days} days; hidden from recall: not updated since {_when(resp.hidden_before)}"]
    for mem in resp.memories:
        lines.append(f"{describe(mem)}\n  last updated {_when(mem.updated_at)}")
    lines.append(f"{len(resp.memories)} shown of {resp.total_size} hidden")
    if resp.next_page_token:
        lines.append(f"next page: --page-token {resp.next_page_token}")
    # Each command as it runs, placeholders aside (tests/test_expiry.py runs them): forget needs a reason.
    lines.append(
        "keep one with `recallatron keep ID --revision N` (N: the revision shown), "
        "or forget it with `recallatron forget ID --reason WHY`"
    )
    return "\n".join(lines)


@command.gateway_command
def expiring(gw: client.Gateway, args: argparse.Namespace) -> int:
    """ListExpiringMemories: prints one page and the next page's token."""
    resp = gw.memory.ListExpiringMemories(
        g.ListExpiringMemoriesRequest(
            purpose=choices.PURPOSES.get(args.purpose, 0),
            superseded=choices.SUPERSEDED[args.superseded],
            page_size=args.page_size,
            page_token=args.page_token,
        ),
        metadata=gw.metadata,
    )
    command.emit(resp, args.json, expiring_text(resp))
    return 0


def keep_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron keep``."""
    kp = sub.add_parser("keep", help="keep a memory the expiry gate hides: counts as an update, back in recall")
    kp.add_argument("id")
    kp.add_argument("--revision", type=options.int64, required=True, help="the revision you read")
    options.gateway_options(kp, purpose=False)
    kp.set_defaults(handler=keep)


@command.gateway_command
def keep(gw: client.Gateway, args: argparse.Namespace) -> int:
    """KeepMemory under --revision: prints the kept memory (ABORTED naming the current revision when stale)."""
    resp = gw.memory.KeepMemory(g.KeepMemoryRequest(id=args.id, expected_revision=args.revision), metadata=gw.metadata)
    command.emit(resp, args.json, f"{describe(resp.memory)}\n  kept: last updated {_when(resp.memory.updated_at)}")
    return 0


PARSERS = (expiring_parser, keep_parser)
