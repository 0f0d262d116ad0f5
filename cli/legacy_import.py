"""``recallatron import-legacy``: brings the old single-file store into a workspace (issue 10, item 2).

    recallatron import-legacy --workspace W --sqlite legacy.sqlite --graph graph.jsonl \\
        --member tg:100200300=<member id> [--member CHAT_ID=MEMBER_ID ...] [--dry-run] [--json] [--report FILE]

``cli.legacy_store`` reads the files and applies the rules (docs/portability.md); this module
checks the member map against the workspace, sends what the rules keep through the operator's batch
calls (AdminService.ImportMemories and ImportHistory, 500 items a call), writes the report and prints
the counts. Every item goes under an import key (``legacy:turn:<id>``, ``legacy:digest:<id>``,
``legacy:item:<id>``, ``legacy:entity:<id>``), so a re-run writes nothing twice and a run killed half
way, run again, ends as one clean run would.

Exit status: 0 when done; 1 when a file cannot be read (or is not what the option names: a folder,
a graph that is not JSON Lines or is cut short, a SQLite file whose tables are not plain tables or
that takes longer than --read-timeout to read), the workspace is unknown (named), the member map
names someone who is not a member of the workspace, or a call fails (the message says which,
nothing is written by a run that stops before its first write); 2 for bad usage (a malformed
--member, a chat mapped twice).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
from google.protobuf import timestamp_pb2
from google.rpc import code_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import command, options, user_files
from cli.legacy_store import READ_TIMEOUT_SECONDS, SECTIONS, Item, LegacyStoreError, Plan, read_store
from client import choices
from servicekit.limits import MAX_HISTORY_BATCH, MAX_IMPORT_BATCH


def member_pair(text: str) -> tuple[str, str]:
    """The ``--member`` type: ``CHAT_ID=MEMBER_ID`` (split at the last ``=``; the member id a UUID).
    argparse.ArgumentTypeError naming what is wrong (a usage error, exit 2)."""
    chat, sep, member = text.rpartition("=")
    if not sep or not chat.strip() or not member.strip():
        raise argparse.ArgumentTypeError(f"want CHAT_ID=MEMBER_ID, got {text!r}")
    try:
        uuid.UUID(member.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"the member id of {text!r} is not a UUID") from None
    return chat, member.strip()


def seconds(text: str) -> float:
    """The ``--read-timeout`` type: a positive, finite number of seconds (a usage error otherwise)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"want a positive number of seconds, got {text!r}")
    return value


