"""The operator's commands: workspace create and settings, member add, revoke and remove, status,
rebuild-embeddings and load.

Each has a parser function (``*_parser(sub)``, which also names its handler) and a handler taking
the gateway and the parsed arguments; ``command.gateway_command`` connects with the operator
credential and turns a failed call into its status code on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import sys

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import command, operation_commands, options
from cli.dataset import load_file, report_failures, wait_for_backlog
from client import choices
from servicekit import vocabulary
from servicekit.vocabulary import name_of

SWITCH = {"on": True, "off": False}


def workspace_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron workspace create`` and ``recallatron workspace settings``."""
    ws = sub.add_parser("workspace", help="workspaces").add_subparsers(dest="action", required=True)
    wc = ws.add_parser("create", help="create a workspace")
    wc.add_argument("name")
    wc.add_argument(
        "--server",
        default="",
        help="the database server to put it on, by its configured name (default: the one with the fewest "
        "workspaces of those serving; `recallatron status` lists them)",
    )
    options.gateway_options(wc, operator=True)
    wc.set_defaults(handler=workspace_create)
    wst = ws.add_parser(
        "settings",
        help="change a workspace's dense floor, default mode, context bundle, expiry gate or relevance gate",
    )
    wst.add_argument("--workspace", required=True, help="workspace id or name")
    wst.add_argument("--floor", type=float, help="dense-arm cosine floor, 0..1")
    wst.add_argument("--default-mode", choices=choices.MODES)
    wst.add_argument("--context-bundle", choices=SWITCH, help="turn GetContext (recallatron context) on or off")
    gate = wst.add_mutually_exclusive_group()
    gate.add_argument(
        "--expiry-days",
        type=options.int32,
        metavar="N",
        help="turn the expiry gate on: memories not updated for N days (1..3650) are hidden from recall",
    )
    gate.add_argument("--expiry", choices=("off",), help="turn the expiry gate off (off by default)")
    wst.add_argument(
        "--inject-gate",
        type=inject_gate,
        metavar="strict|default|loose|NUMBER",
        help="the relevance gate of per-turn recall (prompt-context, the hooks): a preset or a minimum cosine 0..1",
    )
    options.gateway_options(wst, operator=True)
    wst.set_defaults(handler=workspace_settings)
    operation_commands.workspace_actions(ws)


def inject_gate(text: str) -> tuple[int, float | None]:
    """The ``--inject-gate`` type: a preset's name as (its value, None) or a number 0..1 as (0, it);
    a usage error otherwise."""
    presets = vocabulary.values(m.InjectGate)
    if text in presets:
        return presets[text], None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:  # NaN included
        raise argparse.ArgumentTypeError(f"{text!r} is not {', '.join(presets)} or a minimum cosine 0..1")
    return 0, value


def inject_text(preset: int, min_cosine: float) -> str:
    """The relevance gate in force as printed: ``default(0.45)``, or the number alone (``0.40``)."""
    return f"{name_of(m.InjectGate, preset)}({min_cosine:.2f})" if preset else f"{min_cosine:.2f}"


@command.gateway_command
def workspace_create(gw: client.Gateway, args: argparse.Namespace) -> int:
    """CreateWorkspace: prints the new workspace id (alone on stdout, for scripts), and on stderr the
    database server it was placed on."""
    resp = gw.admin.CreateWorkspace(g.CreateWorkspaceRequest(name=args.name, server=args.server), metadata=gw.metadata)
    command.emit(resp, args.json, resp.workspace_id)
    if not args.json:
        print(f"workspace {args.name!r} created on database server {resp.server}", file=sys.stderr)
    return 0


@command.gateway_command
def workspace_settings(gw: client.Gateway, args: argparse.Namespace) -> int:
    """UpdateWorkspaceSettings: prints the floor, default mode, relevance gate (``inject_gate=default(0.45)``
    or ``inject_gate=0.40``), expiry gate (``expiry=30d``, or ``expiry=off``) and context bundle switch
    now in force."""
    resp = gw.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(
            workspace_id=args.workspace,
            dense_floor=args.floor,
            default_mode=choices.MODES.get(args.default_mode, 0),
            context_bundle=SWITCH.get(args.context_bundle),
            expiry_days=args.expiry_days,
            expiry_off=True if args.expiry == "off" else None,
            inject_gate=args.inject_gate[0] if args.inject_gate and args.inject_gate[0] else None,
            inject_min_cosine=args.inject_gate[1] if args.inject_gate and not args.inject_gate[0] else None,
        ),
        metadata=gw.metadata,
    )
    command.emit(
        resp,
        args.json,
        f"dense_floor={resp.dense_floor:.2f} default_mode={name_of(m.RecallMode, resp.default_mode)} "
        f"inject_gate={inject_text(resp.inject_gate, resp.inject_min_cosine)} "
        f"expiry={f'{resp.expiry_days}d' if resp.expiry_days else 'off'} "
        f"context_bundle={'on' if resp.context_bundle else 'off'}",
    )
    return 0


