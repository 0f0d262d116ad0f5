"""The operator's everyday commands (issue 25, item 2; docs/operations.md) against the real stack:
workspaces listed, shown, renamed, deleted (database, rows, pool and tokens gone, calls in flight
failing cleanly, nothing else touched), names unique and accepted wherever an id is, members
listed, given new tokens and renamed, and each with its bad input."""

from __future__ import annotations

import json
import threading
import uuid

import grpc
import psycopg
import pytest
from cli_runner import at_gateway
from conftest import code_of
from psycopg.conninfo import make_conninfo
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from yoyo import get_backend, read_migrations
from yoyo.migrations import MigrationList

from store_service.database import MIGRATIONS, _yoyo_url, migration_lock

NOT_FOUND, INVALID = grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT
EXISTS, PRECONDITION = grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.FAILED_PRECONDITION
UNAUTH = grpc.StatusCode.UNAUTHENTICATED


def unique(prefix: str) -> str:
    return f"{prefix} {uuid.uuid4().hex[:8]}"


def test_names_are_unique_and_stand_for_ids(stack):
    admin, op = stack.admin, stack.op()
    name = unique("Ops Team")
    ws = admin.CreateWorkspace(g.CreateWorkspaceRequest(name=name), metadata=op).workspace_id
    # Taken, whatever the case; a UUID is not a name; an unknown name is NOT_FOUND.
    assert code_of(admin.CreateWorkspace, g.CreateWorkspaceRequest(name=name.upper()), metadata=op) == EXISTS
    assert code_of(admin.CreateWorkspace, g.CreateWorkspaceRequest(name=str(uuid.uuid4())), metadata=op) == INVALID
    for bad in ("", "  ", "x" * 201, "a\x00b"):
        assert code_of(admin.CreateWorkspace, g.CreateWorkspaceRequest(name=bad), metadata=op) == INVALID
    missing = g.GetWorkspaceRequest(workspace_id="no such workspace")
    assert code_of(admin.GetWorkspace, missing, metadata=op) == NOT_FOUND
    # The name works wherever the id does: show, settings, members, imports.
    shown = admin.GetWorkspace(g.GetWorkspaceRequest(workspace_id=name.lower()), metadata=op).workspace
    assert (shown.id, shown.name, shown.member_count) == (ws, name, 0)
    admin.UpdateWorkspaceSettings(g.UpdateWorkspaceSettingsRequest(workspace_id=name, dense_floor=0.4), metadata=op)
    alice = admin.AddMember(g.AddMemberRequest(workspace_id=name, display_name="Alice"), metadata=op)
    shown = admin.GetWorkspace(g.GetWorkspaceRequest(workspace_id=ws), metadata=op).workspace
    assert (shown.member_count, round(shown.dense_floor, 2)) == (1, 0.4)
    imported = admin.ImportMemories(
        g.ImportMemoriesRequest(
            workspace_id=name,
            memories=[
                m.ImportedMemory(
                    import_key="k1",
                    author_member_id=alice.member_id,
                    kind=m.KIND_NOTE,
                    body="Imported by name.",
                    audience=m.AUDIENCE_WORKSPACE,
                    purpose=m.PURPOSE_CONVERSATION,
                )
            ],
        ),
        metadata=op,
    )
    assert imported.memories[0].status == m.IMPORT_STATUS_CREATED
    # Rename: the old name stops working, the new one works; taken and bad names are refused.
    other = stack.workspace("other")
    other_name = admin.GetWorkspace(g.GetWorkspaceRequest(workspace_id=other), metadata=op).workspace.name
    new = unique("Renamed Team")
    renamed = admin.RenameWorkspace(g.RenameWorkspaceRequest(workspace_id=name, name=new), metadata=op).workspace
    assert (renamed.id, renamed.name) == (ws, new)
    assert code_of(admin.GetWorkspace, g.GetWorkspaceRequest(workspace_id=name), metadata=op) == NOT_FOUND
    taken = g.RenameWorkspaceRequest(workspace_id=ws, name=other_name.upper())
    assert code_of(admin.RenameWorkspace, taken, metadata=op) == EXISTS
    same = admin.RenameWorkspace(g.RenameWorkspaceRequest(workspace_id=ws, name=new.lower()), metadata=op)
    assert same.workspace.name == new.lower()  # its own name in another case is not "taken"
    bad = g.RenameWorkspaceRequest(workspace_id=ws, name=str(uuid.uuid4()))
    assert code_of(admin.RenameWorkspace, bad, metadata=op) == INVALID
    unknown = g.RenameWorkspaceRequest(workspace_id=str(uuid.uuid4()), name=unique("x"))
    assert code_of(admin.RenameWorkspace, unknown, metadata=op) == NOT_FOUND


