"""``recallatron export`` (a member's readable memories, and on request their own history, to a JSON
Lines file) and ``recallatron import`` (such a file into a workspace, with the operator credential).

The file format is ``cli.portability`` (docs/portability.md). Import reads and checks the whole file,
the member map and, through a validate-only ImportMemories call, that every member it will write as
belongs to the workspace, before it writes anything; then it sends the memories in batches of at
most 500 (sources and supersede targets first) under import keys ``export:<old id>`` (entities
``export:entity:<old id>``, history turns ``export:turn:<old id>``), so a re-run, or a run killed half
way and run again, writes nothing twice. The old -> new ids are written to a mapping file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import uuid
from collections import Counter
from pathlib import Path

import grpc
from google.rpc import code_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import command, options, portability, user_files
from cli.dataset import BATCH_BYTES
from cli.portability import ExportFileError
from servicekit import limits

EXPORT_PAGE_SIZE = 50  # memories with their revisions per ListMemories page: well inside a gRPC message
HISTORY_PAGE_SIZE = 200  # SearchHistory's most
PROBE_KEY = "validate:member:"  # import key of the validate-only items that probe the members


def export_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron export``."""
    ex = sub.add_parser("export", help="write every memory you can read to a JSON Lines file")
    ex.add_argument("--out", required=True, help="the file to write (replaced only once the export is whole)")
    ex.add_argument("--include-history", action="store_true", help="add your own history turns")
    options.gateway_options(ex, purpose=False)
    ex.set_defaults(handler=export)


def _pages(call, req, metadata):
    """Every page of a paginated call (AIP-158)."""
    while True:
        resp = call(req, metadata=metadata)
        yield resp
        if not resp.next_page_token:
            return
        req.page_token = resp.next_page_token


def readable_memories(gw: client.Gateway) -> dict[str, tuple[m.Memory, bool]]:
    """Every memory the caller can read, by id, each with whether it is superseded.

    Current and superseded memories are listed apart, so a memory superseded by one the caller cannot
    read is still known as superseded."""
    mems: dict[str, tuple[m.Memory, bool]] = {}
    for superseded, flt in ((False, m.SUPERSEDED_FILTER_CURRENT), (True, m.SUPERSEDED_FILTER_SUPERSEDED)):
        req = g.ListMemoriesRequest(superseded=flt, include_history=True, page_size=EXPORT_PAGE_SIZE)
        for page in _pages(gw.memory.ListMemories, req, gw.metadata):
            for mem in page.memories:
                mems.setdefault(mem.id, (mem, superseded))
    return mems


def memory_records(mems: dict[str, tuple[m.Memory, bool]]) -> list[dict]:
    """The export records of ``mems`` (``readable_memories``, or a union of them), oldest first.
    SystemExit when the workspace changed under the export (a link names a memory that is not in
    it): run it again."""
    supersedes = {mem.superseded_by_id: mem.id for mem, _ in mems.values() if mem.superseded_by_id}
    records = [portability.memory_record(mem, sup, supersedes.get(mem.id)) for mem, sup in mems.values()]
    for rec in records:
        missing = [x for x in [*rec["derived_from"], rec["superseded_by"]] if x and x not in mems]
        if missing:
            raise SystemExit(
                f"memory {rec['id']} links to {missing[0]}, which the export did not see: the workspace changed "
                "during the export; run it again"
            )
    records.sort(key=lambda r: (r["created_at"], r["id"]))
    return records


def collect(gw: client.Gateway, include_history: bool) -> tuple[list[dict], list[dict]]:
    """The memory records (oldest first) and history-turn records of the caller."""
    records = memory_records(readable_memories(gw))
    turns = []
    if include_history:
        req = g.SearchHistoryRequest(page_size=HISTORY_PAGE_SIZE)
        for page in _pages(gw.memory.SearchHistory, req, gw.metadata):
            turns += [portability.turn_record(e) for e in page.entries]
    return records, turns