def member_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron member add``, ``member revoke`` and ``member remove``."""
    mb = sub.add_parser("member", help="members").add_subparsers(dest="action", required=True)
    ma = mb.add_parser("add", help="add a member and print its token")
    ma.add_argument("--workspace", required=True, help="workspace id or name")
    ma.add_argument("--role", default="member", choices=choices.ROLES)
    ma.add_argument("--purposes", type=options.purposes, default=[], help="comma-separated; default all four")
    ma.add_argument("--name", default="", help="display name")
    options.gateway_options(ma, operator=True)
    ma.set_defaults(handler=member_add)
    mr = mb.add_parser("revoke", help="revoke every token of a member")
    mr.add_argument("--workspace", required=True, help="workspace id or name")
    mr.add_argument("member_id", help="member id, or display name when exactly one member has it")
    options.gateway_options(mr, operator=True)
    mr.set_defaults(handler=member_revoke)
    mx = mb.add_parser(
        "remove",
        help="remove a member: revoke its tokens, forget its member-only memories and its history "
        "(its workspace memories stay)",
    )
    mx.add_argument("--workspace", required=True, help="workspace id or name")
    mx.add_argument("member_id", help="member id, or display name when exactly one member has it")
    options.gateway_options(mx, operator=True)
    mx.set_defaults(handler=member_remove)
    operation_commands.member_actions(mb)


@command.gateway_command
def member_add(gw: client.Gateway, args: argparse.Namespace) -> int:
    """AddMember: prints the member id and its token."""
    resp = gw.admin.AddMember(
        g.AddMemberRequest(
            workspace_id=args.workspace, role=choices.ROLES[args.role], purposes=args.purposes, display_name=args.name
        ),
        metadata=gw.metadata,
    )
    command.emit(resp, args.json, f"member {resp.member_id}\ntoken {resp.token}")
    return 0


@command.gateway_command
def member_revoke(gw: client.Gateway, args: argparse.Namespace) -> int:
    """RevokeMember: prints how many tokens were revoked."""
    resp = gw.admin.RevokeMember(
        g.RevokeMemberRequest(workspace_id=args.workspace, member_id=args.member_id), metadata=gw.metadata
    )
    command.emit(resp, args.json, f"revoked {resp.revoked} token(s)")
    return 0


@command.gateway_command
def member_remove(gw: client.Gateway, args: argparse.Namespace) -> int:
    """RemoveMember: prints what the call did (tokens revoked, memories and history turns forgotten)
    and the forgotten memory ids, one per line."""
    resp = gw.admin.RemoveMember(
        g.RemoveMemberRequest(workspace_id=args.workspace, member_id=args.member_id), metadata=gw.metadata
    )
    again = " (already removed before: this run finished what was left)" if resp.already_removed else ""
    text = (
        f"removed member {args.member_id}{again}: revoked {resp.revoked} token(s), forgot "
        f"{len(resp.forgotten_ids)} member-only memories and {resp.history_forgotten} history turn(s)"
    )
    command.emit(resp, args.json, "\n".join([text, *(f"  forgot {i}" for i in resp.forgotten_ids)]))
    return 0


def status_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron status``."""
    st = sub.add_parser("status", help="embedding backlog, dependency state and database servers")
    options.gateway_options(st, operator=True)
    st.set_defaults(handler=status)


@command.gateway_command
def status(gw: client.Gateway, args: argparse.Namespace) -> int:
    """GetStatus: prints the embedding backlog and whether each dependency is up, DOWN (with why) or
    not configured (the re-ranker without a cross-encoder: not an outage)."""
    resp = gw.admin.GetStatus(g.GetStatusRequest(), metadata=gw.metadata)
    deps = "\n".join(f"  {d.name}: {_dependency_state(d)}" for d in resp.dependencies)
    servers = "".join(
        f"\n  database server {d.name}: {'up' if d.serving else 'DOWN'}, {d.workspaces} workspace(s)"
        f"{' (control plane)' if d.control_plane else ''}"
        for d in resp.database_servers
    )
    command.emit(resp, args.json, f"embedding backlog: {resp.embedding_backlog}\n{deps}{servers}")
    return 0


def _dependency_state(d: g.DependencyStatus) -> str:
    if d.state == g.DEPENDENCY_STATE_NOT_CONFIGURED:
        return "not configured"
    return "up" if d.serving else f"DOWN {d.detail}"


def rebuild_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron rebuild-embeddings``."""
    rb = sub.add_parser("rebuild-embeddings", help="re-embed missing or stale vectors (or --all) and show progress")
    rb.add_argument("--all", action="store_true", help="re-embed every live memory")
    rb.add_argument("--no-wait", action="store_true", help="queue the work and return")
    options.gateway_options(rb, operator=True)
    rb.set_defaults(handler=rebuild_embeddings)


@command.gateway_command
def rebuild_embeddings(gw: client.Gateway, args: argparse.Namespace) -> int:
    """RebuildEmbeddings, then (unless --no-wait) shows the backlog until it is empty; Ctrl-C stops
    watching (exit 130) while the queue drains on its own."""
    resp = gw.admin.RebuildEmbeddings(g.RebuildEmbeddingsRequest(all=args.all), metadata=gw.metadata)
    command.emit(resp, args.json, f"queued {resp.queued} memories for {resp.input_version}")
    if args.no_wait:
        return 0
    try:
        wait_for_backlog(gw)
    except KeyboardInterrupt:
        print("stopped watching; the queue stays and drains on its own (run again to resume)", file=sys.stderr)
        return 130
    if not args.json:
        print("embedding backlog empty: the index is current")
    return 0


def load_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron load``."""
    ld = sub.add_parser("load", help="load memories from a JSONL file in the format of demo/ (demo/README.md)")
    ld.add_argument("--workspace", required=True, help="workspace id (a member is added to write)")
    ld.add_argument("file")
    options.gateway_options(ld, operator=True)
    ld.add_argument("--purpose", default="conversation", choices=choices.PURPOSES)
    ld.set_defaults(handler=load)


@command.gateway_command
def load(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Loads a JSONL file through RememberBatch as a new member of --workspace: prints how many rows
    were stored; failed rows go to stderr with their status code, and then the exit status is 1."""
    count, errors = load_file(gw, args.workspace, args.file, choices.PURPOSES[args.purpose])
    print(command.dump({"loaded": count}) if args.json else f"loaded {count} memories")
    if errors:
        report_failures(errors, count + len(errors))
        return 1
    return 0