def legacy_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron import-legacy``."""
    p = sub.add_parser(
        "import-legacy",
        help="import the old store (legacy.sqlite + graph.jsonl) into a workspace",
        description="Imports the old single-file store under the rules of a correct import: turns as "
        "owner-only history, digests as summaries, confirmed items as migrated memories with their "
        "supersede chains, mentions from the graph. Idempotent: re-runs write nothing twice.",
    )
    p.add_argument("--workspace", required=True, help="workspace UUID")
    p.add_argument("--sqlite", required=True, type=Path, help="the old store's SQLite file")
    p.add_argument("--graph", required=True, type=Path, help="the old store's graph.jsonl")
    p.add_argument(
        "--member",
        required=True,
        action="append",
        type=member_pair,
        metavar="CHAT_ID=MEMBER_ID",
        help="which member a chat belongs to (repeat per chat); chats in no map are skipped",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be imported and skipped, write the report, change nothing in the workspace",
    )
    p.add_argument("--report", type=Path, help="JSON Lines report (default: import-legacy-<UTC time>.jsonl here)")
    p.add_argument(
        "--read-timeout",
        type=seconds,
        default=READ_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"stop with an error when reading the SQLite file takes longer (default {READ_TIMEOUT_SECONDS:g})",
    )
    options.gateway_options(p, operator=True)
    p.set_defaults(handler=import_legacy)


def member_map(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """The chat -> member map of the --member pairs; SystemExit(2) for a chat mapped twice."""
    out: dict[str, str] = {}
    for chat, member in pairs:
        if out.get(chat, member) != member:
            print(f"import-legacy: --member: chat {chat!r} is mapped to two members", file=sys.stderr)
            raise SystemExit(2)
        out[chat] = member
    return out


def _ts(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def _chunks(seq: list, size: int) -> Iterator[list]:
    for i in range(0, len(seq), size):
        yield seq[i : i + size]


def check_members(gw: client.Gateway, workspace: str, mapping: dict[str, str]) -> str | None:
    """None when every mapped member is a member of the workspace, else the problem, named (an
    unknown workspace too): one validate-only ImportMemories (AIP-163) with a probe per member, so
    nothing is written."""
    members = sorted(set(mapping.values()))
    probes = [
        m.ImportedMemory(
            import_key=f"legacy:probe:{mid}",
            author_member_id=mid,
            body="member check",
            purpose=m.PURPOSE_CONVERSATION,
            audience=m.AUDIENCE_MEMBER,
        )
        for mid in members
    ]
    try:
        resp = gw.admin.ImportMemories(
            g.ImportMemoriesRequest(workspace_id=workspace, memories=probes, validate_only=True), metadata=gw.metadata
        )
    except grpc.RpcError as exc:
        if problem := command.workspace_problem(exc, workspace):
            return problem
        raise
    for mid, result in zip(members, resp.memories, strict=True):
        if result.status == m.IMPORT_STATUS_FAILED and result.error.code == code_pb2.NOT_FOUND:
            chats = ", ".join(sorted(c for c, x in mapping.items() if x == mid))
            return f"--member {chats}={mid}: {mid} is not a member of workspace {workspace}"
    return None


class Run:
    """One run's sending: what the store answered, counted, and the items it refused, reported."""

    def __init__(self, gw: client.Gateway, workspace: str, plan: Plan) -> None:
        self.gw, self.workspace, self.plan = gw, workspace, plan
        self.answered = {s: Counter() for s in (*SECTIONS, "entities", "mentions")}
        # The mentions each memory carries: written with it when the store answers CREATED, not
        # written when it answers ALREADY_IMPORTED (an imported key writes nothing, store_service/
        # imports.py) or refuses it. The plan's ``mentions`` counts what a correct import holds.
        self.mentions_of = {it.key: len(it.entity_keys) for it in plan.items}

    def _refused(self, section: str, source: str, key: str, error) -> None:
        counts = self.plan.counts
        if section == "entities":
            counts["entities"] -= 1
        else:
            counts["mentions"] -= self.mentions_of.get(key, 0)
            counts[section]["imported"] -= 1
            counts[section]["skipped"]["rejected"] = counts[section]["skipped"].get("rejected", 0) + 1
        legacy_id = key.split(":", 2)[-1]  # legacy:<kind>:<id>; rows have integer ids, entities any string
        self.plan.report.append(
            {
                "kind": "skipped",
                "section": section,
                "source": source,
                "source_id": legacy_id if section == "entities" else int(legacy_id),
                "reason": "rejected",
                "detail": f"{code_pb2.Code.Name(error.code)}: {error.message}",
            }
        )

    def _note(self, section: str, source: str, result) -> None:
        status = result.status
        self.answered[section][m.ImportStatus.Name(status)] += 1
        if mentions := self.mentions_of.get(result.import_key, 0):
            kind = {m.IMPORT_STATUS_CREATED: "written", m.IMPORT_STATUS_ALREADY_IMPORTED: "already_imported"}
            self.answered["mentions"][kind.get(status, "rejected")] += mentions
        if status == m.IMPORT_STATUS_FAILED:
            self._refused(section, source, result.import_key, result.error)

    def memories(self) -> None:
        """Entities, then digests and items (each after the item it supersedes), 500 a call."""
        entities = [m.ImportedEntity(import_key=k, name=n) for k, n in self.plan.entities]
        items = [self._memory(it) for it in self.plan.items]
        ent_chunks = list(_chunks(entities, MAX_IMPORT_BATCH)) or [[]]
        calls = [(chunk, []) for chunk in ent_chunks[:-1]]
        mem_chunks = list(_chunks(items, MAX_IMPORT_BATCH)) or [[]]
        calls.append((ent_chunks[-1], mem_chunks[0]))
        calls += [([], chunk) for chunk in mem_chunks[1:]]
        for ents, mems in calls:
            if not ents and not mems:
                continue
            resp = self.gw.admin.ImportMemories(
                g.ImportMemoriesRequest(workspace_id=self.workspace, entities=ents, memories=mems),
                metadata=self.gw.metadata,
            )
            for r in resp.entities:
                self._note("entities", "graph.jsonl", r)
            for r in resp.memories:
                digest = r.import_key.startswith("legacy:digest:")
                self._note("digests" if digest else "memories", "digest" if digest else "memory_item", r)

    @staticmethod
    def _memory(it: Item) -> m.ImportedMemory:
        return m.ImportedMemory(
            import_key=it.key,
            author_member_id=it.member_id,
            kind=choices.KINDS[it.kind],
            title=it.title,
            body=it.body,
            audience=m.AUDIENCE_MEMBER,
            purpose=m.PURPOSE_CONVERSATION,
            origin=m.ORIGIN_MIGRATED,
            confidence=it.confidence,
            reason=it.reason,
            created_at=_ts(it.created_at),
            entity_keys=it.entity_keys,
            relations=[m.ImportedRelation(subject_key=s, predicate=p, object_key=o) for s, p, o in it.relations],
            supersedes_key=it.supersedes_key,
        )

    def history(self) -> None:
        """Each member's turns, 500 a call, as that member's own history."""
        by_member: dict[str, list] = {}
        for t in self.plan.turns:
            by_member.setdefault(t.member_id, []).append(t)
        for member, turns in by_member.items():
            for chunk in _chunks(turns, MAX_HISTORY_BATCH):
                req = g.ImportHistoryRequest(
                    workspace_id=self.workspace,
                    member_id=member,
                    turns=[
                        g.HistoryTurn(
                            request_id=f"legacy:turn:{t.legacy_id}",
                            chat_id=t.chat_id,
                            role=t.role,
                            text=t.text,
                            occurred_at=_ts(t.occurred_at),
                            session_id=t.session_id,
                        )
                        for t in chunk
                    ],
                )
                resp = self.gw.admin.ImportHistory(req, metadata=self.gw.metadata)
                for t, r in zip(chunk, resp.results, strict=True):
                    if r.HasField("error"):
                        self.answered["history"]["IMPORT_STATUS_FAILED"] += 1
                        self._refused("history", "conversation", f"legacy:turn:{t.legacy_id}", r.error)
                    else:
                        name = "IMPORT_STATUS_ALREADY_IMPORTED" if r.replayed else "IMPORT_STATUS_CREATED"
                        self.answered["history"][name] += 1