def test_workspaces_are_listed_by_pages(stack):
    admin, op = stack.admin, stack.op()
    made = [stack.workspace("listed") for _ in range(3)]
    seen, token = [], ""
    while True:
        page = admin.ListWorkspaces(g.ListWorkspacesRequest(page_size=1, page_token=token), metadata=op)
        assert len(page.workspaces) <= 1
        seen += [w.id for w in page.workspaces]
        token = page.next_page_token
        if not token:
            break
    assert seen.index(made[0]) < seen.index(made[1]) < seen.index(made[2])  # oldest first
    assert len(seen) == len(set(seen))
    assert code_of(admin.ListWorkspaces, g.ListWorkspacesRequest(page_token="nonsense"), metadata=op) == INVALID
    assert code_of(admin.ListWorkspaces, g.ListWorkspacesRequest(page_size=-1), metadata=op) == INVALID
    member = stack.member(made[0])
    assert code_of(admin.ListWorkspaces, g.ListWorkspacesRequest(), metadata=member.md()) == UNAUTH


def test_members_listed_given_tokens_and_renamed(stack):
    admin, op = stack.admin, stack.op()
    ws = stack.workspace("members")
    ann = admin.AddMember(
        g.AddMemberRequest(workspace_id=ws, display_name="Ann", purposes=[m.PURPOSE_TASKS]), metadata=op
    )
    bo = admin.AddMember(g.AddMemberRequest(workspace_id=ws, display_name="Bo", role=m.ROLE_ADMIN), metadata=op)
    twin = admin.AddMember(g.AddMemberRequest(workspace_id=ws, display_name="Bo"), metadata=op)
    listed = admin.ListMembers(g.ListMembersRequest(workspace_id=ws), metadata=op).members
    assert [(x.id, x.display_name, x.role, list(x.purposes), x.token_count, x.removed) for x in listed] == [
        (ann.member_id, "Ann", m.ROLE_MEMBER, [m.PURPOSE_TASKS], 1, False),
        (bo.member_id, "Bo", m.ROLE_ADMIN, sorted(m.Purpose.values())[1:], 1, False),
        (twin.member_id, "Bo", m.ROLE_MEMBER, sorted(m.Purpose.values())[1:], 1, False),
    ]
    assert ann.token not in str(listed)
    # A new token by name: the old one keeps working unless --revoke-others.
    issued = admin.IssueMemberToken(g.IssueMemberTokenRequest(workspace_id=ws, member_id="Ann"), metadata=op)
    assert (issued.member_id, issued.revoked) == (ann.member_id, 0)
    for token in (ann.token, issued.token):
        listing = stack.memory.ListMemories(g.ListMemoriesRequest(purpose=m.PURPOSE_TASKS), metadata=bearer(token))
        assert list(listing.memories) == []
    again = admin.IssueMemberToken(
        g.IssueMemberTokenRequest(workspace_id=ws, member_id=ann.member_id, revoke_others=True), metadata=op
    )
    assert again.revoked == 2
    old = g.ListMemoriesRequest(purpose=m.PURPOSE_TASKS)
    assert code_of(stack.memory.ListMemories, old, metadata=bearer(issued.token)) == UNAUTH
    stack.memory.ListMemories(old, metadata=bearer(again.token))
    # Ambiguous, unknown, another workspace's member, a removed member, an unknown workspace.
    ambiguous = g.IssueMemberTokenRequest(workspace_id=ws, member_id="Bo")
    assert code_of(admin.IssueMemberToken, ambiguous, metadata=op) == PRECONDITION
    with pytest.raises(grpc.RpcError) as err:
        admin.IssueMemberToken(ambiguous, metadata=op)
    assert bo.member_id in err.value.details() and twin.member_id in err.value.details()
    stranger = stack.member(stack.workspace("elsewhere"))
    for who in ("Nobody", stranger.id, "not-a-uuid-or-name\x00"):
        req = g.IssueMemberTokenRequest(workspace_id=ws, member_id=who)
        assert code_of(admin.IssueMemberToken, req, metadata=op) == NOT_FOUND
    admin.RemoveMember(g.RemoveMemberRequest(workspace_id=ws, member_id=twin.member_id), metadata=op)
    removed = g.IssueMemberTokenRequest(workspace_id=ws, member_id=twin.member_id)
    assert code_of(admin.IssueMemberToken, removed, metadata=op) == PRECONDITION
    bad_ws = g.IssueMemberTokenRequest(workspace_id=unique("nowhere"), member_id=ann.member_id)
    assert code_of(admin.IssueMemberToken, bad_ws, metadata=op) == NOT_FOUND
    # Revoke one token by its value: only that one; a token that is not the member's is NOT_FOUND.
    one = admin.IssueMemberToken(g.IssueMemberTokenRequest(workspace_id=ws, member_id="ann"), metadata=op)
    req = g.RevokeMemberRequest(workspace_id=ws, member_id=ann.member_id, token=one.token)
    assert admin.RevokeMember(req, metadata=op).revoked == 1
    assert admin.RevokeMember(req, metadata=op).revoked == 0  # again: nothing more
    assert code_of(stack.memory.ListMemories, old, metadata=bearer(one.token)) == UNAUTH
    stack.memory.ListMemories(old, metadata=bearer(again.token))  # the other stays
    for token in (bo.token, "rct_nonsense", "x" * 600):
        req = g.RevokeMemberRequest(workspace_id=ws, member_id=ann.member_id, token=token)
        assert code_of(admin.RevokeMember, req, metadata=op) == NOT_FOUND
    # Rename; a name is one plain line.
    renamed = admin.RenameMember(
        g.RenameMemberRequest(workspace_id=ws, member_id=ann.member_id, display_name="  Ann Lee "), metadata=op
    ).member
    assert (renamed.display_name, renamed.token_count) == ("Ann Lee", 1)
    for bad in ("two\nlines", "x" * 201, "bell\x07"):
        req = g.RenameMemberRequest(workspace_id=ws, member_id=ann.member_id, display_name=bad)
        assert code_of(admin.RenameMember, req, metadata=op) == INVALID
        assert code_of(admin.AddMember, g.AddMemberRequest(workspace_id=ws, display_name=bad), metadata=op) == INVALID
    listed = admin.ListMembers(g.ListMembersRequest(workspace_id=ws, page_size=2), metadata=op)
    assert len(listed.members) == 2 and listed.next_page_token
    rest = admin.ListMembers(
        g.ListMembersRequest(workspace_id=ws, page_size=2, page_token=listed.next_page_token), metadata=op
    )
    assert [x.removed for x in rest.members] == [True] and not rest.next_page_token
    wrong = g.ListMembersRequest(workspace_id=stack.workspace("x"), page_token=listed.next_page_token)
    assert code_of(admin.ListMembers, wrong, metadata=op) == INVALID  # a token of another workspace's list


