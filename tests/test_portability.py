"""`recallatron export` and `recallatron import` as a user runs them (the real commands, run in
this process by tests/cli_runner.py, against the test stack): what an export holds and leaves out,
the round trip (an export imported into an empty workspace and exported again gives the same
content, compared field by field modulo the ids the mapping file gives), idempotent re-runs, and bad
input, each refused with a message naming the file, line and problem before anything is written."""

from __future__ import annotations

import datetime
import json
import os
import stat
import subprocess
import uuid
from pathlib import Path

import pytest
from cli_runner import at_gateway
from google.protobuf import timestamp_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from cli import portability

T0 = datetime.datetime(2026, 3, 2, 8, 0, tzinfo=datetime.UTC)


def ts(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def cli(stack, *args, token="", check=True) -> subprocess.CompletedProcess:
    return at_gateway(f"127.0.0.1:{stack.gateway.port}", *args, token=token, check=check)


def export(stack, member, path: Path, *extra) -> list[dict]:
    cli(stack, "export", "--out", str(path), *extra, token=member.token)
    return [json.loads(line) for line in path.read_text().splitlines()]


def import_(stack, *args, check=True) -> subprocess.CompletedProcess:
    return cli(stack, "import", *args, "--operator-token", stack.operator_token, check=check)


def file_into(path, ws: str) -> list[str]:
    """`recallatron import`'s arguments naming the file and the workspace it goes into."""
    return ["--file", str(path), "--workspace", ws]


def stored(stack, ws) -> tuple[int, int, int]:
    """Rows of memories, entities and history turns in a workspace's database."""
    with stack.db(ws) as conn:
        return tuple(
            conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("memory", "entity", "history_turn")
        )


@pytest.fixture(scope="module")
def source(stack, tmp_path_factory):
    """A workspace with every shape an export must carry: kinds, purposes, audiences, a shared
    entity, a derivation, corrections, a supersede chain, another author, a forgotten memory, other
    members' private memories and history, and the exporter's history turns."""
    ws = stack.workspace("export source")
    alice, bob = stack.member(ws), stack.member(ws)
    api = stack.memory

    def remember(member, body, **kw):
        kw.setdefault("purpose", m.PURPOSE_CONVERSATION)
        kw.setdefault("audience", m.AUDIENCE_WORKSPACE)
        return api.Remember(g.RememberRequest(body=body, **kw), metadata=member.md()).memory

    fact = remember(
        alice,
        "Mira's parrot is called Captain.",
        kind=m.KIND_FACT,
        title="Pets",
        confidence=0.9,
        occurred_at=ts(T0),
        entities=[m.EntityMention(name="Mira")],
    )
    mira = next(x.target_entity_id for x in alice.read(fact.id).links if x.type == m.LINK_TYPE_ABOUT)
    again = remember(
        alice,
        "Mira lives in Porto.",
        entities=[m.EntityMention(entity_id=mira), m.EntityMention(name="Porto")],
        relations=[
            m.EntityRelation(
                subject=m.EntityMention(entity_id=mira), predicate="lives_in", object=m.EntityMention(name="Porto")
            )
        ],
        attributes=[m.EntityAttribute(subject=m.EntityMention(entity_id=mira), key="pet", value="Captain")],
    )
    private = remember(alice, "my own reminder", audience=m.AUDIENCE_MEMBER, kind=m.KIND_DECISION)
    task = remember(alice, "renew the domain", purpose=m.PURPOSE_TASKS)
    task = api.Correct(
        g.CorrectRequest(id=task.id, expected_revision=1, body="renew the domain by May"), metadata=alice.md()
    ).memory
    task = api.Correct(
        g.CorrectRequest(id=task.id, expected_revision=2, title="Domain", confidence=0.5), metadata=alice.md()
    ).memory
    summary = api.Derive(
        g.DeriveRequest(source_ids=[fact.id, again.id], kind=m.KIND_SUMMARY, body="Mira: parrot Captain, Porto."),
        metadata=alice.md(),
    ).memory
    office1 = remember(alice, "the office is on floor 2")
    office2 = api.Supersede(
        g.SupersedeRequest(id=office1.id, expected_revision=1, body="floor 3"), metadata=alice.md()
    ).memory
    office3 = api.Supersede(
        g.SupersedeRequest(id=office2.id, expected_revision=1, body="floor 4", audience=m.AUDIENCE_MEMBER),
        metadata=alice.md(),
    ).memory
    bobs = remember(bob, "bob's workspace note", kind=m.KIND_NOTE)
    hidden = remember(bob, "bob's private note", audience=m.AUDIENCE_MEMBER)
    gone = remember(alice, "forget me")
    api.Forget(g.ForgetRequest(id=gone.id, reason="test"), metadata=alice.md())
    turns = [
        g.HistoryTurn(chat_id="tg:1", role="user", text="When is the filing due?", occurred_at=ts(T0)),
        g.HistoryTurn(
            chat_id="tg:1", role="assistant", text="On the 30th.", occurred_at=ts(T0 + datetime.timedelta(minutes=1))
        ),
        g.HistoryTurn(
            chat_id="tg:2", role="user", text="hello", occurred_at=ts(T0 + datetime.timedelta(days=1)), session_id="s-9"
        ),
    ]
    api.AppendHistory(g.AppendHistoryRequest(turns=turns), metadata=alice.md())
    api.AppendHistory(
        g.AppendHistoryRequest(turns=[g.HistoryTurn(chat_id="b", role="user", text="bob's turn")]), metadata=bob.md()
    )
    ids = {
        "fact": fact.id,
        "again": again.id,
        "private": private.id,
        "task": task.id,
        "summary": summary.id,
        "office1": office1.id,
        "office2": office2.id,
        "office3": office3.id,
        "bobs": bobs.id,
        "hidden": hidden.id,
        "gone": gone.id,
        "mira": mira,
    }
    path = tmp_path_factory.mktemp("export") / "alice.jsonl"
    records = export(stack, alice, path, "--include-history")
    return ws, alice, bob, ids, path, records


def test_export_holds_exactly_what_the_exporter_can_read(source):
    ws, alice, bob, ids, path, records = source
    head, rest = records[0], records[1:]
    assert head["record"] == "header" and head["schema"] == "recallatron.export" and head["schema_version"] == 1
    mems = {r["id"]: r for r in rest if r["record"] == "memory"}
    turns = [r for r in rest if r["record"] == "history_turn"]
    assert head["memories"] == len(mems) == 9 and head["history_turns"] == len(turns) == 3
    readable = ("fact", "again", "private", "task", "summary", "office1", "office2", "office3", "bobs")
    assert set(mems) == {ids[k] for k in readable}
    assert ids["hidden"] not in mems and ids["gone"] not in mems  # bob's private note, the forgotten one
    fact, task, summary = mems[ids["fact"]], mems[ids["task"]], mems[ids["summary"]]
    assert (fact["kind"], fact["title"], fact["confidence"], fact["origin"]) == ("fact", "Pets", 0.9, "told")
    assert fact["occurred_at"] == "2026-03-02T08:00:00.000000Z" and fact["author"] == alice.id
    assert fact["entities"] == [{"id": ids["mira"], "name": "Mira"}]
    assert {"id": ids["mira"], "name": "Mira"} in mems[ids["again"]]["entities"]  # one entity, two mentions
    assert task["revision"] == 3 and [(r["revision"], r["body"]) for r in task["revisions"]] == [
        (1, "renew the domain"),
        (2, "renew the domain by May"),
    ]
    assert task["purpose"] == "tasks" and task["title"] == "Domain" and task["revisions"][1]["confidence"] == 1.0
    assert sorted(summary["derived_from"]) == sorted([ids["fact"], ids["again"]]) and summary["origin"] == "derived"
    o1, o2, o3 = (mems[ids[k]] for k in ("office1", "office2", "office3"))
    assert (o1["superseded"], o1["superseded_by"], o1["supersedes"]) == (True, ids["office2"], None)
    assert (o2["superseded"], o2["superseded_by"], o2["supersedes"]) == (True, ids["office3"], ids["office1"])
    assert (o3["superseded"], o3["supersedes"], o3["audience"], o3["audience_member_id"]) == (
        False,
        ids["office2"],
        "member",
        alice.id,
    )
    assert mems[ids["bobs"]]["author"] == bob.id
    assert [(t["chat_id"], t["role"], t["text"]) for t in turns] == [
        ("tg:1", "user", "When is the filing due?"),
        ("tg:1", "assistant", "On the 30th."),
        ("tg:2", "user", "hello"),
    ]
    assert (turns[0]["session_computed"], turns[2]["session_id"], turns[2]["session_computed"]) == (True, "s-9", False)
    # Every record has exactly the fields docs/portability.md lists for it.
    assert all(
        set(r) == {"record", *portability.MEMORY_FIELDS, *portability.OPTIONAL_MEMORY_FIELDS} for r in mems.values()
    )
    assert all(set(r) == {"record", *portability.TURN_FIELDS} for r in turns)
    assert set(head) == {
        "record",
        "schema",
        "schema_version",
        "exported_at",
        "memories",
        "history_turns",
        "include_history",
    }
    assert portability.read_export(path).header == head  # the importer's checks accept it


def canonical(records: list[dict], ids: dict[str, str], members: dict[str, str]) -> tuple[dict, list]:
    """An export's content with every id replaced through ``ids`` (memory, entity and turn ids) and
    every member id through ``members``; lists whose order follows ids are sorted. What must be equal
    after a round trip: every field but the ids themselves, a history turn's request id (the import
    key replaces it) and its appended_at (when the import appended it)."""

    def mid(x):
        return ids.get(x, x) if x else x

    mems, turns = {}, []
    for r in records[1:]:
        r = dict(r)
        if r["record"] == "memory":
            r["id"], r["supersedes"], r["superseded_by"] = mid(r["id"]), mid(r["supersedes"]), mid(r["superseded_by"])
            r["author"] = members.get(r["author"], r["author"])
            r["audience_member_id"] = members.get(r["audience_member_id"], r["audience_member_id"])
            r["derived_from"] = sorted(mid(x) for x in r["derived_from"])
            r["entities"] = sorted((mid(e["id"]), e["name"]) for e in r["entities"])
            r["relations"] = [(mid(x["subject"]), x["predicate"], mid(x["object"])) for x in r["relations"]]
            r["attributes"] = [(mid(x["subject"]), x["key"], x["value"]) for x in r["attributes"]]
            mems[r["id"]] = r
        else:
            r["id"] = mid(r["id"])
            del r["request_id"], r["appended_at"]
            turns.append(r)
    return mems, sorted(turns, key=lambda t: (t["occurred_at"], t["id"]))


def test_round_trip_into_an_empty_workspace_gives_the_same_content(stack, source, tmp_path):
    ws, alice, bob, ids, path, records = source
    target = stack.workspace("import target")
    alice2, bob2 = stack.member(target), stack.member(target)
    mapping_path = tmp_path / "map.json"
    args = [
        *file_into(path, target),
        "--member",
        f"{alice.id}={alice2.id}",
        "--member",
        f"{bob.id}={bob2.id}",
        "--history-member",
        alice2.id,
        "--mapping",
        str(mapping_path),
    ]
    dry = json.loads(import_(stack, *args, "--dry-run", "--json").stdout)
    assert dry["memories"] == {"to_import": 9} and dry["history_turns"] == {"to_import": 3}
    assert stored(stack, target) == (0, 0, 0)  # a dry run writes nothing
    first = json.loads(import_(stack, *args, "--json").stdout)
    assert first["memories"] == {"created": 9} and first["entities"] == {"created": 2}
    assert first["history_turns"] == {"created": 3}
    mapping = json.loads(mapping_path.read_text())
    assert set(mapping["memories"]) == {r["id"] for r in records[1:] if r["record"] == "memory"}
    assert mapping["members"] == {alice.id: alice2.id, bob.id: bob2.id} and mapping["history_member"] == alice2.id
    # A re-run writes nothing and maps every id the same way.
    again = json.loads(import_(stack, *args, "--json").stdout)
    assert again["memories"] == {"already_imported": 9} and again["history_turns"] == {"already_imported": 3}
    assert json.loads(mapping_path.read_text()) == mapping
    assert stored(stack, target) == (9, 2, 3)

    back = export(stack, alice2, tmp_path / "again.jsonl", "--include-history")
    inverse = {new: old for kind in ("memories", "entities", "history_turns") for old, new in mapping[kind].items()}
    members_back = {alice2.id: alice.id, bob2.id: bob.id}
    want_mems, want_turns = canonical(records, {}, {})
    got_mems, got_turns = canonical(back, inverse, members_back)
    assert got_mems == want_mems
    assert got_turns == want_turns
    assert back[0]["memories"] == records[0]["memories"] and back[0]["history_turns"] == records[0]["history_turns"]
    # The imported memories are real: the chain reads back in order, recall finds them, bob2 sees no private one.
    o3 = alice2.read(mapping["memories"][ids["office3"]])
    assert o3.audience == m.AUDIENCE_MEMBER
    o1 = alice2.read(mapping["memories"][ids["office1"]])
    assert o1.superseded_by_id == mapping["memories"][ids["office2"]]
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(page_size=200), metadata=bob2.md())
    assert mapping["memories"][ids["private"]] not in {x.id for x in listed.memories}
    stack.wait_backlog_empty()
    hits = alice2.recall("parrot Captain", mode=m.RECALL_MODE_LEXICAL)
    assert mapping["memories"][ids["fact"]] in {it.memory.id for it in hits.items}