def write_report(path: Path, plan: Plan, summary: dict) -> None:
    """The report: one JSON object a line, every skipped row and chain fault, then the summary;
    written whole or not at all, readable by its owner alone (``user_files.write_private``)."""
    rows = (*plan.report, {"kind": "summary", **summary})
    user_files.write_private(path, (json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def text_summary(counts: dict, answered: dict | None, dry_run: bool) -> str:
    """The counts for people, one line per part."""

    def reasons(skipped: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(skipped.items())) or "none"

    verb = "would import" if dry_run else "imported"
    lines = []
    for section in SECTIONS:
        c = counts[section]
        line = f"{section}: {verb} {c['imported']}"
        if answered is not None:
            a = answered[section]
            line += f" ({a['IMPORT_STATUS_CREATED']} new, {a['IMPORT_STATUS_ALREADY_IMPORTED']} already imported)"
        lines.append(f"{line}; skipped {sum(c['skipped'].values())}: {reasons(c['skipped'])}")
    lines.append(
        f"supersede links: {counts['supersede_links']}; chain faults reported: {counts['chain_faults_reported']}"
    )
    mentions = f"{counts['mentions']}"
    if answered is not None:
        a = answered["mentions"]
        mentions += (
            f" ({a['written']} written, {a['already_imported']} not written: their memories were already imported)"
        )
    lines.append(
        f"entities: {counts['entities']}; mentions: {mentions}; relations: {counts['relations']}; "
        f"entity edges not imported: {counts['entity_edges_not_imported']}; "
        f"graph lines skipped: {reasons(counts['graph_lines_skipped'])}"
    )
    return "\n".join(lines)


@command.gateway_command
def import_legacy(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Reads the old store, checks the member map, imports (unless --dry-run), reports, prints counts."""
    mapping = member_map(args.member)
    try:
        plan = read_store(args.sqlite, args.graph, mapping, args.read_timeout)
    except LegacyStoreError as exc:
        print(f"import-legacy: {exc}", file=sys.stderr)
        return 1
    problem = check_members(gw, args.workspace, mapping)
    report = args.report or Path(f"import-legacy-{datetime.datetime.now(datetime.UTC):%Y%m%dT%H%M%SZ}.jsonl")
    if not problem and (unwritable := user_files.unwritable(report)):
        problem = f"--report {report}: cannot write it ({unwritable})"
    if problem:
        print(f"import-legacy: {problem}; nothing was written", file=sys.stderr)
        return 1
    run = None
    if not args.dry_run:
        run = Run(gw, args.workspace, plan)
        try:
            run.memories()
            run.history()
        except grpc.RpcError as exc:
            # A run stopped by a failed call still reports what the store had answered; a re-run
            # goes on from there (import keys).
            stopped = f"{exc.code().name}: {exc.details()}"
            answered = {k: dict(v) for k, v in run.answered.items()}
            write_report(
                report, plan, {"dry_run": False, "counts": plan.counts, "answered": answered, "stopped": stopped}
            )
            print(f"import-legacy: stopped part way; run it again to finish. report: {report}", file=sys.stderr)
            raise
    answered = {k: dict(v) for k, v in run.answered.items()} if run else None
    try:
        write_report(report, plan, {"dry_run": args.dry_run, "counts": plan.counts, "answered": answered})
    except OSError as exc:  # checked writable before the run; a full disk can still refuse it
        print(f"import-legacy: --report {report}: cannot write it ({exc.strerror})", file=sys.stderr)
        report = None
    print(
        # The keys and nesting of expected.json (a contract), and what the store answered (None for
        # a dry run), as in the report's summary line.
        json.dumps({**plan.counts, "answered": answered}, indent=2, sort_keys=True)
        if args.json
        else text_summary(plan.counts, run and run.answered, args.dry_run)
    )
    if report is None:
        return 1
    print(f"report: {report}", file=sys.stderr)
    return 0
