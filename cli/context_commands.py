"""The context bundle's commands: ``context`` prints the caller's bundle for a prompt, ``pin`` and
``unpin`` choose what it always holds (gateway GetContext, PinMemory, UnpinMemory); and
``prompt-context``, the memories to put before one user turn (gateway PromptContext; docs/agents.md,
"Per-turn recall").

``recallatron context`` is for bots that assemble their own prompt: it prints the rendered block
(``--json``: the whole response, items and cut items included). The workspace must have the bundle
on (``recallatron workspace settings --context-bundle on``), else FAILED_PRECONDITION.
"""

from __future__ import annotations

import argparse
import datetime

from recallatron.gateway.v1 import gateway_pb2 as g

import client
from cli import command, options
from client import choices


def context_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron context``."""
    cx = sub.add_parser(
        "context",
        help="print your context bundle for a prompt (pinned, summaries, entities, newest)",
        description="Prints the rendered bundle; what was cut to fit the budget is said on its last line.",
    )
    cx.add_argument(
        "--budget",
        type=options.int32,
        default=0,
        help="most tokens (an estimate: docs/agents.md), 200..100000; default 1500",
    )
    options.window_options(cx)
    options.gateway_options(cx)
    cx.set_defaults(handler=context)


@command.gateway_command
def context(gw: client.Gateway, args: argparse.Namespace) -> int:
    """GetContext: prints the bundle's text, or the protobuf JSON."""
    resp = gw.memory.GetContext(
        g.GetContextRequest(
            purpose=choices.PURPOSES[args.purpose],
            token_budget=args.budget,
            **options.in_time(args),
        ),
        metadata=gw.metadata,
    )
    command.emit(resp, args.json, resp.text)
    return 0


def pin_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron pin`` and ``recallatron unpin``."""
    for name, handler, text in (
        ("pin", pin, "keep a memory you can read in your context bundle"),
        ("unpin", unpin, "take a memory out of your pins"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("id")
        options.gateway_options(p, purpose=False)
        p.set_defaults(handler=handler)


@command.gateway_command
def pin(gw: client.Gateway, args: argparse.Namespace) -> int:
    """PinMemory: prints when it was pinned (and whether it already was)."""
    resp = gw.memory.PinMemory(g.PinMemoryRequest(id=args.id), metadata=gw.metadata)
    at = resp.pinned_at.ToDatetime(tzinfo=datetime.UTC).isoformat(timespec="seconds")
    command.emit(resp, args.json, f"{'already pinned' if resp.already_pinned else 'pinned'} {resp.memory_id} at {at}")
    return 0


@command.gateway_command
def unpin(gw: client.Gateway, args: argparse.Namespace) -> int:
    """UnpinMemory: prints whether there was a pin to take away."""
    resp = gw.memory.UnpinMemory(g.UnpinMemoryRequest(id=args.id), metadata=gw.metadata)
    command.emit(resp, args.json, f"unpinned {args.id}" if resp.was_pinned else f"{args.id} was not pinned")
    return 0


def prompt_context_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron prompt-context``."""
    pc = sub.add_parser(
        "prompt-context",
        help="print the memories to put before one user turn (per-turn recall through the relevance gate)",
        description="Prints the block to prepend to the prompt; nothing when no memory is about the turn. "
        "With --session, a memory already printed for that session (at its current revision) is not "
        "printed again for 24 hours.",
    )
    pc.add_argument("text", help="the user's turn")
    pc.add_argument(
        "--budget",
        type=options.int32,
        default=0,
        help="most tokens (an estimate: docs/agents.md), 100..2500; default 600",
    )
    pc.add_argument(
        "--session", default="", metavar="KEY", help="the conversation's key (a chat id), 1..200 characters"
    )
    pc.add_argument(
        "--reference-time", type=options.instant, metavar="ISO", help="when the turn was said (default now)"
    )
    options.window_options(pc)
    pc.add_argument("--no-time-words", action="store_true", help="read no time in the turn's words")
    options.gateway_options(pc)
    pc.set_defaults(handler=prompt_context)


@command.gateway_command
def prompt_context(gw: client.Gateway, args: argparse.Namespace) -> int:
    """PromptContext: prints the block (nothing when it is empty), or the protobuf JSON."""
    resp = gw.memory.PromptContext(
        g.PromptContextRequest(
            text=args.text,
            purpose=choices.PURPOSES[args.purpose],
            reference_time=args.reference_time,
            token_budget=args.budget,
            session_key=args.session,
            skip_time_words=args.no_time_words,
            **options.in_time(args),
        ),
        metadata=gw.metadata,
    )
    if args.json or resp.text:
        command.emit(resp, args.json, resp.text)
    return 0


PARSERS = (context_parser, pin_parser, prompt_context_parser)