def test_import_with_a_default_member(stack, source, tmp_path):
    ws, alice, bob, ids, path, records = source
    target = stack.workspace("import default")
    carol = stack.member(target)
    out = import_(
        stack,
        *file_into(path, target),
        "--default-member",
        carol.id,
        "--mapping",
        str(tmp_path / "m.json"),
    )
    assert "memories: 9 created" in out.stdout and "history turns: 3 created" in out.stdout
    authors = {
        x.created_by
        for x in stack.memory.ListMemories(
            g.ListMemoriesRequest(page_size=200, superseded=m.SUPERSEDED_FILTER_ALL), metadata=carol.md()
        ).memories
    }
    assert authors == {carol.id}


def write(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


@pytest.fixture
def empty(stack):
    target = stack.workspace("import refused")
    return target, stack.member(target)


def refused(stack, target, member, file: Path, *extra) -> str:
    """Runs an import that must be refused: exit 1, nothing written; returns stderr."""
    out = import_(stack, "--file", str(file), "--workspace", target, "--default-member", member.id, *extra, check=False)
    assert out.returncode == 1, out.stdout
    assert stored(stack, target) == (0, 0, 0)
    assert not file.with_name(file.name + ".mapping.json").exists()
    return out.stderr.strip()


def test_bad_files_are_refused_naming_file_line_and_problem(stack, source, empty, tmp_path):
    ws, alice, bob, ids, path, records = source
    target, carol = empty
    lines = path.read_text().splitlines()
    history = ["--history-member", carol.id]

    missing = tmp_path / "nope.jsonl"
    assert refused(stack, target, carol, missing) == f"{missing}: no such file"
    folder_err = refused(stack, target, carol, tmp_path)
    assert folder_err == f"{tmp_path}: is a folder, not a file; --file names an export file"

    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])  # last line cut mid-way
    err = refused(stack, target, carol, cut, *history)
    assert err.startswith(f"{cut}:{len(lines)}: the last line is cut short") and "truncated" in err

    short = write(tmp_path / "short.jsonl", lines[:-2])  # cut at a line boundary: the header's counts say so
    err = refused(stack, target, carol, short, *history)
    assert err.startswith(f"{short}: the header promises 9 memories and 3 history turns, the file holds 9 and 1")

    head = json.loads(lines[0])
    v2 = write(tmp_path / "v2.jsonl", [{**head, "schema_version": 2}, *lines[1:]])
    assert refused(stack, target, carol, v2, *history) == (
        f"{v2}:1: schema_version 2 is not supported; this recallatron reads version 1"
    )

    garbage = write(tmp_path / "garbage.jsonl", [lines[0], lines[1], "{this is not json", *lines[3:]])
    err = refused(stack, target, carol, garbage, *history)
    assert err.startswith(f"{garbage}:3: not JSON")

    half = write(tmp_path / "half.jsonl", [lines[0], lines[1].replace('"title":"', '"title":"\\ud83d', 1), *lines[2:]])
    assert refused(stack, target, carol, half, *history) == (
        f"{half}:2: a string escapes a lone surrogate (\\ud800..\\udfff): not Unicode text"
    )

    rec = json.loads(lines[1])
    renamed = {**rec, "id": str(uuid.uuid4()), "entities": [{"id": ids["mira"], "name": "Myra"}]}
    two_names = write(tmp_path / "names.jsonl", [{**head, "memories": 10}, *lines[1:3], renamed, *lines[3:]])
    assert refused(stack, target, carol, two_names, *history) == (
        f"{two_names}:4: entity {ids['mira']} is named 'Myra' here and 'Mira' on line 2"
    )
    bad_kind = write(tmp_path / "kind.jsonl", [lines[0], {**rec, "kind": "rumour"}, *lines[2:]])
    assert refused(stack, target, carol, bad_kind, *history).startswith(f"{bad_kind}:2: kind 'rumour' is not one of")

    dangling = write(tmp_path / "dangling.jsonl", [lines[0], {**rec, "derived_from": [str(uuid.uuid4())]}, *lines[2:]])
    err = refused(stack, target, carol, dangling, *history)
    assert err.startswith(f"{dangling}:2: derived_from names") and "not in the file" in err

    # The store's own checks of each item run before anything is written.
    long_reason = write(tmp_path / "reason.jsonl", [lines[0], {**rec, "reason": "r" * 1001}, *lines[2:]])
    err = refused(stack, target, carol, long_reason, *history)
    assert err == f"{long_reason}:2: reason must be at most 1000 characters, without NUL"
    turn = json.loads(lines[-1])
    robot = write(tmp_path / "robot.jsonl", [*lines[:-1], {**turn, "role": "robot"}])
    err = refused(stack, target, carol, robot, *history)
    assert err.startswith(f"{robot}:{len(lines)}: role must be one of") and "'robot'" in err

    # What a memory states names entities of the record, with a predicate the store admits.
    stating = json.loads(next(line for line in lines[1:] if '"lives_in"' in line))
    n = next(i for i, line in enumerate(lines) if '"lives_in"' in line)
    elsewhere = {**stating, "relations": [{**stating["relations"][0], "object": str(uuid.uuid4())}]}
    stray = write(tmp_path / "stray.jsonl", [*lines[:n], elsewhere, *lines[n + 1 :]])
    assert refused(stack, target, carol, stray, *history) == (
        f"{stray}:{n + 1}: relations[0].object_key must be one of the memory's entity_keys"
    )
    shouting = {**stating, "relations": [{**stating["relations"][0], "predicate": "Lives In"}]}
    loud = write(tmp_path / "loud.jsonl", [*lines[:n], shouting, *lines[n + 1 :]])
    assert refused(stack, target, carol, loud, *history).startswith(
        f"{loud}:{n + 1}: relations[0].predicate must be a lower-case snake_case predicate"
    )
    not_list = write(tmp_path / "notlist.jsonl", [*lines[:n], {**stating, "attributes": {"k": 1}}, *lines[n + 1 :]])
    assert refused(stack, target, carol, not_list, *history) == (
        f"{not_list}:{n + 1}: field 'attributes' has the wrong type (dict)"
    )

    not_export = write(tmp_path / "other.jsonl", [{"id": "1", "title": "x", "body": "y"}])
    assert refused(stack, target, carol, not_export).startswith(f"{not_export}:1: not a Recallatron export")


