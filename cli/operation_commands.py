"""The operator's everyday commands (docs/operations.md): ``workspace list|show|rename|delete`` and
``member list|token|rename``, each one AdminService call (``workspace delete --export`` first writes
the workspace's memories to a file). A workspace is named by id or name wherever one is asked for;
a member by id or display name (when exactly one member has it).
"""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import command, options, portability
from cli.portability_commands import memory_records, readable_memories
from servicekit.render import minute_utc
from servicekit.vocabulary import name_of

WORKSPACE_HELP = "workspace id or name"
MEMBER_HELP = "member id, or display name when exactly one member has it"


def workspace_actions(ws: argparse._SubParsersAction) -> None:
    """Adds list, show, rename and delete to ``recallatron workspace``."""
    wl = ws.add_parser("list", help="list the workspaces with their member counts")
    wl.add_argument("--page-size", type=options.int32, default=0, help="workspaces per page (default 50, at most 200)")
    wl.add_argument("--page-token", default="", help="next_page_token of the previous page")
    options.gateway_options(wl, operator=True)
    wl.set_defaults(handler=workspace_list)
    wsh = ws.add_parser("show", help="one workspace: its name, members and settings")
    wsh.add_argument("workspace", help=WORKSPACE_HELP)
    options.gateway_options(wsh, operator=True)
    wsh.set_defaults(handler=workspace_show)
    wr = ws.add_parser("rename", help="rename a workspace (names are unique)")
    wr.add_argument("workspace", help=WORKSPACE_HELP)
    wr.add_argument("name", help="the new name")
    options.gateway_options(wr, operator=True)
    wr.set_defaults(handler=workspace_rename)
    wd = ws.add_parser("delete", help="delete a workspace: its database, members and tokens (refused without --yes)")
    wd.add_argument("workspace", help=WORKSPACE_HELP)
    wd.add_argument("--yes", action="store_true", help="really delete it (nothing can bring it back)")
    wd.add_argument(
        "--export",
        metavar="FILE",
        help="first write every memory of the workspace to FILE (the `recallatron export` format); "
        "nothing is deleted unless the file is written whole",
    )
    options.gateway_options(wd, operator=True)
    wd.set_defaults(handler=workspace_delete)
    wm = ws.add_parser(
        "move",
        help="move a workspace's database to another database server (writes are refused, with a retry hint, "
        "while it is copied; docs/scaling.md)",
    )
    wm.add_argument("workspace", help=WORKSPACE_HELP)
    wm.add_argument("--to", required=True, metavar="SERVER", help="the configured name of the server to move it to")
    options.gateway_options(wm, operator=True)
    wm.set_defaults(handler=workspace_move)


def member_actions(mb: argparse._SubParsersAction) -> None:
    """Adds list, token and rename to ``recallatron member``."""
    ml = mb.add_parser("list", help="list a workspace's members: names, roles, purposes, tokens (never a token)")
    ml.add_argument("--workspace", required=True, help=WORKSPACE_HELP)
    ml.add_argument("--page-size", type=options.int32, default=0, help="members per page (default 50, at most 200)")
    ml.add_argument("--page-token", default="", help="next_page_token of the previous page")
    options.gateway_options(ml, operator=True)
    ml.set_defaults(handler=member_list)
    mt = mb.add_parser("token", help="issue a new token to an existing member (printed once)")
    mt.add_argument("--workspace", required=True, help=WORKSPACE_HELP)
    mt.add_argument("member", help=MEMBER_HELP)
    mt.add_argument("--purposes", type=options.purposes, default=[], help="comma-separated; default all four")
    mt.add_argument("--revoke-others", action="store_true", help="revoke every other token of the member")
    options.gateway_options(mt, operator=True)
    mt.set_defaults(handler=member_token)
    mn = mb.add_parser("rename", help="change a member's display name")
    mn.add_argument("--workspace", required=True, help=WORKSPACE_HELP)
    mn.add_argument("member", help=MEMBER_HELP)
    mn.add_argument("name", help="the new display name (empty to clear it)")
    options.gateway_options(mn, operator=True)
    mn.set_defaults(handler=member_rename)


