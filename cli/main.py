"""The ``recallatron`` command: run the system, administer it, and use it as a client.

Exit status 0 on success, 1 when a call fails (the gRPC status code name and message go to
stderr), 2 for bad command-line usage.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import sys

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from cli import client
from servicekit import settings as settings_mod

PURPOSES = {"conversation": m.PURPOSE_CONVERSATION, "tasks": m.PURPOSE_TASKS, "reporting": m.PURPOSE_REPORTING,
            "administration": m.PURPOSE_ADMINISTRATION}
KINDS = {"note": m.KIND_NOTE, "fact": m.KIND_FACT, "decision": m.KIND_DECISION, "summary": m.KIND_SUMMARY}
MODES = {"lexical": m.RECALL_MODE_LEXICAL, "dense": m.RECALL_MODE_DENSE, "hybrid": m.RECALL_MODE_HYBRID}
AUDIENCES = {"workspace": m.AUDIENCE_WORKSPACE, "member": m.AUDIENCE_MEMBER}
ROLES = {"member": m.ROLE_MEMBER, "admin": m.ROLE_ADMIN}


def _purposes(text: str) -> list[int]:
    try:
        return [PURPOSES[p.strip()] for p in text.split(",") if p.strip()]
    except KeyError as exc:
        raise argparse.ArgumentTypeError(f"unknown purpose {exc.args[0]!r}; choose from {', '.join(PURPOSES)}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    p = argparse.ArgumentParser(prog="recallatron", description="Durable memory for AI agents.")
    sub = p.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run one service in the foreground")
    serve.add_argument("service", choices=("store", "embed", "rank", "gateway"))
    sub.add_parser("up", help="start the embedded database and all four services; Ctrl-C stops them")

    def gateway_opts(sp, operator=False):
        sp.add_argument("--gateway", default=None, help="gateway address (default RECALLATRON_GATEWAY_ADDR)")
        sp.add_argument("--json", action="store_true", help="print the response as protobuf JSON")
        if operator:
            sp.add_argument("--operator-token", help="operator credential (default: the data folder's)")
        else:
            sp.add_argument("--token", help="member token (default RECALLATRON_TOKEN)")
            sp.add_argument("--purpose", default="conversation", choices=PURPOSES)

    ws = sub.add_parser("workspace", help="workspaces").add_subparsers(dest="action", required=True)
    wc = ws.add_parser("create", help="create a workspace")
    wc.add_argument("name")
    gateway_opts(wc, operator=True)

    wst = ws.add_parser("settings", help="change a workspace's dense floor or default mode")
    wst.add_argument("--workspace", required=True)
    wst.add_argument("--floor", type=float, help="dense-arm cosine floor, 0..1")
    wst.add_argument("--default-mode", choices=MODES)
    gateway_opts(wst, operator=True)

    mb = sub.add_parser("member", help="members").add_subparsers(dest="action", required=True)
    ma = mb.add_parser("add", help="add a member and print its token")
    ma.add_argument("--workspace", required=True)
    ma.add_argument("--role", default="member", choices=ROLES)
    ma.add_argument("--purposes", type=_purposes, default=[], help="comma-separated; default all four")
    ma.add_argument("--name", default="", help="display name")
    gateway_opts(ma, operator=True)
    mr = mb.add_parser("revoke", help="revoke every token of a member")
    mr.add_argument("--workspace", required=True)
    mr.add_argument("member_id")
    gateway_opts(mr, operator=True)

    st = sub.add_parser("status", help="embedding backlog and dependency state")
    gateway_opts(st, operator=True)

    rb = sub.add_parser("rebuild-embeddings", help="re-embed missing or stale vectors (or --all) and show progress")
    rb.add_argument("--all", action="store_true", help="re-embed every live memory")
    rb.add_argument("--no-wait", action="store_true", help="queue the work and return")
    gateway_opts(rb, operator=True)

    rm = sub.add_parser("remember", help="store a memory")
    rm.add_argument("--kind", default="note", choices=KINDS)
    rm.add_argument("--title", default="")
    rm.add_argument("--audience", default="workspace", choices=AUDIENCES)
    rm.add_argument("--confidence", type=float)
    rm.add_argument("--request-id", default="")
    rm.add_argument("--about", action="append", default=[], help="entity name to mention (repeatable)")
    rm.add_argument("--about-id", action="append", default=[], help="existing entity id to mention (repeatable)")
    rm.add_argument("body")
    gateway_opts(rm)

    dv = sub.add_parser("derive", help="derive a memory from readable sources")
    dv.add_argument("--source", action="append", required=True, help="source memory id (repeatable)")
    dv.add_argument("--kind", default="summary", choices=KINDS)
    dv.add_argument("--title", default="")
    dv.add_argument("--request-id", default="")
    dv.add_argument("--about", action="append", default=[], help="entity name to mention (repeatable)")
    dv.add_argument("body")
    gateway_opts(dv)

    co = sub.add_parser("correct", help="fix a memory in place under its current revision")
    co.add_argument("id")
    co.add_argument("--revision", type=int, required=True, help="the revision you read")
    co.add_argument("--title")
    co.add_argument("--confidence", type=float)
    co.add_argument("body")
    gateway_opts(co)

    su = sub.add_parser("supersede", help="replace a memory by a new one")
    su.add_argument("id")
    su.add_argument("--revision", type=int, required=True)
    su.add_argument("--kind", default="note", choices=KINDS)
    su.add_argument("--title", default="")
    su.add_argument("--audience", choices=AUDIENCES, help="may narrow to member; default: keep")
    su.add_argument("--request-id", default="")
    su.add_argument("body")
    gateway_opts(su)

    fg = sub.add_parser("forget", help="forget a memory and everything derived from it")
    fg.add_argument("id")
    fg.add_argument("--reason", required=True)
    gateway_opts(fg)

    en = sub.add_parser("entities", help="look entities up by name")
    en.add_argument("name")
    gateway_opts(en)

    rd = sub.add_parser("read", help="read one memory")
    rd.add_argument("id")
    rd.add_argument("--history", action="store_true")
    gateway_opts(rd)

    rc = sub.add_parser("recall", help="recall memories for a question")
    rc.add_argument("question")
    rc.add_argument("--mode", choices=MODES)
    rc.add_argument("--top-k", type=int, default=10)
    rc.add_argument("--no-rerank", action="store_true")
    rc.add_argument("--about-id", action="append", default=[], help="only memories about this entity id")
    rc.add_argument("--history", action="store_true", help="include superseded memories (keyword arm only)")
    gateway_opts(rc)

    ld = sub.add_parser("load", help="load memories from a JSONL file in the ../shared/eval format")
    ld.add_argument("--workspace", required=True, help="workspace id (a member is added to write)")
    ld.add_argument("file")
    gateway_opts(ld, operator=True)
    ld.add_argument("--purpose", default="conversation", choices=PURPOSES)

    ev = sub.add_parser("eval", help="measure retrieval on a dataset (recall@k, nDCG@10, MRR)")
    ev.add_argument("--dataset", required=True, help="folder with memories.jsonl and queries.jsonl, or of such folders")
    ev.add_argument("--mode", default="hybrid", choices=MODES)
    ev.add_argument("--top-k", type=int, default=50, help="results per query (at least 50 are asked)")
    ev.add_argument("--no-rerank", action="store_true")
    ev.add_argument("--ablate", action="store_true",
                    help="lexical, dense, hybrid and hybrid + re-rank side by side, one load")
    gateway_opts(ev, operator=True)

    cf = sub.add_parser("calibrate-floor", help="choose the dense cosine floor from on- and off-topic queries")
    cf.add_argument("--dataset", required=True, help="corpora whose own queries are on-topic")
    cf.add_argument("--off-topic", required=True, help="a dataset whose queries are off-topic for --dataset")
    gateway_opts(cf, operator=True)
    return p


def _mentions(names: list[str], ids: list[str]) -> list[m.EntityMention]:
    return [m.EntityMention(name=n) for n in names] + [m.EntityMention(entity_id=i) for i in ids]


def _ts(memory: m.Memory) -> str:
    return memory.created_at.ToDatetime(tzinfo=datetime.timezone.utc).isoformat(timespec="seconds")


def _describe(memory: m.Memory) -> str:
    aud = "workspace" if memory.audience == m.AUDIENCE_WORKSPACE else f"member {memory.audience_member_id}"
    text = (f"{memory.id}  revision {memory.revision}  {m.Kind.Name(memory.kind)[5:].lower()}  "
            f"{aud}  {m.Purpose.Name(memory.purpose)[8:].lower()}  created {_ts(memory)}\n"
            f"  {memory.title}\n  {memory.body}")
    if memory.superseded_by_id:
        text += f"\n  superseded by {memory.superseded_by_id}"
    for link in memory.links:
        target = link.target_memory_id or f"{link.target_entity_name} ({link.target_entity_id})"
        text += f"\n  {m.LinkType.Name(link.type)[10:].lower()} {target}"
    for rev in memory.history:
        text += f"\n  revision {rev.revision}: {rev.title} | {rev.body}"
    return text


def _recall_text(resp: g.RecallResponse) -> str:
    lines = [f"mode={m.RecallMode.Name(resp.mode)[12:].lower()} dense_available={str(resp.dense_available).lower()} "
             f"reranked={str(resp.reranked).lower()} passed={resp.counts.fused} returned={resp.counts.returned}"]
    for it in resp.items:
        lines.append(f"{it.rank:>3}. lexical_rank={it.lexical_rank or '-'} dense_rank={it.dense_rank or '-'} "
                     f"cosine={it.cosine:.3f} fused={it.fused_score:.5f} rerank={it.rerank_score:.3f}  "
                     f"{it.memory.id}\n     {it.memory.title}: {it.memory.body[:160]}")
    return "\n".join(lines)


def run(args, settings) -> int:
    """Executes a parsed client command; returns the exit status."""
    addr = args.gateway or settings.gateway_addr
    operator = "operator_token" in vars(args)
    token = client.operator_token(args, settings.operator_token_path) if operator else client.member_token(args)
    gw = client.Gateway(addr, token)
    md = gw.metadata
    try:
        if args.command == "workspace" and args.action == "create":
            resp = gw.admin.CreateWorkspace(g.CreateWorkspaceRequest(name=args.name), metadata=md)
            client.emit(resp, args.json, resp.workspace_id)
        elif args.command == "workspace":
            resp = gw.admin.UpdateWorkspaceSettings(g.UpdateWorkspaceSettingsRequest(
                workspace_id=args.workspace, dense_floor=args.floor, default_mode=MODES.get(args.default_mode, 0)),
                metadata=md)
            client.emit(resp, args.json, f"dense_floor={resp.dense_floor:.2f} "
                                         f"default_mode={m.RecallMode.Name(resp.default_mode)[12:].lower()}")
        elif args.command == "rebuild-embeddings":
            from cli.evaluate import wait_for_backlog
            resp = gw.admin.RebuildEmbeddings(g.RebuildEmbeddingsRequest(all=args.all), metadata=md)
            client.emit(resp, args.json, f"queued {resp.queued} memories for {resp.input_version}")
            if not args.no_wait:
                try:
                    wait_for_backlog(gw)
                except KeyboardInterrupt:
                    print("stopped watching; the queue stays and drains on its own (run again to resume)",
                          file=sys.stderr)
                    return 130
                if not args.json:
                    print("embedding backlog empty: the index is current")
        elif args.command == "member" and args.action == "add":
            resp = gw.admin.AddMember(g.AddMemberRequest(workspace_id=args.workspace, role=ROLES[args.role],
                                                         purposes=args.purposes, display_name=args.name), metadata=md)
            client.emit(resp, args.json, f"member {resp.member_id}\ntoken {resp.token}")
        elif args.command == "member":
            resp = gw.admin.RevokeMember(g.RevokeMemberRequest(workspace_id=args.workspace, member_id=args.member_id),
                                         metadata=md)
            client.emit(resp, args.json, f"revoked {resp.revoked} token(s)")
        elif args.command == "status":
            resp = gw.admin.GetStatus(g.GetStatusRequest(), metadata=md)
            deps = "\n".join(f"  {d.name}: {'up' if d.serving else 'DOWN ' + d.detail}" for d in resp.dependencies)
            client.emit(resp, args.json, f"embedding backlog: {resp.embedding_backlog}\n{deps}")
        elif args.command == "remember":
            resp = gw.memory.Remember(g.RememberRequest(
                purpose=PURPOSES[args.purpose], kind=KINDS[args.kind], title=args.title, body=args.body,
                audience=AUDIENCES[args.audience], confidence=args.confidence, request_id=args.request_id,
                entities=_mentions(args.about, args.about_id)), metadata=md)
            client.emit(resp, args.json, _describe(resp.memory))
        elif args.command == "derive":
            resp = gw.memory.Derive(g.DeriveRequest(
                source_ids=args.source, kind=KINDS[args.kind], title=args.title, body=args.body,
                request_id=args.request_id, entities=_mentions(args.about, [])), metadata=md)
            client.emit(resp, args.json, _describe(resp.memory))
        elif args.command == "correct":
            resp = gw.memory.Correct(g.CorrectRequest(id=args.id, expected_revision=args.revision, title=args.title,
                                                      body=args.body, confidence=args.confidence), metadata=md)
            client.emit(resp, args.json, _describe(resp.memory))
        elif args.command == "supersede":
            resp = gw.memory.Supersede(g.SupersedeRequest(
                id=args.id, expected_revision=args.revision, kind=KINDS[args.kind], title=args.title, body=args.body,
                audience=AUDIENCES.get(args.audience, 0), request_id=args.request_id), metadata=md)
            client.emit(resp, args.json, _describe(resp.memory))
        elif args.command == "forget":
            resp = gw.memory.Forget(g.ForgetRequest(id=args.id, reason=args.reason), metadata=md)
            client.emit(resp, args.json, "forgot " + ", ".join(resp.forgotten_ids))
        elif args.command == "entities":
            resp = gw.memory.FindEntities(g.FindEntitiesRequest(name=args.name), metadata=md)
            client.emit(resp, args.json, "\n".join(f"{e.id}  {e.name}" for e in resp.entities) or "no entities")
        elif args.command == "read":
            resp = gw.memory.Read(g.ReadRequest(id=args.id, include_history=args.history), metadata=md)
            client.emit(resp, args.json, _describe(resp.memory))
        elif args.command == "recall":
            resp = gw.memory.Recall(g.RecallRequest(
                query=args.question, purpose=PURPOSES[args.purpose], mode=MODES.get(args.mode, 0), top_k=args.top_k,
                skip_rerank=args.no_rerank, entity_ids=args.about_id, include_superseded=args.history), metadata=md)
            client.emit(resp, args.json, _recall_text(resp))
        elif args.command == "load":
            from cli.evaluate import load_file, report_row_errors
            count, errors = load_file(gw, args.workspace, args.file, PURPOSES[args.purpose])
            print(client.dump({"loaded": count}) if args.json else f"loaded {count} memories")
            if errors:
                report_row_errors(errors, count + len(errors))
                return 1
        elif args.command == "calibrate-floor":
            from cli.calibrate import run_calibrate
            return run_calibrate(gw, args)
        elif args.command == "eval":
            from cli.evaluate import run_eval
            return run_eval(gw, args)
        return 0
    except grpc.RpcError as exc:
        return client.fail(exc)
    finally:
        gw.close()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``recallatron`` console script."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        stream=sys.stderr)
    settings = settings_mod.load()
    if args.command == "serve":
        from cli.serve import run as serve
        return serve(args.service, settings)
    if args.command == "up":
        from cli.up import run as up
        return up(settings)
    logging.getLogger().setLevel(logging.WARNING)
    return run(args, settings)


if __name__ == "__main__":
    sys.exit(main())