def test_bad_member_maps_are_refused_before_anything_is_written(stack, source, empty):
    ws, alice, bob, ids, path, records = source
    target, carol = empty
    stranger = str(uuid.uuid4())
    base = ["--file", str(path), "--workspace", target, "--history-member", carol.id]

    def run(*args) -> str:
        out = import_(stack, *base, *args, check=False)
        assert out.returncode == 1, out.stdout
        assert stored(stack, target) == (0, 0, 0)
        return out.stderr.strip()

    # An unknown member (the workspace has no such member): named, with the option that named it.
    err = run("--member", f"{alice.id}={stranger}", "--member", f"{bob.id}={carol.id}")
    assert (
        err == f"not a member of workspace {target}: {stranger} (--member {alice.id}={stranger}); nothing was imported"
    )
    err = run("--default-member", stranger)
    assert err == f"not a member of workspace {target}: {stranger} (--default-member); nothing was imported"
    # An author left unmapped, an OLD that wrote nothing in the file, a malformed entry.
    err = run("--member", f"{alice.id}={carol.id}")
    assert err.startswith(f"{path}: no member for author {bob.id} (1 memories)")
    err = run("--member", f"{stranger}={carol.id}", "--default-member", carol.id)
    assert err == f"--member {stranger}={carol.id}: {stranger} is not the author of any memory in {path}"
    # Bad usage exits 2, as import-legacy's: a malformed entry or member id, an OLD mapped twice.
    for bad, message in [
        (["--member", "alice"], "argument --member: want OLD=NEW, got 'alice'"),
        (["--member", f"alice={carol.id}"], f"argument --member: 'alice={carol.id}': 'alice' is not a member id"),
        (["--default-member", "carol"], "argument --default-member: 'carol' is not a member id (a UUID)"),
        (["--history-member", "x"], "argument --history-member: 'x' is not a member id (a UUID)"),
        (["--member", f"{alice.id}={carol.id}", "--member", f"{alice.id}={bob.id}"], f"{alice.id} is mapped twice"),
    ]:
        out = import_(stack, *base, "--default-member", carol.id, *bad, check=False)
        assert out.returncode == 2 and message in out.stderr, (bad, out.stderr)
        assert stored(stack, target) == (0, 0, 0)
    # History turns need an owner; an unknown workspace is NOT_FOUND.
    out = import_(
        stack,
        *file_into(path, target),
        "--member",
        f"{alice.id}={carol.id}",
        "--member",
        f"{bob.id}={carol.id}",
        check=False,
    )
    assert out.returncode == 1 and "holds 3 history turns: name their owner with --history-member" in out.stderr
    # An unknown workspace, and a malformed id, are named (the store answers both NOT_FOUND, as every
    # admin call does for a workspace id).
    for unknown in (str(uuid.uuid4()), "not-a-uuid"):
        out = import_(stack, *base[:2], "--workspace", unknown, "--default-member", carol.id, check=False)
        assert out.returncode == 1 and out.stderr.startswith(f"--workspace {unknown}: no such workspace (NOT_FOUND"), (
            out.stderr
        )
    # A mapping file that cannot be written is found out before anything is imported.
    nowhere = path.with_name("no-such-folder") / "m.json"
    err = run("--default-member", carol.id, "--mapping", str(nowhere))
    assert (
        err == f"{nowhere}: cannot write the id mapping there (no such folder {nowhere.parent}); nothing was imported"
    )