def workspace_line(w: m.WorkspaceSummary) -> str:
    """One workspace as ``workspace list`` prints it."""
    removed = f" ({w.removed_member_count} removed)" if w.removed_member_count else ""
    return (
        f"{w.id}  {w.name!r}  {w.member_count} member(s){removed}  created {minute_utc(w.created_at)}"
        f"  server {w.server}"
    )


def _next(token: str) -> list[str]:
    return [f"next page: --page-token {token}"] if token else []


@command.gateway_command
def workspace_list(gw: client.Gateway, args: argparse.Namespace) -> int:
    """ListWorkspaces: one line per workspace, then the next page's token when there is one."""
    resp = gw.admin.ListWorkspaces(
        g.ListWorkspacesRequest(page_size=args.page_size, page_token=args.page_token), metadata=gw.metadata
    )
    lines = [workspace_line(w) for w in resp.workspaces] or ["no workspaces"]
    command.emit(resp, args.json, "\n".join([*lines, *_next(resp.next_page_token)]))
    return 0


# A move copies the whole database (minutes for a large workspace): the call may take that long.
MOVE_TIMEOUT_SECONDS = 3600.0


@command.gateway_command
def workspace_move(gw: client.Gateway, args: argparse.Namespace) -> int:
    """MoveWorkspace: says where it went, the rows copied and how long writes were refused."""
    try:
        resp = gw.admin.MoveWorkspace(
            g.MoveWorkspaceRequest(workspace_id=args.workspace, server=args.to),
            metadata=gw.metadata,
            timeout=MOVE_TIMEOUT_SECONDS,
        )
    except KeyboardInterrupt:
        print(
            "recallatron: interrupted; the store goes on with the move: "
            f"`recallatron workspace show {args.workspace}` says when it has ended",
            file=sys.stderr,
        )
        return 130
    except grpc.RpcError as exc:
        status = command.fail(exc)
        if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            # The answer can be lost after the move went through (the store restarted, say).
            print(
                f"recallatron: `recallatron workspace show {args.workspace}` says where the workspace is now "
                "and whether a move is running",
                file=sys.stderr,
            )
        return status
    again = " (finishing an earlier move)" if resp.resumed else ""
    named = resp.workspace_id if args.workspace == resp.workspace_id else f"{args.workspace} ({resp.workspace_id})"
    command.emit(
        resp,
        args.json,
        f"moved {named} from {resp.from_server} to {resp.to_server}{again}: {resp.rows_copied} rows, "
        f"writes refused for {resp.write_pause_ms} ms",
    )
    return 0


def _unfinished_move(w: m.WorkspaceSummary) -> list[str]:
    """What ``workspace show`` says of a move running now, or of one that did not finish, with the
    command that finishes it."""
    again = f"run `recallatron workspace move {w.id} --to"
    if w.moving_to and w.move_running:
        return [f"  moving to {w.moving_to} now: writes are refused (retryable) until its copy is switched"]
    if w.moved_from and w.move_running:
        return [f"  moved from {w.moved_from}: its old copy there is being dropped now"]
    if w.moving_to:
        return [f"  a move to {w.moving_to} did not finish: {again} {w.moving_to}`"]
    if w.moved_from:
        return [f"  an old copy is left on {w.moved_from}: {again} {w.server}`"]
    return []