@command.gateway_command
def export(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Export: writes the header, the memories and (with --include-history) the caller's history turns
    to --out, whole or not at all; prints what it wrote (one JSON object with --json)."""
    started = datetime.datetime.now(datetime.UTC)
    records, turns = collect(gw, args.include_history)
    head = portability.header(started, len(records), len(turns), args.include_history)
    out = Path(args.out)
    try:
        portability.write_export(out, head, [*records, *turns])
    except OSError as exc:
        print(f"{out}: cannot write it ({exc.strerror})", file=sys.stderr)
        return 1
    summary = {
        "file": str(out),
        "schema_version": portability.SCHEMA_VERSION,
        "memories": len(records),
        "superseded": sum(r["superseded"] for r in records),
        "history_turns": len(turns),
    }
    text = f"exported {len(records)} memories ({summary['superseded']} superseded)"
    text += f" and {len(turns)} history turns" if args.include_history else ""
    print(command.dump(summary) if args.json else f"{text} to {out}")
    return 0


# Import.


def import_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron import``."""
    im = sub.add_parser("import", help="load an export file into a workspace (operator)")
    im.add_argument("--file", required=True, help="a file written by `recallatron export`")
    im.add_argument("--workspace", required=True, help="the workspace to load it into")
    im.add_argument(
        "--member",
        action="append",
        default=[],
        type=old_new,
        metavar="OLD=NEW",
        help="write the memories of author OLD (a member id in the file) as member NEW of the workspace (repeatable)",
    )
    im.add_argument(
        "--default-member", type=member_id, metavar="NEW", help="the member for every author no --member names"
    )
    im.add_argument(
        "--history-member",
        type=member_id,
        metavar="NEW",
        help="owner of the file's history turns (default: --default-member)",
    )
    im.add_argument("--mapping", help="where to write the old -> new ids (default: FILE.mapping.json)")
    im.add_argument("--dry-run", action="store_true", help="check everything and print the counts; write nothing")
    options.gateway_options(im, operator=True)
    im.set_defaults(handler=import_file)


def member_id(text: str) -> str:
    """The ``--default-member`` / ``--history-member`` type: a member id (a UUID), normalised.
    argparse.ArgumentTypeError otherwise (a usage error, exit 2, as import-legacy's --member)."""
    try:
        return str(uuid.UUID(text.strip()))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a member id (a UUID)") from None


def old_new(text: str) -> tuple[str, str]:
    """The ``--member`` type: ``OLD=NEW``, two member ids (UUIDs), normalised. argparse.ArgumentTypeError
    naming the entry otherwise (a usage error, exit 2, as import-legacy's --member)."""
    old, sep, new = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"want OLD=NEW, got {text!r}")
    try:
        return member_id(old), member_id(new)
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None


def member_map(export: portability.Export, args: argparse.Namespace) -> tuple[dict[str, str], dict[str, str]]:
    """Old author id -> new member id for every author of the file (each --member OLD=NEW, else
    --default-member), and new member id -> the option that named it (malformed entries are refused
    by argparse, ``old_new``). ExportFileError for an OLD that authored nothing in the file or an
    author left unmapped; SystemExit(2) for an OLD named twice."""
    authors = Counter(rec["author"] for rec in export.memories.values())
    out: dict[str, str] = {}
    for old, new in args.member:
        entry = f"{old}={new}"
        if old in out:
            # A usage error (exit 2), as import-legacy's chat mapped twice.
            print(f"import: --member {entry}: {old} is mapped twice", file=sys.stderr)
            raise SystemExit(2)
        if old not in authors:
            raise ExportFileError(f"--member {entry}: {old} is not the author of any memory in {export.path}")
        out[old] = new
    default = args.default_member
    unmapped = [a for a in authors if a not in out]
    if unmapped and default is None:
        listed = ", ".join(f"{a} ({authors[a]} memories)" for a in unmapped[:5])
        raise ExportFileError(
            f"{export.path}: no member for author {listed}{' ...' if len(unmapped) > 5 else ''}: map each with "
            "--member OLD=NEW or give --default-member NEW"
        )
    named = {new: f"--member {old}={new}" for old, new in out.items()}
    if unmapped:
        named.setdefault(default, "--default-member")
    return out | {a: default for a in unmapped}, named


def history_owner(export: portability.Export, args: argparse.Namespace) -> str | None:
    """The member the file's history turns go to (None when it has none); ExportFileError when the
    file has turns and neither --history-member nor --default-member names one."""
    if not export.turns:
        return None
    chosen = args.history_member or args.default_member
    if not chosen:
        raise ExportFileError(
            f"{export.path}: the file holds {len(export.turns)} history turns: name their owner with "
            "--history-member NEW (history is owner-only evidence)"
        )
    return chosen