def test_export_refuses_an_unwritable_path_and_keeps_an_old_file(stack, source, tmp_path):
    ws, alice, bob, ids, path, records = source
    out = cli(stack, "export", "--out", str(tmp_path / "no" / "such" / "dir.jsonl"), token=alice.token, check=False)
    assert out.returncode == 1 and "cannot write it" in out.stderr
    bad = cli(stack, "export", "--out", str(tmp_path / "x.jsonl"), token="rct_not_a_token", check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("UNAUTHENTICATED") and not (tmp_path / "x.jsonl").exists()


def test_validate_only_answers_as_a_real_import_and_writes_nothing(stack, empty):
    """ImportMemories.validate_only (what `recallatron import` probes the members with)."""
    target, carol = empty
    stranger = str(uuid.uuid4())

    def conversation(key: str, author: str, body: str, **more) -> m.ImportedMemory:
        return m.ImportedMemory(
            import_key=key,
            author_member_id=author,
            purpose=m.PURPOSE_CONVERSATION,
            audience=m.AUDIENCE_WORKSPACE,
            body=body,
            **more,
        )

    items = [
        conversation("k1", carol.id, "one", entity_keys=["e1"]),
        conversation("k2", stranger, "two"),
        conversation("k3", carol.id, "three", derived_from_keys=["k1"]),
    ]
    req = g.ImportMemoriesRequest(
        workspace_id=target, entities=[m.ImportedEntity(import_key="e1", name="Mira")], memories=items
    )
    preview = stack.admin.ImportMemories(
        g.ImportMemoriesRequest(validate_only=True, **{f.name: v for f, v in req.ListFields()}), metadata=stack.op()
    )
    statuses = [r.status for r in preview.memories]
    assert statuses == [m.IMPORT_STATUS_CREATED, m.IMPORT_STATUS_FAILED, m.IMPORT_STATUS_CREATED]
    assert preview.memories[1].error.message == f"author_member_id {stranger} is not a member of this workspace"
    assert stored(stack, target) == (0, 0, 0)
    real = stack.admin.ImportMemories(req, metadata=stack.op())  # the keys were not used up by the preview
    assert [r.status for r in real.memories] == statuses and real.entities[0].status == m.IMPORT_STATUS_CREATED
    assert stored(stack, target) == (2, 1, 0)


def test_a_large_file_goes_in_batches_of_500_sources_first(stack, tmp_path):
    """1,100 memories written newest first, half derived from memories 550 lines further on: the
    import sends three batches, each source before its derivations (across batches too), and a
    re-run writes nothing."""
    target = stack.workspace("import batches")
    dana = stack.member(target)
    author, n = str(uuid.uuid4()), 1100
    ids = [str(uuid.uuid4()) for _ in range(n)]
    ents = [str(uuid.uuid4()) for _ in range(7)]
    recs = []
    for k in range(n):
        at = (T0 + datetime.timedelta(seconds=k)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        recs.append(
            {
                "record": "memory",
                "id": ids[k],
                "revision": 1,
                "kind": "note",
                "title": "",
                "body": f"synthetic memory {k}",
                "audience": "workspace",
                "audience_member_id": None,
                "purpose": "conversation",
                "origin": "migrated",
                "confidence": 1.0,
                "reason": "",
                "author": author,
                "created_at": at,
                "updated_at": at,
                "occurred_at": None,
                "superseded": False,
                "superseded_by": None,
                "supersedes": None,
                "derived_from": [ids[k - 550]] if k >= 550 else [],
                "entities": [{"id": ents[k % 7], "name": f"E{k % 7}"}],
                "revisions": [],
            }
        )
    head = portability.header(T0, n, 0, False)
    path = write(tmp_path / "big.jsonl", [head, *reversed(recs)])
    args = ["--file", str(path), "--workspace", target, "--default-member", dana.id]
    dry = json.loads(import_(stack, *args, "--dry-run", "--json").stdout)
    assert dry["batches"] == 3 and dry["memories"] == {"to_import": n} and dry["entities"] == {"to_import": 7}
    first = json.loads(import_(stack, *args, "--json").stdout)
    assert first["memories"] == {"created": n} and first["entities"] == {"created": 7}
    assert stored(stack, target) == (n, 7, 0)
    with stack.db(target) as conn:
        links = conn.execute("SELECT count(*) FROM memory_link WHERE link_type = 'derived_from'").fetchone()[0]
    assert links == 550
    again = json.loads(import_(stack, *args, "--json").stdout)
    assert again["memories"] == {"already_imported": n} and stored(stack, target) == (n, 7, 0)


def test_export_times_keep_four_digit_years():
    # glibc's strftime("%Y") wrote year 1 as "1-01-01T...", which the import then refused.
    from google.protobuf import timestamp_pb2

    from cli import portability

    assert portability.iso(timestamp_pb2.Timestamp(seconds=-62135596800)) == "0001-01-01T00:00:00.000000Z"
    assert portability.iso(timestamp_pb2.Timestamp(seconds=1_780_000_000)) == "2026-05-28T20:26:40.000000Z"


def test_deeply_nested_json_is_a_clear_error_not_a_traceback(tmp_path):
    # json.loads raises RecursionError (not JSONDecodeError) past its nesting limit.
    import base64

    import pytest

    from cli import portability
    from servicekit.errors import InvalidArgument
    from store_service import page_tokens

    token = base64.urlsafe_b64encode(b"[" * 100_000).decode().rstrip("=")
    with pytest.raises(InvalidArgument):
        page_tokens.decode(token, "fp", "page_token")
    path = tmp_path / "deep.jsonl"
    path.write_text('{"record": "header"}\n' + "[" * 100_000 + "\n")
    with pytest.raises(portability.ExportFileError, match="deep.jsonl:2: JSON nested too deeply"):
        list(portability._lines(path))


@pytest.fixture
def umask_022():
    """The usual umask (group and others may read what is created): the files must be 0600 anyway."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def planted_link(at: Path, victim: Path) -> None:
    """A symbolic link someone else put where a command writes, pointing at a file they want overwritten."""
    at.symlink_to(victim)


def test_export_and_mapping_files_are_private_and_never_written_through_a_link(stack, source, tmp_path, umask_022):
    """An export and an import's id mapping hold memories and ids: 0600 whatever the umask, written
    through a temporary file of their own creation, never through a link planted at a name the
    command uses (the fixed ``.partial`` names, the target itself)."""
    ws, alice, bob, ids, path, records = source
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    out = tmp_path / "alice.jsonl"
    planted_link(out.with_name(out.name + ".partial"), victim)
    got = export(stack, alice, out, "--include-history")
    assert [r["id"] for r in got[1:]] == [r["id"] for r in records[1:]]
    assert out.stat().st_mode & 0o777 == 0o600 and not out.is_symlink()
    assert victim.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alice.jsonl", "alice.jsonl.partial", "victim"]

    # A target that is itself a link is refused: a rename would replace the link, not what it names.
    link = tmp_path / "link.jsonl"
    planted_link(link, victim)
    refused = cli(stack, "export", "--out", str(link), token=alice.token, check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == f"{link}: cannot write it (it is a symbolic link; name the file itself)"
    assert victim.read_text() == "precious\n" and link.is_symlink()

    # The id mapping of an import: the same, and a link as its target is found before anything is written.
    target = stack.workspace("import private mapping")
    carol = stack.member(target)
    planted_link(out.with_name(out.name + ".mapping.json.partial"), victim)
    import_(stack, "--file", str(out), "--workspace", target, "--default-member", carol.id)
    mapping = out.with_name(out.name + ".mapping.json")
    assert mapping.stat().st_mode & 0o777 == 0o600 and len(json.loads(mapping.read_text())["memories"]) == 9
    assert victim.read_text() == "precious\n"
    other = stack.workspace("import linked mapping")
    dave = stack.member(other)
    linked = tmp_path / "linked.mapping.json"
    planted_link(linked, victim)
    args = ["--file", str(out), "--workspace", other, "--default-member", dave.id, "--mapping", str(linked)]
    no = import_(stack, *args, check=False)
    assert no.returncode == 1 and no.stderr.strip() == (
        f"{linked}: cannot write the id mapping there (it is a symbolic link; name the file itself); "
        "nothing was imported"
    )
    assert stored(stack, other) == (0, 0, 0) and victim.read_text() == "precious\n"
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert leftovers == []


def test_a_pipe_or_other_special_file_is_refused_not_replaced(tmp_path):
    """A pipe at the target would be replaced by a plain file (and whatever reads it get nothing):
    the pre-check and the writer refuse it, and it is still a pipe after."""
    from cli import user_files

    fifo = tmp_path / "out.jsonl"
    os.mkfifo(fifo)
    assert user_files.unwritable(fifo) == user_files.SPECIAL
    assert user_files.unwritable(Path(os.devnull)) == user_files.SPECIAL
    with pytest.raises(OSError) as refused:
        user_files.write_private(fifo, ["x\n"])
    assert refused.value.strerror == user_files.SPECIAL and stat.S_ISFIFO(fifo.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]
    assert user_files.unwritable(tmp_path / "new.jsonl") is None


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary_file(tmp_path):
    """Whole or not at all, for every file the command line writes for a user (the export here, the
    import-legacy report): a failure part way keeps the old file as it was and removes what it began."""
    from cli.legacy_import import write_report
    from cli.legacy_store import Plan

    class Broken(Exception):
        pass

    def records():
        yield {"record": "memory", "id": "1"}
        raise Broken

    export_file, report = tmp_path / "export.jsonl", tmp_path / "report.jsonl"
    for old in (export_file, report):
        old.write_text("the old file\n")
    with pytest.raises(Broken):
        portability.write_export(export_file, {"record": "header"}, records())
    # A report row json cannot write: the report stops at it.
    plan = Plan(counts={}, report=[{"kind": "skipped"}, {"kind": "skipped", "detail": object()}], turns=[], items=[],
                entities=[])  # fmt: skip
    with pytest.raises(TypeError):
        write_report(report, plan, {"dry_run": True})
    assert export_file.read_text() == report.read_text() == "the old file\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.jsonl", "report.jsonl"]


def iso(when: datetime.datetime) -> str:
    return when.isoformat(timespec="microseconds").replace("+00:00", "Z")


def test_import_refuses_times_ahead_of_the_clock_naming_line_and_field(stack, source, empty, tmp_path):
    """Every time of the file is a past one: more than a day (vocabulary.MAX_FUTURE_SKEW) after the
    clock is refused naming the line and field before anything is written; just within is imported."""
    ws, alice, bob, ids, path, records = source
    target, carol = empty
    lines = path.read_text().splitlines()
    now = datetime.datetime.now(datetime.UTC)
    far = iso(now + datetime.timedelta(days=365_250))  # a thousand years on
    past_skew = iso(now + datetime.timedelta(days=1, hours=1))  # an hour past: no slow run brings it within
    within = iso(now + datetime.timedelta(hours=23))
    revised = next(n for n, r in enumerate(records) if r["record"] == "memory" and r["revisions"])
    turn = len(records) - 1
    assert records[turn]["record"] == "history_turn"

    def changed(n: int, change) -> list:
        rec = json.loads(lines[n])
        change(rec)
        return [*lines[:n], rec, *lines[n + 1 :]]

    cases = [
        (0, "exported_at", lambda r: r.update(exported_at=far)),
        (1, "created_at", lambda r: r.update(created_at=far)),
        (1, "updated_at", lambda r: r.update(updated_at=past_skew)),
        (1, "occurred_at", lambda r: r.update(occurred_at=past_skew)),
        (revised, "revisions[0]: replaced_at", lambda r: r["revisions"][0].update(replaced_at=far)),
        (revised, "revisions[0]: valid_from", lambda r: r["revisions"][0].update(valid_from=far)),
        (turn, "occurred_at", lambda r: r.update(occurred_at=past_skew)),
        (turn, "appended_at", lambda r: r.update(appended_at=far)),
    ]
    for i, (n, field, change) in enumerate(cases):
        file = write(tmp_path / f"ahead-{i}.jsonl", changed(n, change))
        if i == 1:  # the command: exit 1, the message, nothing written (``refused``)
            err = refused(stack, target, carol, file)
        else:  # the same check, without a process for each
            with pytest.raises(portability.ExportFileError) as caught:
                portability.read_export(file)
            err = str(caught.value)
        assert err.startswith(f"{file}:{n + 1}: {field} ") and "is in the future" in err, (field, err)
    # A revision's start of validity that is no time at all, or not a string.
    for i, bad in enumerate(("2024-13-01T00:00:00Z", 12)):
        file = write(
            tmp_path / f"rev-valid-{i}.jsonl", changed(revised, lambda r, v=bad: r["revisions"][0].update(valid_from=v))
        )
        with pytest.raises(portability.ExportFileError) as caught:
            portability.read_export(file)
        assert str(caught.value).startswith(f"{file}:{revised + 1}: revisions[0]: valid_from"), str(caught.value)

    def just_within(rec: dict) -> None:
        rec.update(created_at=within, updated_at=within, occurred_at=within)

    ok_lines = changed(1, just_within)
    ok_lines[turn] = {**json.loads(lines[turn]), "occurred_at": within, "appended_at": within}
    ok = write(tmp_path / "within.jsonl", ok_lines)
    import_(stack, "--file", str(ok), "--workspace", target, "--default-member", carol.id)
    with stack.db(target) as conn:
        times = conn.execute(
            "SELECT created_at, updated_at, occurred_at FROM memory WHERE body = %s", (records[1]["body"],)
        )
        assert times.fetchall() == [(datetime.datetime.fromisoformat(within),) * 3]
        turns = conn.execute("SELECT occurred_at FROM history_turn WHERE text = %s", (records[turn]["text"],))
        assert turns.fetchall() == [(datetime.datetime.fromisoformat(within),)]
