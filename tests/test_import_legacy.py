"""``recallatron import-legacy`` end to end, against the in-process stack (real PostgreSQL, real
MiniLM): counts against the project's own maker (tests/legacy_maker.py) and against the expected.json
of the old store's generator (tools/make_legacy_store.py), the report, dry runs, re-runs and a run
killed half way, who sees what afterwards, supersede chains, forget reaching derivations, and bad
input."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import pytest
from cli_runner import recallatron
from legacy_maker import NAMES, OWNER_CHAT, SECOND_CHAT, UNIQUE_WORD, make_store
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

import client
from cli import legacy_import
from cli.legacy_store import read_store
from tools.make_legacy_store import SCHEMA, SUMMARY_KEYS, counts_of

ROOT = Path(__file__).resolve().parent.parent
GENERATOR_CHATS = ("tg:100200300", "tg:100200301")  # the mapped chats of tools/make_legacy_store.py


def operator_argv(stack, *args: str) -> list[str]:
    """The arguments of ``recallatron`` run as an operator does, against the stack's gateway."""
    return [*args, "--gateway", f"127.0.0.1:{stack.gateway.port}", "--operator-token", stack.operator_token]


def command(stack, *args: str) -> list[str]:
    """``operator_argv`` as a process's argv, for the tests that need a process of its own (one to
    kill half way, two at once, a bounded wait on a read that may never end)."""
    return [sys.executable, "-m", "cli.main", *operator_argv(stack, *args)]


ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{ROOT / 'gen'}"}


def cli(stack, *args: str) -> tuple[int, str, str]:
    """Runs ``recallatron`` in this process (tests/cli_runner.py); (exit status, stdout, stderr)."""
    out = recallatron(*operator_argv(stack, *args))
    return out.returncode, out.stdout, out.stderr


def by_role(got: dict, owner: str, second: str) -> dict:
    """``stored`` with each member id named by role, to compare workspaces (member ids differ)."""
    names = {owner: "owner", second: "second"}
    out = dict(got)
    out["memories"] = [(*r[:8], names[r[8]], *r[9:]) for r in got["memories"]]
    out["turns"] = [(r[0], names[r[1]], *r[2:]) for r in got["turns"]]
    return out


def import_args(ws: str, sqlite: Path, graph: Path, members: dict[str, str], report: Path, *extra: str) -> list[str]:
    args = ["import-legacy", "--workspace", ws, "--sqlite", str(sqlite), "--graph", str(graph), "--report", str(report)]
    for chat, member in members.items():
        args += ["--member", f"{chat}={member}"]
    return [*args, *extra]


def stored(stack, ws: str) -> dict:
    """Everything an import writes, by import key / request id, comparable across workspaces."""
    with stack.db(ws) as conn:
        keys = dict(conn.execute("SELECT id, import_key FROM memory WHERE import_key IS NOT NULL").fetchall())
        memories = sorted(
            (r[0], r[1], r[2], r[3], r[4], r[5], r[6], keys.get(r[7]), r[8], r[9], r[10])
            for r in conn.execute(
                """SELECT import_key, kind, title, body, confidence, reason, origin, superseded_by_id,
                          audience_member_id::text, created_at, revision FROM memory WHERE import_key IS NOT NULL"""
            )
        )
        mentions = sorted(
            conn.execute(
                """SELECT m.import_key, e.import_key, e.name FROM memory_link l JOIN memory m ON m.id = l.memory_id
                     JOIN entity e ON e.id = l.target_entity_id WHERE l.link_type = 'about'"""
            ).fetchall()
        )
        entities = sorted(conn.execute("SELECT import_key, name FROM entity").fetchall())
        turns = sorted(
            conn.execute(
                """SELECT request_id, owner_member_id::text, chat_id, role, text, occurred_at, session_id, session
                     FROM history_turn"""
            ).fetchall()
        )
        jobs = (
            conn.execute("SELECT count(*) FROM embedding_job").fetchone()[0]
            + conn.execute("SELECT count(*) FROM memory_embedding").fetchone()[0]
        )
    return {"memories": memories, "mentions": mentions, "entities": entities, "turns": turns, "vectors": jobs}


def members_for(stack, ws: str, chats=(OWNER_CHAT, SECOND_CHAT)):
    owner, second = stack.member(ws), stack.member(ws)
    return owner, second, {chats[0]: owner.id, chats[1]: second.id}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return make_store(tmp_path_factory.mktemp("legacy"), seed=4, turns=160, items=45)


@pytest.fixture(scope="module")
def imported(stack, made, tmp_path_factory):
    """One workspace with the maker's store imported once."""
    ws = stack.workspace("legacy import")
    owner, second, members = members_for(stack, ws)
    report = tmp_path_factory.mktemp("report") / "report.jsonl"
    status, _, err = cli(stack, *import_args(ws, made.sqlite, made.graph, members, report, "--json"))
    assert status == 0, err
    return ws, owner, second, members, report


def memory_id(stack, ws: str, key: str) -> str:
    with stack.db(ws) as conn:
        return str(conn.execute("SELECT id FROM memory WHERE import_key = %s", (key,)).fetchone()[0])