def bearer(token: str):
    return (("authorization", f"Bearer {token}"),)


def _database_exists(stack, db_name: str) -> bool:
    with psycopg.connect(stack.store.dbs.control_conninfo) as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db_name,)).fetchone() is not None


def _control_rows(stack, ws: str) -> tuple[int, int, int]:
    with psycopg.connect(stack.store.dbs.control_conninfo) as conn:
        return conn.execute(
            """SELECT (SELECT count(*) FROM workspace WHERE id = %(ws)s),
                      (SELECT count(*) FROM member WHERE workspace_id = %(ws)s),
                      (SELECT count(*) FROM credential c JOIN member mb ON mb.id = c.member_id
                        WHERE mb.workspace_id = %(ws)s)""",
            {"ws": ws},
        ).fetchone()


def test_deleting_a_workspace_leaves_nothing_and_touches_nothing_else(stack):
    admin, op = stack.admin, stack.op()
    doomed, kept = stack.workspace("doomed"), stack.workspace("kept")
    with psycopg.connect(stack.store.dbs.control_conninfo) as conn:
        db_name = conn.execute("SELECT db_name FROM workspace WHERE id = %s", (doomed,)).fetchone()[0]
    a, b = stack.member(doomed), stack.member(kept)
    a.remember("A note in the doomed workspace.")
    kept_note = b.remember("A note that must survive.")
    assert ("main", db_name) in stack.store.dbs._pools  # the store opened a pool to write
    # Calls in flight in both workspaces while it is deleted.
    stop, outcomes = threading.Event(), {"doomed": [], "kept": []}

    def hammer(member, key):
        while not stop.is_set():
            outcomes[key].append(code_of(member.recall, "note"))
            outcomes[key].append(code_of(member.remember, "Another note."))

    threads = [threading.Thread(target=hammer, args=(x, k)) for x, k in ((a, "doomed"), (b, "kept"))]
    for t in threads:
        t.start()
    while len(outcomes["doomed"]) < 4:
        threading.Event().wait(0.05)
    resp = admin.DeleteWorkspace(g.DeleteWorkspaceRequest(workspace_id=doomed), metadata=op)
    after = len(outcomes["kept"])
    while len(outcomes["kept"]) < after + 4:
        threading.Event().wait(0.05)
    stop.set()
    for t in threads:
        t.join()
    assert (resp.workspace_id, resp.members_deleted, resp.resumed) == (doomed, 1, False)
    clean = {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE, NOT_FOUND, UNAUTH}
    assert set(outcomes["doomed"]) <= clean, outcomes["doomed"]
    assert outcomes["doomed"][-1] == UNAUTH  # its token fails from the deletion on
    assert set(outcomes["kept"]) == {grpc.StatusCode.OK}
    # Nothing left: database, rows, pool; the other workspace whole.
    assert not _database_exists(stack, db_name)
    assert _control_rows(stack, doomed) == (0, 0, 0)
    assert ("main", db_name) not in stack.store.dbs._pools
    assert code_of(admin.GetWorkspace, g.GetWorkspaceRequest(workspace_id=doomed), metadata=op) == NOT_FOUND
    assert code_of(admin.DeleteWorkspace, g.DeleteWorkspaceRequest(workspace_id=doomed), metadata=op) == NOT_FOUND
    assert b.read(kept_note.id).body == "A note that must survive."
    assert _control_rows(stack, kept)[:2] == (1, 1)


