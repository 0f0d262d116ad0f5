"""The member's history commands: ``recallatron history append|search|forget``.

History evidence is the member's own conversation turns: kept for them alone, searchable by keyword,
never a memory and never recalled (AppendHistory, SearchHistory and ForgetHistory in
proto/recallatron/gateway/v1/gateway.proto). ``history_parser`` adds the ``history`` command; each
subcommand has its parser function and its handler, as in ``memory_commands``.

Times are ISO 8601 (``2026-03-02``, ``2026-03-02T08:00:00Z``, ``2026-03-02 08:00:00+01:00``); one
without an offset is UTC, as the old store wrote them.
"""

from __future__ import annotations

import argparse
import datetime
import sys

from google.protobuf import timestamp_pb2
from google.rpc import code_pb2
from recallatron.gateway.v1 import gateway_pb2 as g

import client
from cli import command, options
from servicekit.render import for_terminal as shown


def _iso(ts: timestamp_pb2.Timestamp) -> str:
    return ts.ToDatetime(tzinfo=datetime.UTC).isoformat().replace("+00:00", "Z")


def entry_text(entry: g.HistoryEntry) -> str:
    """A turn for people: id, time, chat, session (``~`` when computed), role and score, then the text."""
    turn = entry.turn
    session = ("~" if entry.session_computed else "") + shown(turn.session_id)
    score = f"  score={entry.score:.4f}" if entry.score else ""
    head = f"{entry.turn_id}  {_iso(turn.occurred_at)}  {shown(turn.chat_id)}  {session}  {turn.role}{score}"
    return f"{head}\n    {shown(turn.text)}"


def append_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron history append``."""
    ap = sub.add_parser("append", help="append one turn to your history")
    ap.add_argument("text")
    ap.add_argument("--chat", required=True, help="the conversation's id")
    ap.add_argument("--role", default="user", help="user (default) or assistant")
    ap.add_argument("--session", default="", help="session id (default: computed from the chat's runs)")
    ap.add_argument("--at", type=options.instant, help="when it was said (default: now)")
    ap.add_argument("--request-id", default="", help="idempotency key: a turn with a used key is not stored again")
    options.gateway_options(ap, purpose=False)
    ap.set_defaults(handler=append)


@command.gateway_command
def append(gw: client.Gateway, args: argparse.Namespace) -> int:
    """AppendHistory of one turn: prints its id (and whether its request id was used before); a refused
    turn prints its status code and message to stderr and returns 1."""
    turn = g.HistoryTurn(
        request_id=args.request_id, chat_id=args.chat, role=args.role, text=args.text, session_id=args.session
    )
    if args.at is not None:
        turn.occurred_at.CopyFrom(args.at)
    resp = gw.memory.AppendHistory(g.AppendHistoryRequest(turns=[turn]), metadata=gw.metadata)
    result = resp.results[0]
    if result.HasField("error"):
        print(f"{code_pb2.Code.Name(result.error.code)}: {result.error.message}", file=sys.stderr)
        return 1
    command.emit(resp, args.json, f"{'already stored' if result.replayed else 'stored'} {result.turn_id}")
    return 0


def search_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron history search``."""
    se = sub.add_parser("search", help="search your history by keywords (no query: list it, oldest first)")
    se.add_argument("query", nargs="?", default="")
    se.add_argument("--chat", default="", help="only this chat")
    se.add_argument("--session", default="", help="only this session")
    se.add_argument(
        "--since",
        "--after",
        dest="since",
        type=options.instant,
        action=options.Once,
        help="only turns at or after this time",
    )
    se.add_argument(
        "--until",
        "--before",
        dest="until",
        type=options.instant,
        action=options.Once,
        help="only turns before this time",
    )
    se.add_argument("--page-size", type=options.int32, default=0, help="entries per page (default 20, at most 200)")
    se.add_argument("--page-token", default="", help="the token a previous page printed")
    se.add_argument("--all", action="store_true", help="follow the pages to the end")
    options.gateway_options(se, purpose=False)
    se.set_defaults(handler=search)


@command.gateway_command
def search(gw: client.Gateway, args: argparse.Namespace) -> int:
    """SearchHistory: prints each turn and the next page's token; with --all every page, as one
    response (one JSON object with --json)."""
    req = g.SearchHistoryRequest(
        query=args.query,
        start_time=args.since,
        end_time=args.until,
        chat_id=args.chat,
        session_id=args.session,
        page_size=args.page_size,
        page_token=args.page_token,
    )
    resp = gw.memory.SearchHistory(req, metadata=gw.metadata)
    while args.all and resp.next_page_token:
        req.page_token = resp.next_page_token
        more = gw.memory.SearchHistory(req, metadata=gw.metadata)
        resp.entries.extend(more.entries)
        resp.next_page_token = more.next_page_token
    lines = [entry_text(e) for e in resp.entries] or ["no turns"]
    if resp.next_page_token:
        lines.append(f"next page: --page-token {resp.next_page_token}")
    command.emit(resp, args.json, "\n".join(lines))
    return 0


def forget_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron history forget``."""
    fg = sub.add_parser("forget", help="forget turns of your history, by id or by time range")
    fg.add_argument("--turn", action="append", default=[], help="turn id (repeatable)")
    fg.add_argument("--since", type=options.instant, help="with --until: forget turns at or after this time")
    fg.add_argument("--until", type=options.instant, help="with --since: ... and before this time")
    options.gateway_options(fg, purpose=False)
    fg.set_defaults(handler=forget)


@command.gateway_command
def forget(gw: client.Gateway, args: argparse.Namespace) -> int:
    """ForgetHistory: prints how many turns were forgotten."""
    resp = gw.memory.ForgetHistory(
        g.ForgetHistoryRequest(turn_ids=args.turn, start_time=args.since, end_time=args.until), metadata=gw.metadata
    )
    command.emit(resp, args.json, f"forgot {resp.forgotten_count} turns")
    return 0


def history_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron history`` and its subcommands."""
    hi = sub.add_parser("history", help="your own conversation history: append, search, forget")
    inner = hi.add_subparsers(dest="history_command", required=True)
    for add in (append_parser, search_parser, forget_parser):
        add(inner)