def test_counts_match_the_makers_and_the_report_lists_every_skip(stack, made, imported, tmp_path):
    ws, _, _, members, report = imported
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    summary = rows[-1]
    assert summary["kind"] == "summary" and not summary["dry_run"]
    assert counts_of(summary["counts"]) == counts_of(made.expected)
    assert summary["counts"]["member_map"] == members
    skips = [r for r in rows if r["kind"] == "skipped"]
    for section in ("history", "memories", "digests"):
        by_reason = {}
        for r in skips:
            if r["section"] == section:
                by_reason[r["reason"]] = by_reason.get(r["reason"], 0) + 1
        assert by_reason == made.expected[section]["skipped"], section
    assert all(isinstance(r["source_id"], int) for r in skips)
    faults = [r for r in rows if r["kind"] == "chain_fault"]
    assert sorted(r["reason"] for r in faults) == [
        "cross_owner",
        "cycle",
        "merge",
        "missing_target",
        "target_not_imported",
    ]
    # What was written is what the counts say.
    got = stored(stack, ws)
    e = made.expected
    assert len(got["memories"]) == e["memories"]["imported"] + e["digests"]["imported"]
    assert len(got["turns"]) == e["history"]["imported"]
    assert len(got["entities"]) == e["entities"] and len(got["mentions"]) == e["mentions"]
    assert sum(1 for r in got["memories"] if r[7]) == e["supersede_links"]
    assert {r[6] for r in got["memories"]} == {"migrated"} and {r[1] for r in got["memories"]} >= {"summary", "fact"}
    # No old vector came across: every vector is queued from the text, in this embedding space.
    assert got["vectors"] == len(got["memories"]) - e["supersede_links"]
    # A re-run writes nothing and prints the same counts.
    status, out, _ = cli(stack, *import_args(ws, made.sqlite, made.graph, members, tmp_path / "r2.jsonl", "--json"))
    assert status == 0 and counts_of(json.loads(out)) == counts_of(made.expected)
    assert stored(stack, ws) == got
    again = json.loads((tmp_path / "r2.jsonl").read_text().splitlines()[-1])["answered"]
    assert again["memories"] == {"IMPORT_STATUS_ALREADY_IMPORTED": e["memories"]["imported"]}
    assert again["history"] == {"IMPORT_STATUS_ALREADY_IMPORTED": e["history"]["imported"]}
    # The re-run wrote no mention and says so, in --json and in the report alike.
    assert again["mentions"] == {"already_imported": e["mentions"]} == json.loads(out)["answered"]["mentions"]
    assert summary["answered"]["mentions"] == {"written": e["mentions"]}
    status, out, _ = cli(stack, *import_args(ws, made.sqlite, made.graph, members, tmp_path / "r3.jsonl"))
    assert status == 0 and f"mentions: {e['mentions']} (0 written, {e['mentions']} not written: " in out, out


def test_the_owner_finds_a_migrated_memory_and_the_other_member_sees_nothing_of_the_owners(stack, made, imported):
    ws, owner, second, _, _ = imported
    stack.wait_backlog_empty()
    target = memory_id(stack, ws, f"legacy:item:{made.owner_item}")
    got = owner.recall(f"{UNIQUE_WORD} gate code")
    assert got.items[0].memory.id == target
    first = got.items[0].memory
    assert first.origin == m.ORIGIN_MIGRATED and first.reason in ("Explicit user statement", "Said twice")
    assert first.audience_member_id == owner.id
    # The second member: no memory, entity, turn or count of the owner's.
    with stack.db(ws) as conn:
        owners = {
            str(r[0]) for r in conn.execute("SELECT id FROM memory WHERE created_by = %s", (uuid.UUID(owner.id),))
        }
    for query in (f"{UNIQUE_WORD} gate code", "ledger kettle orchard", "Session digest", "Ada Quist"):
        for mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID):
            items = second.recall(query, mode=mode, top_k=200).items
            assert not {i.memory.id for i in items} & owners
            assert all(i.memory.created_by == second.id for i in items)
    for mid in list(owners)[:50]:
        with pytest.raises(grpc.RpcError) as err:
            second.read(mid)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
    found = stack.memory.SearchHistory(g.SearchHistoryRequest(query=made.owner_turn_word), metadata=second.md())
    assert not found.entries
    mine = stack.memory.SearchHistory(g.SearchHistoryRequest(query=made.owner_turn_word), metadata=owner.md())
    assert mine.entries and all(e.turn.chat_id == OWNER_CHAT for e in mine.entries)
    # Entities: the second member sees only those its own memories are about.
    with stack.db(ws) as conn:
        its_own = {
            str(r[0])
            for r in conn.execute(
                """SELECT l.target_entity_id FROM memory_link l JOIN memory m ON m.id = l.memory_id
                    WHERE l.link_type = 'about' AND m.audience_member_id = %s""",
                (uuid.UUID(second.id),),
            )
        }
    for name in NAMES:
        seen = stack.memory.FindEntities(g.FindEntitiesRequest(name=name), metadata=second.md()).entities
        assert {e.id for e in seen} <= its_own, name


def test_a_supersede_chain_reads_back_in_order(stack, made, imported):
    ws, owner, _, _, _ = imported
    ids = [memory_id(stack, ws, f"legacy:item:{i}") for i in made.chain]
    chain, at = [], ids[0]
    while at:
        chain.append(at)
        at = owner.read(at).superseded_by_id
    assert chain == ids
    hits = {i.memory.id for i in owner.recall("ledger kettle orchard lantern", top_k=200).items}
    assert not hits & set(ids[:2])  # superseded memories leave recall


def test_forget_of_a_migrated_memory_reaches_its_derivations(stack, made, imported):
    ws, owner, _, _, _ = imported
    source = memory_id(stack, ws, f"legacy:item:{made.owner_item}")
    derived = stack.memory.Derive(
        g.DeriveRequest(source_ids=[source], kind=m.KIND_NOTE, body="the gate code opens the side door"),
        metadata=owner.md(),
    ).memory
    again = stack.memory.Derive(
        g.DeriveRequest(source_ids=[derived.id], kind=m.KIND_NOTE, body="side door: use the code"), metadata=owner.md()
    ).memory
    gone = stack.memory.Forget(g.ForgetRequest(id=source, reason="test"), metadata=owner.md()).forgotten_ids
    assert set(gone) == {source, derived.id, again.id}
    with stack.db(ws) as conn:
        row = conn.execute("SELECT body, reason, import_key FROM memory WHERE id = %s", (uuid.UUID(source),)).fetchone()
    assert row == ("", None, f"legacy:item:{made.owner_item}")  # erased; the key stays, so a re-run skips it