@command.gateway_command
def workspace_show(gw: client.Gateway, args: argparse.Namespace) -> int:
    """GetWorkspace: its id, name, members and settings."""
    w = gw.admin.GetWorkspace(g.GetWorkspaceRequest(workspace_id=args.workspace), metadata=gw.metadata).workspace
    gate = (
        f"{name_of(m.InjectGate, w.inject_gate)}({w.inject_min_cosine:.2f})"
        if w.inject_gate
        else (f"{w.inject_min_cosine:.2f}")
    )
    text = "\n".join(
        [
            f"workspace {w.id}",
            f"  name: {w.name!r}",
            *([f"  renamed from {w.renamed_from!r} (its name was another workspace's too)"] if w.renamed_from else []),
            f"  created: {minute_utc(w.created_at)}",
            f"  server: {w.server}",
            *_unfinished_move(w),
            f"  members: {w.member_count} ({w.removed_member_count} removed)",
            f"  dense_floor={w.dense_floor:.2f} default_mode={name_of(m.RecallMode, w.default_mode)} "
            f"inject_gate={gate} expiry={f'{w.expiry_days}d' if w.expiry_days else 'off'} "
            f"context_bundle={'on' if w.context_bundle else 'off'}",
        ]
    )
    command.emit(w, args.json, text)
    return 0


@command.gateway_command
def workspace_rename(gw: client.Gateway, args: argparse.Namespace) -> int:
    """RenameWorkspace: prints the workspace as it is now."""
    w = gw.admin.RenameWorkspace(
        g.RenameWorkspaceRequest(workspace_id=args.workspace, name=args.name), metadata=gw.metadata
    ).workspace
    command.emit(w, args.json, f"renamed workspace {w.id} to {w.name!r}")
    return 0


@command.gateway_command
def workspace_delete(gw: client.Gateway, args: argparse.Namespace) -> int:
    """DeleteWorkspace, refused without --yes; with --export FILE, only once FILE is written whole. A
    workspace whose deletion was interrupted is no longer found by GetWorkspace: with --yes (and no
    --export: its tokens fail already, nothing can be read), DeleteWorkspace finishes it."""
    try:
        w = gw.admin.GetWorkspace(g.GetWorkspaceRequest(workspace_id=args.workspace), metadata=gw.metadata).workspace
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.NOT_FOUND or not args.yes or args.export:
            raise
        return _deleted(
            gw.admin.DeleteWorkspace(g.DeleteWorkspaceRequest(workspace_id=args.workspace), metadata=gw.metadata), args
        )
    if not args.yes:
        print(
            f"not deleted: workspace {w.id} ({w.name!r}, {w.member_count} member(s)) and every memory in it would be "
            "gone for good; run again with --yes (and --export FILE to keep its memories)",
            file=sys.stderr,
        )
        return 1
    issued: list[tuple[str, str]] = []  # (member id, token) the export issued, revoked unless deleted
    reader: list[str] = []  # the member the export added to read workspace memories, removed unless deleted
    try:
        if args.export:
            count = export_workspace(gw, w.id, Path(args.export), issued, reader)
            if count is None:
                return 1
            if not args.json:
                print(f"exported {count} memories to {args.export}")
        resp = gw.admin.DeleteWorkspace(g.DeleteWorkspaceRequest(workspace_id=w.id), metadata=gw.metadata)
        issued.clear()  # gone with the workspace
        reader.clear()
    finally:
        for member_id, token in issued:  # the export stopped short: its tokens must not outlive it
            gw.admin.RevokeMember(
                g.RevokeMemberRequest(workspace_id=w.id, member_id=member_id, token=token), metadata=gw.metadata
            )
        for member_id in reader:
            gw.admin.RemoveMember(g.RemoveMemberRequest(workspace_id=w.id, member_id=member_id), metadata=gw.metadata)
    return _deleted(resp, args)


def _deleted(resp: g.DeleteWorkspaceResponse, args: argparse.Namespace) -> int:
    """Prints what DeleteWorkspace did."""
    resumed = " (finishing an earlier, interrupted deletion)" if resp.resumed else ""
    command.emit(
        resp,
        args.json,
        f"deleted workspace {resp.workspace_id} ({resp.name!r}){resumed}: its database, "
        f"{resp.members_deleted} member(s) and their tokens",
    )
    return 0