def test_an_interrupted_deletion_is_finished_by_the_next(stack):
    admin, op = stack.admin, stack.op()
    ws = stack.workspace("half deleted")
    stack.member(ws).remember("Half way.")
    with psycopg.connect(stack.store.dbs.control_conninfo, autocommit=True) as conn:
        conn.execute("UPDATE workspace SET deleted_at = now() WHERE id = %s", (ws,))  # step 1 only
        db_name = conn.execute("SELECT db_name FROM workspace WHERE id = %s", (ws,)).fetchone()[0]
    assert code_of(admin.GetWorkspace, g.GetWorkspaceRequest(workspace_id=ws), metadata=op) == NOT_FOUND
    assert ws not in [
        w.id for w in admin.ListWorkspaces(g.ListWorkspacesRequest(page_size=200), metadata=op).workspaces
    ]
    resp = admin.DeleteWorkspace(g.DeleteWorkspaceRequest(workspace_id=ws), metadata=op)
    assert resp.resumed and not _database_exists(stack, db_name) and _control_rows(stack, ws) == (0, 0, 0)


def test_the_commands(stack, tmp_path):
    gw = f"127.0.0.1:{stack.gateway.port}"
    op = ("--operator-token", stack.operator_token)
    name = unique("Cli Team")
    ws = json.loads(at_gateway(gw, "workspace", "create", name, "--json", *op).stdout)["workspace_id"]
    add = at_gateway(gw, "member", "add", "--workspace", name, "--name", "Cleo", *op).stdout.splitlines()
    cleo_id, cleo_token = add[0].split()[1], add[1].split()[1]
    stack.memory.Remember(
        g.RememberRequest(
            purpose=m.PURPOSE_CONVERSATION, kind=m.KIND_NOTE, body="Cleo's private plan.", audience=m.AUDIENCE_MEMBER
        ),
        metadata=bearer(cleo_token),
    )
    listed, token = "", None  # every page: the session's workspaces may be more than one page
    while token != "":
        page = at_gateway(
            gw, "workspace", "list", "--page-size", "200", *(("--page-token", token) if token else ()), *op
        )
        lines = page.stdout.splitlines()
        token = lines[-1].removeprefix("next page: --page-token ") if lines[-1].startswith("next page:") else ""
        listed += page.stdout
    assert f"{ws}  {name!r}  1 member(s)" in listed
    shown = at_gateway(gw, "workspace", "show", name, *op).stdout.splitlines()
    assert shown[:2] == [f"workspace {ws}", f"  name: {name!r}"] and "  members: 1 (0 removed)" in shown
    members = at_gateway(gw, "member", "list", "--workspace", name, *op).stdout.splitlines()
    assert members == [f"{cleo_id}  'Cleo'  member  purposes=conversation,tasks,reporting,administration  tokens=1"]
    token_out = at_gateway(gw, "member", "token", "--workspace", name, "Cleo", "--revoke-others", *op).stdout
    assert token_out.splitlines()[0] == f"member {cleo_id}" and token_out.splitlines()[2] == "revoked 1 other token(s)"
    assert at_gateway(gw, "member", "rename", "--workspace", ws, "Cleo", "Cleo M", *op).stdout.strip() == (
        f"member {cleo_id} is now named 'Cleo M'"
    )
    missing = at_gateway(gw, "workspace", "show", "no such team", *op, check=False)
    assert (missing.returncode, missing.stderr.strip()) == (1, "NOT_FOUND: no workspace named 'no such team'")
    # Delete: refused without --yes; with --export, the file first, then nothing left.
    refused = at_gateway(gw, "workspace", "delete", name, *op, check=False)
    assert refused.returncode == 1 and "run again with --yes" in refused.stderr
    assert _control_rows(stack, ws)[0] == 1
    out = tmp_path / "team.jsonl"
    deleted = at_gateway(gw, "workspace", "delete", name, "--yes", "--export", str(out), *op).stdout.splitlines()
    assert deleted == [
        f"exported 1 memories to {out}",
        f"deleted workspace {ws} ({name!r}): its database, 2 member(s) and their tokens",  # the export's reader too
    ]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.get("body") for r in records[1:]] == ["Cleo's private plan."]
    assert records[1]["author"] == cleo_id and records[1]["audience"] == "member"
    assert _control_rows(stack, ws) == (0, 0, 0)
    stays = stack.workspace("stays")
    stayer = stack.member(stays)
    unwritable = at_gateway(
        gw,
        "workspace",
        "delete",
        stays,
        "--yes",
        "--export",
        str(tmp_path / "no" / "such" / "dir.jsonl"),
        *op,
        check=False,
    )
    assert unwritable.returncode == 1 and "nothing was deleted" in unwritable.stderr
    # The tokens the export issued itself are revoked: the member has its one token, which works.
    members = stack.admin.ListMembers(g.ListMembersRequest(workspace_id=stays), metadata=stack.op()).members
    assert [(x.token_count, x.removed) for x in members] == [(1, False), (0, True)]  # the reader it added: removed
    stayer.remember("Still here after the refused deletion.")