def test_dry_run_counts_and_writes_nothing(stack, made, tmp_path):
    ws = stack.workspace("legacy dry run")
    _, _, members = members_for(stack, ws)
    status, out, err = cli(
        stack, *import_args(ws, made.sqlite, made.graph, members, tmp_path / "d.jsonl", "--dry-run", "--json")
    )
    assert status == 0 and counts_of(json.loads(out)) == counts_of(made.expected), err
    rows = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]  # a dry run reports too
    assert (
        rows[-1]["dry_run"]
        and rows[-1]["answered"] is None
        and counts_of(rows[-1]["counts"]) == counts_of(made.expected)
    )
    assert sum(r["kind"] == "skipped" for r in rows) == sum(
        sum(made.expected[s]["skipped"].values()) for s in ("history", "memories", "digests")
    ) + sum(made.expected["graph_lines_skipped"].values())
    status, out, _ = cli(stack, *import_args(ws, made.sqlite, made.graph, members, tmp_path / "d.jsonl", "--dry-run"))
    assert status == 0 and out.startswith(f"history: would import {made.expected['history']['imported']}; skipped")
    assert stored(stack, ws) == {"memories": [], "mentions": [], "entities": [], "turns": [], "vectors": 0}


class Killed(Exception):
    """Stands for the process dying between two calls."""


class DyingAdmin:
    """The admin stub of a run that dies after ``calls`` calls (a stand-in for kill -9: the store
    commits each call whole or not at all, so a death between calls is the case to cover)."""

    def __init__(self, admin, calls: int) -> None:
        self.admin, self.left = admin, calls

    def __getattr__(self, name):
        real = getattr(self.admin, name)

        def call(*args, **kwargs):
            if self.left == 0:
                raise Killed
            self.left -= 1
            return real(*args, **kwargs)

        return call


@pytest.mark.parametrize("calls", [1, 2])  # of 3: the memories, the owner's turns, the second's
def test_a_run_killed_half_way_and_run_again_ends_as_one_clean_run(stack, made, tmp_path, calls):
    clean, broken = stack.workspace("clean"), stack.workspace("broken")
    results = {}
    for ws in (clean, broken):
        owner, second, members = members_for(stack, ws)
        if ws == broken:
            gw = client.Gateway(f"127.0.0.1:{stack.gateway.port}", stack.operator_token)
            plan = read_store(made.sqlite, made.graph, members)
            run = legacy_import.Run(gw, ws, plan)
            run.gw.admin = DyingAdmin(gw.admin, calls)
            with pytest.raises(Killed):
                run.memories()
                run.history()
            gw.close()
        status, out, _ = cli(stack, *import_args(ws, made.sqlite, made.graph, members, tmp_path / "k.jsonl", "--json"))
        assert status == 0 and counts_of(json.loads(out)) == counts_of(made.expected)
        results[ws] = by_role(stored(stack, ws), owner.id, second.id)
    assert results[clean] == results[broken]


@pytest.fixture(scope="module")
def bigger(tmp_path_factory):
    """A store whose import takes several calls of each kind (the owner's 700 turns: two)."""
    return make_store(tmp_path_factory.mktemp("bigger"), seed=9, turns=1400, items=60)