def probe_members(gw: client.Gateway, workspace: str, members: dict[str, str]) -> None:
    """A validate-only ImportMemories with one item per member (new id -> how the command named it):
    ExportFileError naming each one that is not a member of the workspace, or the workspace when
    there is none of that id. Writes nothing."""
    items = [
        m.ImportedMemory(
            import_key=PROBE_KEY + new,
            author_member_id=new,
            purpose=m.PURPOSE_CONVERSATION,
            audience=m.AUDIENCE_WORKSPACE,
            body="validate only",
        )
        for new in members
    ]
    try:
        resp = gw.admin.ImportMemories(
            g.ImportMemoriesRequest(workspace_id=workspace, memories=items, validate_only=True), metadata=gw.metadata
        )
    except grpc.RpcError as exc:
        if problem := command.workspace_problem(exc, workspace):
            raise ExportFileError(f"{problem}; nothing was imported") from None
        raise
    unknown = [
        f"{new} ({members[new]})"
        for new, r in zip(members, resp.memories, strict=True)
        if r.status == m.IMPORT_STATUS_FAILED and r.error.code == code_pb2.NOT_FOUND
    ]
    if unknown:
        raise ExportFileError(f"not a member of workspace {workspace}: {', '.join(unknown)}; nothing was imported")


def batches(export: portability.Export, order: list[str], authors: dict[str, str]) -> list[g.ImportMemoriesRequest]:
    """ImportMemories requests in ``order``: at most 500 memories, 500 entities and about 8 MiB each,
    each entity sent with the first batch that mentions it."""
    out: list[g.ImportMemoriesRequest] = []
    sent: set[str] = set()
    current = g.ImportMemoriesRequest()
    for mid in order:
        rec = export.memories[mid]
        item = portability.imported_memory(rec, authors)
        new_entities = {e["id"]: e["name"] for e in rec["entities"] if e["id"] not in sent}
        full = (
            len(current.memories) >= limits.MAX_REMEMBER_BATCH
            or len(current.entities) + len(new_entities) > limits.MAX_REMEMBER_BATCH
            or current.ByteSize() + item.ByteSize() > BATCH_BYTES
        )
        if full and current.memories:
            out.append(current)
            current = g.ImportMemoriesRequest()
        for eid, name in new_entities.items():
            current.entities.append(m.ImportedEntity(import_key=f"export:entity:{eid}", name=name))
            sent.add(eid)
        current.memories.append(item)
    if current.memories:
        out.append(current)
    return out


def _old_id(key: str) -> str:
    return key.rsplit(":", 1)[1]