def test_the_migration_renames_duplicates_and_records_them(pg):
    """Control migration 0012 on a control plane where three workspaces shared a name (any case), a
    fourth already had the first free suffixed name, and a fifth was named with another's id."""
    db = f"scratch_ctl_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db}"')
    url = make_conninfo(pg, dbname=db)
    try:
        _migrate(url, last="0011_inject_gate")
        ids = [uuid.uuid4() for _ in range(5)]
        given = ["Team", "team", "Team (2)", "TEAM", ids[0].hex]  # the last spells another's id
        with psycopg.connect(url, autocommit=True) as conn:
            for n, (ws, name) in enumerate(zip(ids, given, strict=True)):
                conn.execute(
                    "INSERT INTO workspace (id, name, db_name, created_at)"
                    " VALUES (%s, %s, %s, now() + %s * interval '1 s')",
                    (ws, name, f"db{n}", n),
                )
        _migrate(url, last="9999")
        with psycopg.connect(url) as conn:
            names = dict(conn.execute("SELECT id, name FROM workspace").fetchall())
            renamed = dict(conn.execute("SELECT workspace_id, old_name FROM workspace_renamed").fetchall())
        assert [names[i] for i in ids] == ["Team", "team (3)", "Team (2)", "TEAM (4)", f"workspace {ids[0].hex}"]
        assert renamed == {ids[1]: "team", ids[3]: "TEAM", ids[4]: ids[0].hex}
    finally:
        with psycopg.connect(pg, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{db}" WITH (FORCE)')


def _migrate(url: str, last: str) -> None:
    backend = get_backend(_yoyo_url(url))
    try:
        wanted = MigrationList([x for x in read_migrations(str(MIGRATIONS / "control")) if x.id <= last])
        with migration_lock(url):
            backend.apply_migrations(backend.to_apply(wanted))
    finally:
        backend.connection.close()


def test_the_export_before_a_deletion_keeps_every_memory_and_its_links(stack, tmp_path):
    """Found by a review: the union of the members' views kept the first one, in which a successor
    another member could not see was missing; and the workspace memories of a removed author (nobody
    left to read them) were not exported at all."""
    ws = stack.workspace("export union")
    ann, bo = stack.member(ws), stack.member(ws, role=m.ROLE_ADMIN)
    old = ann.remember("The archive moves to room 5.")
    stack.memory.Supersede(
        g.SupersedeRequest(
            id=old.id, expected_revision=1, body="The archive moves to room 6.", audience=m.AUDIENCE_MEMBER
        ),
        metadata=bo.md(),
    )
    leaver = stack.member(ws)
    kept = leaver.remember("A note whose author left.")
    stack.admin.RemoveMember(g.RemoveMemberRequest(workspace_id=ws, member_id=leaver.id), metadata=stack.op())
    out = tmp_path / "union.jsonl"
    gw = f"127.0.0.1:{stack.gateway.port}"
    at_gateway(gw, "workspace", "delete", ws, "--yes", "--export", str(out), "--operator-token", stack.operator_token)
    records = {r["id"]: r for r in (json.loads(line) for line in out.read_text().splitlines()[1:])}
    assert set(records) == {old.id, records[old.id]["superseded_by"], kept.id}
    successor = records[records[old.id]["superseded_by"]]
    assert successor["supersedes"] == old.id and successor["audience"] == "member" and records[old.id]["superseded"]


def test_the_command_finishes_an_interrupted_deletion(stack):
    ws = stack.workspace("cli resume")
    name = stack.admin.GetWorkspace(g.GetWorkspaceRequest(workspace_id=ws), metadata=stack.op()).workspace.name
    with psycopg.connect(stack.store.dbs.control_conninfo, autocommit=True) as conn:
        conn.execute("UPDATE workspace SET deleted_at = now() WHERE id = %s", (ws,))
    taken = g.CreateWorkspaceRequest(name=name)
    with pytest.raises(grpc.RpcError) as err:
        stack.admin.CreateWorkspace(taken, metadata=stack.op())
    assert err.value.code() == EXISTS and "is being deleted" in err.value.details()
    gw, op = f"127.0.0.1:{stack.gateway.port}", ("--operator-token", stack.operator_token)
    out = at_gateway(gw, "workspace", "delete", name, "--yes", *op).stdout.strip()
    assert out.startswith(f"deleted workspace {ws} ({name!r}) (finishing an earlier, interrupted deletion)")
    assert _control_rows(stack, ws) == (0, 0, 0)
    assert at_gateway(gw, "workspace", "delete", name, "--yes", *op, check=False).returncode == 1  # gone now


def test_names_print_as_themselves_and_ids_parse_one_way(stack):
    ws = stack.workspace("name shapes")
    op = stack.op()
    for bad in ("Ann\x85Lee", "Ann\x9b31mLee", "a\u2028b", "a\u2029b", "\u202eevil", "zero\u200bwidth", "tab\there"):
        req = g.AddMemberRequest(workspace_id=ws, display_name=bad)
        assert code_of(stack.admin.AddMember, req, metadata=op) == INVALID, repr(bad)
        assert code_of(stack.admin.CreateWorkspace, g.CreateWorkspaceRequest(name=bad), metadata=op) == INVALID
    ok = stack.admin.AddMember(g.AddMemberRequest(workspace_id=ws, display_name="Zoë Ħart 李"), metadata=op)
    # Every spelling of an id finds it (urn:uuid:, braces, no hyphens), as the id itself.
    plain = uuid.UUID(ws)
    for spelled in (f"urn:uuid:{ws}", f"{{{ws}}}", plain.hex, ws.upper()):
        got = stack.admin.GetWorkspace(g.GetWorkspaceRequest(workspace_id=spelled), metadata=op).workspace.id
        assert got == ws, spelled
        req = g.RenameMemberRequest(workspace_id=spelled, member_id=f"urn:uuid:{ok.member_id}", display_name="Zoe")
        assert stack.admin.RenameMember(req, metadata=op).member.display_name == "Zoe"
    missing = g.GetWorkspaceRequest(workspace_id=f"urn:uuid:{uuid.uuid4()}")
    assert code_of(stack.admin.GetWorkspace, missing, metadata=op) == NOT_FOUND


def test_a_reference_python_would_read_as_another_id_is_a_name(stack):
    """Python's uuid.UUID reads "+" and 31 hex digits, an "_" among them, or full-width digits, as a
    UUID (some as another id than they show); a reference spelled so is a name, looked up as one."""
    op = stack.op()
    for name in ("+" + "0" * 31, "1234_678" + "9" * 24, "\uff11" * 32):
        ws = stack.admin.CreateWorkspace(g.CreateWorkspaceRequest(name=name), metadata=op).workspace_id
        assert stack.admin.GetWorkspace(g.GetWorkspaceRequest(workspace_id=name), metadata=op).workspace.id == ws
        member = stack.admin.AddMember(g.AddMemberRequest(workspace_id=ws, display_name=name), metadata=op)
        req = g.RenameMemberRequest(workspace_id=name, member_id=name, display_name="Zoe")
        renamed = stack.admin.RenameMember(req, metadata=op).member
        assert (renamed.id, renamed.display_name) == (member.member_id, "Zoe")
    for still_an_id in (str(uuid.uuid4()).upper(), "{" + str(uuid.uuid4()) + "}", uuid.uuid4().hex):
        refused = g.CreateWorkspaceRequest(name=still_an_id)
        assert code_of(stack.admin.CreateWorkspace, refused, metadata=op) == INVALID, still_an_id


def test_deleting_a_workspace_with_work_queued_leaves_the_embedding_worker_whole(stack):
    """Found by a review: a deleted workspace with queued jobs stayed in the worker's view, and
    every cycle failed on it, so other workspaces' memories were never embedded."""
    doomed, other = stack.workspace("queued doomed"), stack.workspace("queued other")
    writer = stack.member(doomed)
    with stack.embed_down():
        for i in range(3):
            writer.remember(f"Queued note {i}.")
        stack.admin.DeleteWorkspace(g.DeleteWorkspaceRequest(workspace_id=doomed), metadata=stack.op())
    assert stack.store.worker._thread.is_alive()
    note = stack.member(other).remember("Embedded after the deletion.")
    stack.wait_backlog_empty(timeout=60)
    with stack.db(other) as conn:
        assert conn.execute("SELECT count(*) FROM memory_embedding WHERE memory_id = %s", (note.id,)).fetchone()[0] == 1