def test_a_process_killed_mid_run_and_run_again_ends_as_one_clean_run(stack, bigger, tmp_path):
    """kill -9 of the command once the store holds some of its turns, then a re-run."""
    made = bigger
    clean, killed = stack.workspace("clean run"), stack.workspace("killed run")
    results = {}
    for ws in (clean, killed):
        owner, second, members = members_for(stack, ws)
        args = import_args(ws, made.sqlite, made.graph, members, tmp_path / "k.jsonl", "--json")
        if ws == killed:
            proc = subprocess.Popen(
                command(stack, *args), cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            turns = 0
            while proc.poll() is None and turns == 0:
                with stack.db(ws) as conn:
                    turns = conn.execute("SELECT count(*) FROM history_turn").fetchone()[0]
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            # The memories' calls come first, then 500 turns a call: it died with turns to send.
            assert 0 < turns < made.expected["history"]["imported"], turns
        status, out, err = cli(stack, *args)
        assert status == 0 and counts_of(json.loads(out)) == counts_of(made.expected), err
        results[ws] = by_role(stored(stack, ws), owner.id, second.id)
    assert results[clean] == results[killed]


def test_two_runs_at_once_end_as_one_clean_run(stack, bigger, tmp_path):
    made = bigger
    clean, twice = stack.workspace("one run"), stack.workspace("two runs at once")
    results = {}
    for ws in (clean, twice):
        owner, second, members = members_for(stack, ws)
        runs = 2 if ws == twice else 1
        procs = [
            subprocess.Popen(
                command(stack, *import_args(ws, made.sqlite, made.graph, members, tmp_path / f"c{i}.jsonl", "--json")),
                cwd=ROOT,
                env=ENV,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(runs)
        ]
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0 and counts_of(json.loads(out)) == counts_of(made.expected), err
        results[ws] = by_role(stored(stack, ws), owner.id, second.id)
    assert results[clean] == results[twice]
    # Between them the two runs created each item once: the other answered it already imported.
    answered = [json.loads((tmp_path / f"c{i}.jsonl").read_text().splitlines()[-1])["answered"] for i in range(2)]
    for section in ("history", "memories", "digests", "entities"):
        created = sum(a[section].get("IMPORT_STATUS_CREATED", 0) for a in answered)
        assert created == (made.expected["entities"] if section == "entities" else made.expected[section]["imported"])


class RpcFailure(grpc.RpcError):
    """What a call raises when the gateway goes away (grpc's own error type, as the stub raises)."""

    def code(self):
        return grpc.StatusCode.UNAVAILABLE

    def details(self):
        return "failed to connect to all addresses"


def test_a_run_stopped_by_a_failed_call_still_writes_its_report(stack, made, tmp_path):
    ws = stack.workspace("stopped run")
    _, _, members = members_for(stack, ws)
    report = tmp_path / "stopped.jsonl"
    parser = argparse.ArgumentParser()
    legacy_import.legacy_parser(parser.add_subparsers())  # the command's own options and defaults
    args = parser.parse_args(import_args(ws, made.sqlite, made.graph, members, report, "--json"))
    gw = client.Gateway(f"127.0.0.1:{stack.gateway.port}", stack.operator_token)
    admin = gw.admin
    calls = []

    class FailsAfterTheMemories:
        def __getattr__(self, name):
            calls.append(name)
            if name == "ImportHistory":
                raise RpcFailure()
            return getattr(admin, name)

    gw.admin = FailsAfterTheMemories()
    try:
        with pytest.raises(RpcFailure):
            legacy_import.import_legacy.__wrapped__(gw, args)
    finally:
        gw.close()
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    summary = rows[-1]
    assert summary["kind"] == "summary" and summary["stopped"] == "UNAVAILABLE: failed to connect to all addresses"
    assert summary["answered"]["memories"] == {"IMPORT_STATUS_CREATED": made.expected["memories"]["imported"]}
    assert summary["answered"]["history"] == {}
    assert sum(r["kind"] == "skipped" for r in rows) == sum(
        sum(made.expected[s]["skipped"].values()) for s in ("history", "memories", "digests")
    ) + sum(made.expected["graph_lines_skipped"].values())


def test_the_generators_stores_import_with_the_counts_it_wrote(stack, tmp_path):
    """The old store's generator (tools/make_legacy_store.py, the import's oracle), run as
    docs/legacy_format.md tells: several seeds and sizes, each store imported by ``recallatron
    import-legacy`` with exactly the counts of its expected.json and of the line it prints, and what
    was written is what they say. ``--into-the-past`` moves the rows before today (they are dated
    from 2026-03-02 on, the larger stores past today, and the import refuses times ahead of the clock:
    a test of its own, below). The default store's counts are those docs/portability.md and
    bench/RESULTS.md quote."""
    for seed, size in [(7, []), (3, ["--turns", "600", "--items", "90"]), (12, ["--turns", "2500", "--items", "300"])]:
        out_dir = tmp_path / f"generated-{seed}"
        generate = [sys.executable, "-m", "tools.make_legacy_store", str(out_dir), "--seed", str(seed), *size]
        made = subprocess.run(
            [*generate, "--into-the-past"], cwd=ROOT, env=ENV, check=True, capture_output=True, text=True
        )
        expected = json.loads((out_dir / "expected.json").read_text())
        said = json.loads(made.stdout)
        assert said == {k: expected[k] for k in SUMMARY_KEYS}
        ws = stack.workspace(f"generated {seed}")
        _, _, members = members_for(stack, ws, GENERATOR_CHATS)
        assert set(expected["member_map"]) == set(members)
        argv = import_args(
            ws, out_dir / "legacy.sqlite", out_dir / "graph.jsonl", members, tmp_path / f"s{seed}.jsonl", "--json"
        )
        status, out, err = cli(stack, *argv)
        assert status == 0, err
        assert counts_of(json.loads(out)) == counts_of(expected), seed
        got = stored(stack, ws)
        assert len(got["turns"]) == expected["history"]["imported"]
        assert len(got["memories"]) == expected["memories"]["imported"] + expected["digests"]["imported"]
        assert len(got["entities"]) == expected["entities"] and len(got["mentions"]) == expected["mentions"]
        assert sum(1 for r in got["memories"] if r[7]) == expected["supersede_links"]
        if not size:
            assert (expected["history"]["imported"], expected["digests"]["imported"]) == (3878, 580)
            assert (expected["memories"]["imported"], expected["entities"], expected["mentions"]) == (511, 21, 461)
            assert (expected["supersede_links"], expected["chain_faults_reported"]) == (62, 2)


def test_bad_input_is_a_clear_error_and_nothing_is_written(stack, made, tmp_path):
    ws = stack.workspace("legacy bad input")
    owner, _, members = members_for(stack, ws)
    not_sqlite = tmp_path / "notes.sqlite"
    not_sqlite.write_text("these are notes, not a database\n" * 200)
    empty_db = tmp_path / "empty.sqlite"
    sqlite3.connect(empty_db).execute("CREATE TABLE other (x)").connection.close()
    stranger = str(uuid.uuid4())
    data = made.sqlite.read_bytes()
    half, short = tmp_path / "half.sqlite", tmp_path / "short.sqlite"
    half.write_bytes(data[: len(data) // 2])  # an interrupted copy
    short.write_bytes(data[:-1])  # one byte short: SQLite itself still reads it
    text = made.graph.read_text()
    cut = tmp_path / "cut.jsonl"
    cut.write_text(text[: text.rstrip().rfind("\n") + 12])  # the last line cut after 11 characters
    lines = len(cut.read_text().splitlines())
    twice = tmp_path / "twice.sqlite"
    db = sqlite3.connect(twice)
    db.executescript(SCHEMA.replace("id INTEGER PRIMARY KEY AUTOINCREMENT", "id INTEGER"))
    db.execute("INSERT INTO conversation VALUES (7, 'tg:1', 'user', 'a', '2026-01-01', NULL)")
    db.execute("INSERT INTO conversation VALUES (7, 'tg:1', 'user', 'b', '2026-01-01', NULL)")
    db.commit()
    db.close()
    lines_total = len([x for x in text.splitlines() if x.strip()])
    mostly_bad = tmp_path / "mostly_bad.jsonl"  # just over half of its lines are not JSON
    good_lines = [x for x in text.splitlines() if x.strip()][: lines_total // 2]
    mostly_bad.write_text("\n".join(good_lines + ["not json"] * (len(good_lines) + 1)) + "\n")
    cases = [
        # The SQLite file given as the graph: refused, not imported with every line skipped.
        (dict(graph=made.sqlite), 1, f"{made.sqlite}: not a JSON Lines graph: "),
        (dict(graph=mostly_bad), 1, f"{len(good_lines) + 1} of its {2 * len(good_lines) + 1} lines are not JSON"),
        (dict(graph=tmp_path), 1, f"{tmp_path}: is a folder, not a file"),
        (dict(sqlite=tmp_path / "missing.sqlite"), 1, "missing.sqlite: no such file"),
        (dict(sqlite=half), 1, "half.sqlite: not a SQLite database, or a damaged one"),
        (dict(sqlite=short), 1, f"short.sqlite: truncated: {len(data) - 1} bytes is not the"),
        (dict(sqlite=twice), 1, "twice.sqlite: table 'conversation': its ids are not unique integers"),
        (dict(graph=cut), 1, f"cut.jsonl: line {lines} is cut short"),
        (dict(graph=tmp_path / "missing.jsonl"), 1, "missing.jsonl: no such file"),
        (dict(sqlite=not_sqlite), 1, "notes.sqlite: not a SQLite database"),
        (dict(sqlite=tmp_path), 1, f"{tmp_path}: is a folder, not a file"),
        (dict(sqlite=empty_db), 1, "no table 'conversation'"),
        (dict(members={OWNER_CHAT: owner.id, SECOND_CHAT: stranger}), 1, f"{stranger} is not a member of workspace"),
        (dict(ws=(unknown := str(uuid.uuid4()))), 1, f"--workspace {unknown}: no such workspace (NOT_FOUND"),
        (dict(ws="not-a-uuid"), 1, "--workspace not-a-uuid: no such workspace (NOT_FOUND"),
    ]
    for change, want, message in cases:
        args = dict(ws=ws, sqlite=made.sqlite, graph=made.graph, members=members) | change
        status, out, err = cli(
            stack,
            *import_args(args["ws"], args["sqlite"], args["graph"], args["members"], tmp_path / "b.jsonl"),
        )
        assert (status, out) == (want, "") and message in err, (change, err)
    for bad in ("tg:1001", f"tg:1001={owner.id[:-1]}", f"={owner.id}", "tg:1001="):
        argv = import_args(ws, made.sqlite, made.graph, {}, tmp_path / "b.jsonl") + ["--member", bad]
        status, out, err = cli(stack, *argv)
        assert status == 2 and "--member" in err and repr(bad) in err, (bad, err)
    twice = import_args(ws, made.sqlite, made.graph, {}, tmp_path / "b.jsonl")
    twice += ["--member", f"{OWNER_CHAT}={owner.id}", "--member", f"{OWNER_CHAT}={stranger}"]
    status, _, err = cli(stack, *twice)
    assert status == 2 and "mapped to two members" in err
    # A report that cannot be written is found out before the run, not after it.
    for report, why in ((tmp_path / "no" / "r.jsonl", "no such folder"), (tmp_path, "it is a folder")):
        status, out, err = cli(stack, *import_args(ws, made.sqlite, made.graph, members, report))
        assert (status, out) == (1, "") and f"--report {report}: cannot write it ({why}" in err, err
    assert stored(stack, ws) == {"memories": [], "mentions": [], "entities": [], "turns": [], "vectors": 0}
    assert not (tmp_path / "b.jsonl").exists()  # no report of a run that did not start


def odd_store(folder: Path) -> tuple[Path, Path]:
    """A store of rows real old data holds at the edges: unicode, NUL and invisible characters,
    text that is not UTF-8 or JSON escaping half a surrogate pair, a BLOB of text, the body limit
    exactly, years 1 and 9999 (the last second of 9999 is ahead of the clock), an offset past them, a
    self-superseding item, an item without a label key, entity ids with NUL or of no string."""
    folder.mkdir(parents=True, exist_ok=True)
    path, graph = folder / "odd.sqlite", folder / "odd.jsonl"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    turn = "INSERT INTO conversation (id, chat_id, role, content, ts, session_id) VALUES (?, ?, 'user', ?, ?, ?)"
    for row in [
        (1, OWNER_CHAT, "héllo 😀 مرحبا e\u0301 \u200b", "2026-01-01 00:00:00", None),  # kept as it is
        (2, OWNER_CHAT, "\u200b\u2060 ", "2026-01-01 00:00:01", None),  # invisible only: empty
        (3, OWNER_CHAT, "x" * 65_536, "2026-01-01 00:00:02", None),  # the limit exactly: kept
        (4, OWNER_CHAT, "é" * 32_768, "2026-01-01 00:00:03", "s\x00one"),  # 65,536 bytes; NUL in the session
        (5, OWNER_CHAT, "é" * 32_768 + "x", "2026-01-01 00:00:04", None),  # a byte over: too_long
        (6, OWNER_CHAT, "the last second", "9999-12-31 23:59:59", None),  # future_timestamp
        (7, OWNER_CHAT, "the first second", "0001-01-01 00:00:00", None),
        (8, OWNER_CHAT, "before year 1 in UTC", "0001-01-01T00:30:00+01:00", None),  # bad_timestamp
        (9, OWNER_CHAT, b"stored as a BLOB", "2026-01-01 00:00:05", None),  # UTF-8 bytes: text
        (10, OWNER_CHAT, b"caf\xe9 in Latin-1", "2026-01-01 00:00:06", None),  # not UTF-8: bad_encoding
    ]:
        db.execute(turn, row)
    # A TEXT cell that is not UTF-8 (by default sqlite3 fails the whole read on one).
    db.execute("INSERT INTO conversation VALUES (11, ?, 'user', CAST(X'FFFE' AS TEXT), '2026-01-01 00:00:07', NULL)",
               (OWNER_CHAT,))  # fmt: skip
    digest = "INSERT INTO digest (id, chat_id, session_id, created_at, body) VALUES (?, ?, ?, '2026-01-01 00:00:00', ?)"
    db.execute(digest, (1, OWNER_CHAT, "s\x00x", json.dumps({"narrative": "a digest of s\u0000x"})))
    db.execute(digest, (2, OWNER_CHAT, "s2", json.dumps({"narrative": "\u200b", "decisions": []})))  # empty
    db.execute(digest, (3, OWNER_CHAT, "s3", json.dumps({"narrative": None, "decisions": "not a list"})))  # empty
    db.execute(digest, (4, OWNER_CHAT, "s4", '{"narrative": "half a pair \\ud83d"}'))  # a lone surrogate
    item = """INSERT INTO memory_item (id, type, content, confidence, reason, source_turn_id, status, created_at,
                                       superseded_by) VALUES (?, 'fact', ?, ?, ?, 1, 'confirmed', ?, ?)"""
    for row in [
        (1, json.dumps({"label": "gate\u0000code", "properties": {"code": "4471"}}), 0.5, "r", "2026-01-01", 2),
        (2, json.dumps({"label": "gate code, new", "properties": {}}), 0.5, "said\x00twice", "2026-01-02", None),
        (3, json.dumps({"label": "self", "properties": {}}), 0.5, "r", "2026-01-01", 3),  # a cycle of one
        (4, json.dumps({"properties": {"colour": "teal"}}), None, None, "2026-01-01", None),  # no label key
        (5, json.dumps({"label": "\u200b", "properties": {}}), 0.5, "r", "2026-01-01", None),  # empty
        (6, json.dumps({"label": "inf", "properties": {}}), float("inf"), "r", "2026-01-01", None),  # bad_confidence
        (7, json.dumps({"label": "late", "properties": {}}), 0.5, "r", "9999-12-31T23:00:00-05:00", None),
        (8, '{"label": "\\udc00", "properties": {}}', 0.5, "r", "2026-01-01", None),  # bad_encoding
    ]:
        db.execute(item, row)
    db.commit()
    db.close()
    lines = [
        {"kind": "entity", "id": "nul\x00id", "name": "Nul Id"},  # bad_entity: NUL in the id
        {"kind": "entity", "id": 5, "name": "Number Id"},  # bad_entity
        {"kind": "entity", "id": "ok", "name": "Ünïcødé 名前"},
        {"kind": "edge", "source": "memory:2", "target": "entity:ok"},
        {"kind": "edge", "source": "memory:1", "target": "entity:nul\x00id"},  # unknown_entity
        {"kind": "edge", "source": "memory:\u0663", "target": "entity:ok"},  # Arabic-Indic 3: unknown_memory
        {"kind": "edge", "source": "entity:ok", "target": "memory:2"},  # unsupported_edge
        {"kind": "edge", "source": None, "target": 3},  # unsupported_edge
        {"kind": "entity", "id": "half", "name": "\ud800"},  # json.dumps escapes the lone surrogate: bad_json
        {"kind": "entity", "id": "co", "name": "Nutrifax"},
        # entity -> entity: a relation stated by the memory item it names, its type in snake_case.
        {"kind": "edge", "source": "entity:ok", "target": "entity:co", "type": "Works At", "memory": "memory:2"},
        {"kind": "edge", "source": "entity:ok", "target": "entity:co", "type": "knows"},  # no source: not imported
        {"kind": "edge", "source": "entity:ok", "target": "entity:co", "type": "knows", "memory": "memory:99"},
        {"kind": "edge", "source": "entity:ok", "target": "entity:co", "type": "9 lives", "memory": "memory:2"},
        {"kind": "edge", "source": "entity:ok", "target": "entity:co", "type": "Über", "memory": "memory:2"},
        {"kind": "edge", "source": "entity:ok", "target": "entity:co", "type": "knows", "memory": "memory:5"},
    ]
    graph.write_text("\n".join(json.dumps(x) for x in lines) + "\n\xff\xfe\n", encoding="utf-8")
    return path, graph


def test_odd_rows_are_kept_or_skipped_by_the_rules_and_the_store_refuses_none(stack, tmp_path):
    ws = stack.workspace("odd rows")
    owner, _, members = members_for(stack, ws)
    sqlite, graph = odd_store(tmp_path)
    status, out, err = cli(stack, *import_args(ws, sqlite, graph, members, tmp_path / "odd.jsonl", "--json"))
    assert status == 0, err
    counts = json.loads(out)
    assert counts["history"] == {
        "imported": 5,
        "skipped": {"bad_encoding": 2, "bad_timestamp": 1, "future_timestamp": 1, "empty": 1, "too_long": 1},
    }
    assert counts["digests"] == {"imported": 1, "skipped": {"bad_encoding": 1, "empty": 2}}
    assert counts["memories"] == {
        "imported": 4,
        "skipped": {"bad_confidence": 1, "bad_encoding": 1, "bad_timestamp": 1, "empty": 1},
    }
    assert (counts["supersede_links"], counts["chain_faults_reported"]) == (1, 1)
    assert (counts["entities"], counts["mentions"], counts["relations"]) == (2, 1, 1)
    assert counts["entity_edges_not_imported"] == 2  # no source; its memory (item 5, empty) skipped
    assert counts["graph_lines_skipped"] == {"bad_entity": 2, "bad_json": 2, "unknown_entity": 1, "unknown_memory": 2,
                                             "unsupported_edge": 2, "bad_predicate": 2}  # fmt: skip
    listed = stack.memory.ListMemories(
        g.ListMemoriesRequest(page_size=200, superseded=m.SUPERSEDED_FILTER_ALL), metadata=owner.md()
    ).memories
    (stating,) = [x for x in listed if x.relations]
    assert [(r.subject_name, r.predicate, r.object_name) for r in stating.relations] == [
        ("Ünïcødé 名前", "works_at", "Nutrifax")
    ]
    report = [json.loads(line) for line in (tmp_path / "odd.jsonl").read_text().splitlines()]
    assert not [r for r in report if r.get("reason") == "rejected"]  # nothing is left for the store to refuse
    with stack.db(ws) as conn:
        turns = dict(conn.execute("SELECT request_id, text FROM history_turn").fetchall())
        sessions = dict(conn.execute("SELECT request_id, session_id FROM history_turn").fetchall())
        mems = {
            r[0]: r[1:]
            for r in conn.execute("SELECT import_key, title, body, reason, superseded_by_id IS NOT NULL FROM memory")
        }
    assert turns["legacy:turn:1"] == "héllo 😀 مرحبا e\u0301 \u200b" and turns["legacy:turn:9"] == "stored as a BLOB"
    assert len(turns["legacy:turn:3"]) == 65_536 and sessions["legacy:turn:4"] == "sone"
    assert "legacy:turn:7" in turns and "legacy:turn:6" not in turns
    assert mems["legacy:digest:1"][:2] == ("Session digest sx", "a digest of sx")
    assert mems["legacy:item:1"] == ("gatecode", "fact: gatecode\ncode: 4471", "r", True)
    assert mems["legacy:item:2"][2] == "saidtwice"
    assert mems["legacy:item:4"][:2] == ("", "fact\ncolour: teal")
    assert set(mems) == {"legacy:digest:1", "legacy:item:1", "legacy:item:2", "legacy:item:3", "legacy:item:4"}
    found = stack.memory.SearchHistory(g.SearchHistoryRequest(query="مرحبا"), metadata=owner.md()).entries
    assert [e.turn.text for e in found] == [turns["legacy:turn:1"]]


def test_the_graph_is_refused_when_it_is_not_json_lines_or_cut_short(tmp_path):
    """The graph file's own checks (cli.legacy_store.read_graph_lines), before anything is read
    into a plan: the truncation check is the one ``recallatron import`` makes of its files."""
    from cli.json_text import last_line_cut_short
    from cli.legacy_store import LegacyStoreError, read_graph_lines

    entity = b'{"kind": "entity", "id": "e1", "name": "Ada"}'
    assert last_line_cut_short(entity + b"\n" + entity[:11]) == 2
    assert last_line_cut_short(entity + b"\n" + entity) is None  # only the final newline is missing
    assert last_line_cut_short(entity + b"\n") is None and last_line_cut_short(b"") is None
    assert last_line_cut_short(entity + b"\n" + b'{"name": "\xc3') == 2  # cut inside a UTF-8 character
    graph = tmp_path / "g.jsonl"
    for data, message in [
        (entity + b"\n" + entity[:11], "line 2 is cut short"),
        (b"SQLite format 3\x00" + bytes(range(256)) * 8, "not a JSON Lines graph"),
        (b"\xff\xfe" + "not json\n".encode("utf-16-le") * 3, "not a JSON Lines graph"),
        (b"notes\n" * 2 + entity + b"\n", "2 of its 3 lines are not JSON objects"),
    ]:
        graph.write_bytes(data)
        with pytest.raises(LegacyStoreError, match=message):
            read_graph_lines(graph)
    graph.write_bytes(b"notes\n\n" + entity + b"\n")  # half bad (blank lines do not count): kept, one skip
    assert len(read_graph_lines(graph)) == 3
    graph.write_bytes(b"")  # a store with no graph
    assert read_graph_lines(graph) == []


def test_times_ahead_of_the_clock_are_skipped_naming_row_and_column(stack, tmp_path):
    """A turn, digest or item dated more than a day (vocabulary.MAX_FUTURE_SKEW) after the clock is
    skipped as ``future_timestamp``, the report naming its row and column; one just within is kept."""
    ws = stack.workspace("legacy future")
    _, _, members = members_for(stack, ws)
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0, tzinfo=None)
    within = now + datetime.timedelta(hours=23)
    past_skew = now + datetime.timedelta(days=1, hours=1)  # an hour past: no slow run brings it within
    far = now + datetime.timedelta(days=365_250)  # a thousand years on
    stamps = [f"{within:%Y-%m-%d %H:%M:%S}", f"{past_skew:%Y-%m-%dT%H:%M:%SZ}", f"{far:%Y-%m-%dT%H:%M:%S+00:00}"]
    path, graph = tmp_path / "future.sqlite", tmp_path / "future.jsonl"
    db = sqlite3.connect(path)
    db.executescript(SCHEMA)
    for n, stamp in enumerate(stamps, start=1):
        db.execute("INSERT INTO conversation VALUES (?, ?, 'user', ?, ?, NULL)", (n, OWNER_CHAT, f"turn {n}", stamp))
        db.execute("INSERT INTO digest VALUES (?, ?, ?, ?, ?)", (n, OWNER_CHAT, f"s{n}", stamp, '{"narrative": "d"}'))
        db.execute(
            "INSERT INTO memory_item VALUES (?, 'fact', ?, 0.9, 'r', 1, 'confirmed', ?, NULL, NULL)",
            (n, json.dumps({"label": f"item {n}", "properties": {}}), stamp),
        )
    db.commit()
    db.close()
    graph.write_text("")
    report = tmp_path / "future-report.jsonl"
    status, out, err = cli(stack, *import_args(ws, path, graph, members, report, "--json"))
    assert status == 0, err
    counts = json.loads(out)
    for section in ("history", "digests", "memories"):
        assert counts[section] == {"imported": 1, "skipped": {"future_timestamp": 2}}, section
    skipped = [r for r in map(json.loads, report.read_text().splitlines()) if r["kind"] == "skipped"]
    assert [(r["source"], r["source_id"], r["reason"]) for r in skipped] == [
        (source, n, "future_timestamp") for source in ("conversation", "digest", "memory_item") for n in (2, 3)
    ]
    for r in skipped:
        column = "ts" if r["source"] == "conversation" else "created_at"
        assert r["detail"].startswith(f"{column} ") and "is in the future" in r["detail"], r
    got = stored(stack, ws)
    assert [t[0] for t in got["turns"]] == ["legacy:turn:1"]
    assert sorted(x[0] for x in got["memories"]) == ["legacy:digest:1", "legacy:item:1"]


def old_store(path: Path, *changes: str) -> Path:
    """An old store of the format's tables, changed by SQL statements (one table replaced, say)."""
    db = sqlite3.connect(path)
    db.executescript(SCHEMA + ";".join(changes))
    db.commit()
    db.close()
    return path


def test_a_file_whose_tables_are_not_plain_tables_is_refused_by_name(stack, made, tmp_path):
    """Only plain tables with the format's columns are read: a view where a table belongs (a
    recursive one ran without end), a virtual table, a trigger, a generated column or a missing
    column is refused before any read, naming it; nothing is written."""
    ws = stack.workspace("legacy not tables")
    _, _, members = members_for(stack, ws)
    endless = old_store(
        tmp_path / "view.sqlite",
        "DROP TABLE conversation",
        """CREATE VIEW conversation AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r)
           SELECT 1 AS id, 'tg:1001' AS chat_id, 'user' AS role, 'x' AS content, '2026-01-01' AS ts,
                  NULL AS session_id FROM r""",
    )
    argv = command(stack, *import_args(ws, endless, made.graph, members, tmp_path / "r.jsonl"))
    # A bounded wait: the old reader never came back from this file.
    out = subprocess.run(argv, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=90)
    assert (out.returncode, out.stdout) == (1, ""), out.stderr
    assert out.stderr.startswith(f"import-legacy: {endless}: 'conversation' is a view, not a table")
    cases = [
        (
            ["DROP TABLE digest", "CREATE VIRTUAL TABLE digest USING fts5(id, chat_id, session_id, created_at, body)"],
            "'digest' is a virtual table, not a plain one",
        ),
        (
            ["CREATE TRIGGER keep_items AFTER INSERT ON memory_item BEGIN SELECT 1; END"],
            "table 'memory_item' has trigger(s) 'keep_items'",
        ),
        (
            [
                "DROP TABLE digest",
                """CREATE TABLE digest (id INTEGER PRIMARY KEY, chat_id TEXT, session_id TEXT, body TEXT,
                                        created_at TEXT GENERATED ALWAYS AS (printf('%.*c', 100, 'x')) VIRTUAL)""",
            ],
            "table 'digest': column(s) created_at are generated, not stored values",
        ),
        (
            [
                "DROP TABLE conversation",
                "CREATE TABLE conversation (id INTEGER PRIMARY KEY, chat_id TEXT, role TEXT, content TEXT)",
            ],
            "table 'conversation' lacks column(s) ts, session_id",
        ),
    ]
    for n, (changes, message) in enumerate(cases):
        bad = old_store(tmp_path / f"bad{n}.sqlite", *changes)
        status, out, err = cli(stack, *import_args(ws, bad, made.graph, members, tmp_path / "r.jsonl"))
        assert (status, out) == (1, "") and err.startswith(f"import-legacy: {bad}: {message}"), (message, err)
    assert stored(stack, ws) == {"memories": [], "mentions": [], "entities": [], "turns": [], "vectors": 0}
    assert not (tmp_path / "r.jsonl").exists()


def test_reading_the_file_is_bounded_by_read_timeout(stack, made, tmp_path):
    """SQLite's progress handler ends a read that runs past --read-timeout (default 600 s) with a
    clear error; a bound of a microsecond ends any read. A bound that is not a positive number of
    seconds is bad usage."""
    from cli.legacy_store import LegacyStoreError

    with pytest.raises(LegacyStoreError, match=r"the legacy file took over 1e-06 s to read \(--read-timeout\)"):
        read_store(made.sqlite, made.graph, {OWNER_CHAT: str(uuid.uuid4())}, 1e-6)
    ws = stack.workspace("legacy read bound")
    _, _, members = members_for(stack, ws)
    argv = import_args(ws, made.sqlite, made.graph, members, tmp_path / "t.jsonl", "--read-timeout", "0.000001")
    status, out, err = cli(stack, *argv)
    assert (status, out) == (1, "") and err.startswith(
        f"import-legacy: {made.sqlite}: the legacy file took over 1e-06 s to read (--read-timeout)"
    ), err
    argv = import_args(ws, made.sqlite, made.graph, members, tmp_path / "t.jsonl", "--read-timeout", "0")
    status, _, err = cli(stack, *argv)
    assert status == 2 and "--read-timeout: want a positive number of seconds, got '0'" in err, err
    for bad in ("-5", "nan", "inf", "soon", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="want a positive number of seconds"):
            legacy_import.seconds(bad)
    assert legacy_import.seconds("0.5") == 0.5
    assert stored(stack, ws) == {"memories": [], "mentions": [], "entities": [], "turns": [], "vectors": 0}
    assert not (tmp_path / "t.jsonl").exists()


def test_the_report_is_private_and_never_written_through_a_link(stack, made, tmp_path):
    """The report lists rows of members' data: 0600 whatever the umask, and a symbolic link at its
    name (where the old command wrote straight through) is refused before the run."""
    ws = stack.workspace("legacy private report")
    _, _, members = members_for(stack, ws)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    link = tmp_path / "report.jsonl"
    link.symlink_to(victim)
    status, out, err = cli(stack, *import_args(ws, made.sqlite, made.graph, members, link, "--dry-run"))
    assert (status, out) == (1, "") and err.strip() == (
        f"import-legacy: --report {link}: cannot write it (it is a symbolic link; name the file itself); "
        "nothing was written"
    )
    assert victim.read_text() == "precious\n" and link.is_symlink()
    report = tmp_path / "private.jsonl"
    old = os.umask(0o022)
    try:
        status, _, err = cli(stack, *import_args(ws, made.sqlite, made.graph, members, report, "--dry-run"))
    finally:
        os.umask(old)
    assert status == 0, err
    assert report.stat().st_mode & 0o777 == 0o600 and json.loads(report.read_text().splitlines()[-1])["dry_run"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["private.jsonl", "report.jsonl", "victim"]