@command.gateway_command
def import_file(gw: client.Gateway, args: argparse.Namespace) -> int:
    """Import: checks the file, the member map and the members, then writes the memories (and history
    turns) in batches; prints the counts (one JSON object with --json) and writes the id mapping.
    Exit 1 naming the file, line and problem for a bad file or map (or an unknown workspace, named),
    writing nothing; exit 2 for bad usage (a malformed --member, --default-member or --history-member,
    an OLD mapped twice); exit 1 after the run when an item failed (each named on stderr; a re-run
    retries only what is missing)."""
    path = Path(args.file)
    try:
        export = portability.read_export(path)
        order = portability.import_order(export)
        authors, named = member_map(export, args)
        owner = history_owner(export, args)
        if owner is not None:
            named.setdefault(owner, "--history-member" if args.history_member else "--default-member")
        if named:
            probe_members(gw, args.workspace, named)
    except ExportFileError as exc:
        print(exc, file=sys.stderr)
        return 1
    out = Path(args.mapping) if args.mapping else path.with_name(path.name + ".mapping.json")
    if not args.dry_run and (problem := user_files.unwritable(out)):
        print(f"{out}: cannot write the id mapping there ({problem}); nothing was imported", file=sys.stderr)
        return 1
    requests = batches(export, order, authors)
    counts = {"memories": Counter(), "entities": Counter(), "history_turns": Counter()}
    mapping: dict[str, dict[str, str]] = {"memories": {}, "entities": {}, "history_turns": {}}
    failures: list[str] = []
    status = {m.IMPORT_STATUS_CREATED: "created", m.IMPORT_STATUS_ALREADY_IMPORTED: "already_imported"}
    if args.dry_run:
        counts["memories"]["to_import"] = len(export.memories)
        counts["entities"]["to_import"] = len({e["id"] for r in export.memories.values() for e in r["entities"]})
        counts["history_turns"]["to_import"] = len(export.turns)
        return _report(args, counts, None, batches=len(requests))
    for req in requests:
        req.workspace_id = args.workspace
        resp = gw.admin.ImportMemories(req, metadata=gw.metadata)
        for kind, results in (("entities", resp.entities), ("memories", resp.memories)):
            for r in results:
                if r.status in status:
                    counts[kind][status[r.status]] += 1
                    mapping[kind][_old_id(r.import_key)] = r.id
                    continue
                counts[kind]["failed"] += 1
                old = _old_id(r.import_key)
                line = f"{path}:{export.lines[old]}: " if old in export.lines else f"{path}: "
                failures.append(f"{line}{kind[:-1]} {old}: {code_pb2.Code.Name(r.error.code)}: {r.error.message}")
    for start in range(0, len(export.turns), limits.MAX_HISTORY_BATCH):
        chunk = export.turns[start : start + limits.MAX_HISTORY_BATCH]
        turns = [portability.history_turn(t) for t in chunk]
        resp = gw.admin.ImportHistory(
            g.ImportHistoryRequest(workspace_id=args.workspace, member_id=owner, turns=turns), metadata=gw.metadata
        )
        for t, r in zip(chunk, resp.results, strict=True):
            if r.HasField("error"):
                counts["history_turns"]["failed"] += 1
                failures.append(
                    f"{path}:{export.lines[t['id']]}: history turn {t['id']}: "
                    f"{code_pb2.Code.Name(r.error.code)}: {r.error.message}"
                )
                continue
            counts["history_turns"]["already_imported" if r.replayed else "created"] += 1
            mapping["history_turns"][t["id"]] = r.turn_id
    orphans = sum(1 for r in export.memories.values() if r["superseded"] and not r["superseded_by"])
    if orphans:  # the store has no "superseded by nothing": the successor was not the exporter's to read
        print(
            f"note: {orphans} memories of the file are superseded by memories it does not hold (the exporter "
            "could not read them); they were imported as current",
            file=sys.stderr,
        )
    try:
        _write_mapping(out, path, args.workspace, authors, owner, mapping)
    except OSError as exc:  # checked before the import; a full disk can still refuse it
        failures.append(
            f"{out}: cannot write the id mapping ({exc.strerror}); the import is done: run it again with "
            "--mapping FILE to get the ids (nothing is written twice)"
        )
        out = None
    for failure in failures:
        print(failure, file=sys.stderr)
    _report(args, counts, out)
    return 1 if failures else 0


def _write_mapping(out: Path, path: Path, workspace: str, authors, owner, mapping) -> None:
    """The old -> new ids of this run (docs/portability.md, "The mapping file"), replaced whole,
    readable by its owner alone (``user_files.write_private``)."""
    doc = {
        "schema": "recallatron.import-mapping",
        "schema_version": 1,
        "file": str(path),
        "workspace_id": workspace,
        "members": authors,
        "history_member": owner,
        **mapping,
    }
    user_files.write_private(out, [json.dumps(doc, indent=2, sort_keys=True) + "\n"])


def _report(args: argparse.Namespace, counts: dict[str, Counter], mapping: Path | None, batches: int = 0) -> int:
    """Prints the counts per kind (and where the mapping went); returns 0."""
    doc = {kind: dict(c) for kind, c in counts.items()}
    if args.dry_run:
        doc["batches"] = batches
    else:
        doc["mapping"] = str(mapping) if mapping else None
    if args.json:
        print(command.dump(doc))
        return 0
    for kind, c in counts.items():
        print(f"{kind.replace('_', ' ')}: " + (", ".join(f"{n} {what}" for what, n in sorted(c.items())) or "none"))
    if args.dry_run:
        print(f"dry run: {batches} batches, nothing written")
    else:
        print(f"id mapping written to {mapping}" if mapping else "id mapping not written")
    return 0