def export_workspace(
    gw: client.Gateway, workspace_id: str, out: Path, issued: list[tuple[str, str]], reader: list[str]
) -> int | None:
    """Writes every memory of the workspace to ``out`` in the export format and returns how many;
    None (after a message) when the file cannot be written.

    The operator reads no memory, so memories are listed as members: each live member with a token
    issued to it for this export (every purpose), each appended to ``issued``, for its member-only
    memories; and a member added for the export (``reader``), for the workspace memories of authors
    no longer there. The union is every memory someone can read; of two views of one memory, the one
    that sees its successor is kept (another member may not see it). The workspace is deleted right
    after, taking those tokens and that member with it; should it not be, the caller revokes and
    removes them. History is owner-only, so it is not exported: members export their own first
    (`recallatron export --include-history`)."""
    started = datetime.datetime.now(datetime.UTC)
    found: dict[str, tuple[m.Memory, bool]] = {}

    def take(token: str) -> None:
        for mem_id, (mem, superseded) in readable_memories(gw.with_token(token)).items():
            have = found.get(mem_id)
            if have is None or (mem.superseded_by_id and not have[0].superseded_by_id):
                found[mem_id] = (mem, superseded or (have is not None and have[1]))

    added = gw.admin.AddMember(
        g.AddMemberRequest(workspace_id=workspace_id, display_name="workspace export"), metadata=gw.metadata
    )
    reader.append(added.member_id)
    take(added.token)
    req = g.ListMembersRequest(workspace_id=workspace_id, page_size=200)
    while True:
        page = gw.admin.ListMembers(req, metadata=gw.metadata)
        for member in page.members:
            if member.removed or member.id == added.member_id:
                continue
            token = gw.admin.IssueMemberToken(
                g.IssueMemberTokenRequest(workspace_id=workspace_id, member_id=member.id), metadata=gw.metadata
            ).token
            issued.append((member.id, token))
            take(token)
        if not page.next_page_token:
            break
        req.page_token = page.next_page_token
    records = memory_records(found)
    head = portability.header(started, len(records), 0, False)
    try:
        portability.write_export(out, head, records)
    except OSError as exc:
        print(f"{out}: cannot write it ({exc.strerror}); nothing was deleted", file=sys.stderr)
        return None
    return len(records)


def member_line(mb: m.MemberSummary) -> str:
    """One member as ``member list`` prints it."""
    purposes = ",".join(name_of(m.Purpose, p) for p in mb.purposes) or "none"
    state = f"  REMOVED {minute_utc(mb.removed_at)}" if mb.removed else ""
    return (
        f"{mb.id}  {mb.display_name!r}  {name_of(m.Role, mb.role)}  purposes={purposes}  tokens={mb.token_count}{state}"
    )


@command.gateway_command
def member_list(gw: client.Gateway, args: argparse.Namespace) -> int:
    """ListMembers: one line per member (never a token), then the next page's token."""
    resp = gw.admin.ListMembers(
        g.ListMembersRequest(workspace_id=args.workspace, page_size=args.page_size, page_token=args.page_token),
        metadata=gw.metadata,
    )
    lines = [member_line(x) for x in resp.members] or ["no members"]
    command.emit(resp, args.json, "\n".join([*lines, *_next(resp.next_page_token)]))
    return 0


@command.gateway_command
def member_token(gw: client.Gateway, args: argparse.Namespace) -> int:
    """IssueMemberToken: prints the member id, the new token and how many others were revoked."""
    resp = gw.admin.IssueMemberToken(
        g.IssueMemberTokenRequest(
            workspace_id=args.workspace, member_id=args.member, purposes=args.purposes, revoke_others=args.revoke_others
        ),
        metadata=gw.metadata,
    )
    revoked = f"\nrevoked {resp.revoked} other token(s)" if args.revoke_others else ""
    command.emit(resp, args.json, f"member {resp.member_id}\ntoken {resp.token}{revoked}")
    return 0


@command.gateway_command
def member_rename(gw: client.Gateway, args: argparse.Namespace) -> int:
    """RenameMember: prints the member as it is now."""
    mb = gw.admin.RenameMember(
        g.RenameMemberRequest(workspace_id=args.workspace, member_id=args.member, display_name=args.name),
        metadata=gw.metadata,
    ).member
    command.emit(mb, args.json, f"member {mb.id} is now named {mb.display_name!r}")
    return 0
