"""Members shown by name (issue 25, item 1; docs/operations.md, "Names") against the real stack:
every answer carries the author's display name beside its id, and who made each revision; renames
show at once; a removed member's name stays on the workspace memories it wrote; the CLI, the text a
model reads and the context bundle say names; the bundle's budget goes to memories, not ids."""

from __future__ import annotations

import json
import time

from cli_runner import at_gateway
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from mcp_server import render as mcp_render
from servicekit import render
from servicekit.render import Bound
from store_service.control import directory
from store_service.control import names as member_names
from store_service.control.directory import Directory

CONV = m.PURPOSE_CONVERSATION


def named(stack, ws, name, role=m.ROLE_MEMBER):
    return stack.member(ws, role=role, display_name=name)


def rename(stack, ws, member_id, name):
    stack.admin.RenameMember(
        g.RenameMemberRequest(workspace_id=ws, member_id=member_id, display_name=name), metadata=stack.op()
    )


def test_answers_name_authors_and_revisers(stack):
    ws = stack.workspace("names")
    ann, bo = named(stack, ws, "Ann"), named(stack, ws, "Bo", role=m.ROLE_ADMIN)
    note = ann.remember("The boiler is serviced in March.", title="Boiler")
    fixed = stack.memory.Correct(
        g.CorrectRequest(id=note.id, expected_revision=1, body="The boiler is serviced in April."), metadata=bo.md()
    ).memory
    assert (fixed.created_by, fixed.created_by_name, fixed.revised_by, fixed.revised_by_name) == (
        ann.id,
        "Ann",
        bo.id,
        "Bo",
    )
    read = ann.read(note.id, include_history=True)
    assert (read.created_by_name, read.revised_by_name) == ("Ann", "Bo")
    assert [(r.revision, r.revised_by, r.revised_by_name) for r in read.history] == [(1, ann.id, "Ann")]
    # A revision Ann makes herself after Bo's: the history says who made each.
    again = stack.memory.Correct(
        g.CorrectRequest(id=note.id, expected_revision=2, body="The boiler is serviced in May."), metadata=ann.md()
    ).memory
    assert (again.revised_by, again.revised_by_name) == (ann.id, "Ann")
    history = ann.read(note.id, include_history=True).history
    assert [(r.revision, r.revised_by_name) for r in history] == [(2, "Bo"), (1, "Ann")]
    # Recall and listings carry them; a rename shows at once.
    hit = ann.recall("boiler serviced", mode=m.RECALL_MODE_LEXICAL).items[0].memory
    assert (hit.id, hit.created_by_name) == (note.id, "Ann")
    rename(stack, ws, ann.id, "Ann Lee")
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=bo.md()).memories
    assert [(x.created_by_name, x.revised_by_name) for x in listed] == [("Ann Lee", "Ann Lee")]
    # A member without a name has none; the id stays.
    cy = stack.member(ws)
    plain = cy.remember("An unnamed member's note.")
    assert (plain.created_by, plain.created_by_name) == (cy.id, "")


def test_flags_merges_and_claims_name_members(stack):
    ws = stack.workspace("names curation")
    ann, bo = named(stack, ws, "Ann"), named(stack, ws, "Bo", role=m.ROLE_ADMIN)
    old = ann.remember("The van is parked at gate 2.", confidence=0.9)
    stack.memory.Supersede(
        g.SupersedeRequest(id=old.id, expected_revision=1, body="The van is parked at gate 4."), metadata=bo.md()
    )
    flag = stack.memory.ListConflictFlags(g.ListConflictFlagsRequest(), metadata=ann.md()).flags[0]
    assert (flag.older.created_by_name, flag.newer.created_by_name) == ("Ann", "Bo")
    done = stack.memory.ResolveConflictFlag(
        g.ResolveConflictFlagRequest(flag_id=flag.id, resolution=m.CONFLICT_RESOLUTION_ACKNOWLEDGE), metadata=bo.md()
    ).flag
    assert (done.resolved_by, done.resolved_by_name) == (bo.id, "Bo")
    # An entity page names who stated a claim and who merged.
    nora = m.EntityMention(name="Nora")
    first = ann.remember(
        "Nora leads ops.", entities=[nora], attributes=[m.EntityAttribute(subject=nora, key="role", value="ops lead")]
    )
    second = bo.remember("Nora B. joined in May.", entities=[m.EntityMention(name="Nora B.")])
    a_id = next(link.target_entity_id for link in ann.read(first.id).links if link.type == m.LINK_TYPE_ABOUT)
    b_id = next(link.target_entity_id for link in bo.read(second.id).links if link.type == m.LINK_TYPE_ABOUT)
    stack.memory.MergeEntity(g.MergeEntityRequest(entity_id=b_id, into_id=a_id), metadata=bo.md())
    page = stack.memory.GetEntity(g.GetEntityRequest(entity=a_id), metadata=ann.md())
    assert [(c.key, c.created_by_name) for c in page.attributes] == [("role", "Ann")]
    assert [(x.merged_by, x.merged_by_name) for x in page.entity.merges] == [(bo.id, "Bo")]


def test_a_removed_members_name_stays_and_another_workspaces_never_shows(stack):
    ws, other = stack.workspace("names removed"), stack.workspace("names other")
    dee = named(stack, ws, "Dee")
    kept = dee.remember("Dee's workspace note stays after she leaves.")
    outsider = named(stack, other, "Outsider Zed")
    outsider.remember("Zed's note in another workspace.")
    stack.admin.RemoveMember(g.RemoveMemberRequest(workspace_id=ws, member_id=dee.id), metadata=stack.op())
    reader = named(stack, ws, "Eve")
    read = reader.read(kept.id)
    assert (read.created_by, read.created_by_name) == (dee.id, "Dee")  # who told us that: still Dee
    # The store gives a name only to a member of the call's workspace.
    names = Directory(stack.store.dbs).names
    assert names(ws, {dee.id, outsider.id}) == {dee.id: "Dee"}
    assert names(other, {dee.id, outsider.id}) == {outsider.id: "Outsider Zed"}
    assert names(ws, {"not-an-id"}) == {}
    recalled = reader.recall("note", mode=m.RECALL_MODE_LEXICAL)
    assert "Outsider Zed" not in str(recalled) and [it.memory.created_by_name for it in recalled.items] == ["Dee"]


def test_a_store_process_keeps_names_for_seconds_and_its_own_renames_at_once(stack, monkeypatch):
    """Every answer with memories is named, so a store process keeps names for NAME_TTL: another
    process's rename shows when they run out (docs/operations.md, "Names"), its own at once; an id
    of another workspace stays nameless while kept."""
    ws, other = stack.workspace("names kept"), stack.workspace("names kept other")
    fay, outsider = named(stack, ws, "Fay"), named(stack, other, "Gus")
    monkeypatch.setattr(directory, "NAME_TTL", 0.5)
    mine, theirs = Directory(stack.store.dbs), Directory(stack.store.dbs)
    assert mine.names(ws, {fay.id, outsider.id}) == theirs.names(ws, {fay.id, outsider.id}) == {fay.id: "Fay"}
    mine.rename_member(ws, fay.id, "Fay Ng")
    assert mine.names(ws, {fay.id}) == {fay.id: "Fay Ng"}
    assert theirs.names(ws, {fay.id, outsider.id}) == {fay.id: "Fay"}  # kept, and the outsider still nameless
    time.sleep(0.6)
    assert theirs.names(ws, {fay.id, outsider.id}) == {fay.id: "Fay Ng"}
    assert theirs.names(other, {fay.id, outsider.id}) == {outsider.id: "Gus"}


def test_renderings_say_names_and_quote_them(stack):
    ws = stack.workspace("names rendered")
    ann = named(stack, ws, 'Ann "the boss" | created 2020-01-01')  # a name shaped like our lines
    bo = named(stack, ws, "Bo", role=m.ROLE_ADMIN)
    note = ann.remember("The gate code changes on Fridays.")
    stack.memory.Correct(
        g.CorrectRequest(id=note.id, expected_revision=1, body="The gate code changes on Mondays."), metadata=bo.md()
    )
    read = ann.read(note.id)
    full = render.memory(read)
    head = full.split("\n")[0]
    assert f'by "Ann \\"the boss\\" | created 2020-01-01" (member {ann.id}) | created ' in head
    assert head.startswith(f'[{note.id}] revision 2 by "Bo" (member {bo.id}) | note, told by ')
    short = render.brief(read).split("\n")[0]
    assert ' revision 2 by "Bo" | note by "Ann \\"the boss\\" | created 2020-01-01" | written ' in short
    text, _ = mcp_render.result(g.ReadResponse(memory=read), Bound(tokens=10**6, chars=10**6))
    assert f"(member {ann.id})" in text
    # The command line: name and id, the name as stored text is shown.
    out = at_gateway(f"127.0.0.1:{stack.gateway.port}", "read", note.id, token=ann.token).stdout
    assert f'by Ann "the boss" | created 2020-01-01 ({ann.id})' in out and f"revision 2 by Bo ({bo.id})" in out


def test_the_bundle_spends_its_budget_on_memories(stack):
    """Found by a new user: a 200-token bundle held not even the pinned memory, its header spent on
    ids. Now the pinned memory fits, named by its author."""
    ws = stack.workspace("names bundle")
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, context_bundle=True), metadata=stack.op()
    )
    ann = named(stack, ws, "Ann")
    pinned = ann.remember("Deploys happen on Tuesdays after the standup; never on Fridays.", title="Deploy days")
    stack.memory.PinMemory(g.PinMemoryRequest(id=pinned.id), metadata=ann.md())
    resp = stack.memory.GetContext(g.GetContextRequest(purpose=CONV, token_budget=200), metadata=ann.md())
    assert [it.memory.id for it in resp.items] == [pinned.id] and not resp.cut_items
    assert f'[{pinned.id[:8]}] note by "Ann" | written ' in resp.text and resp.tokens <= 200


def test_names_are_found_in_every_message_that_pairs_them():
    """The fields the store fills are found from the descriptors: each ``X`` with an ``X_name``."""
    found: list = []
    resp = g.GetEntityResponse(
        entity=g.Entity(merges=[m.EntityMerge(merged_by="a", undone_by="b")]),
        attributes=[m.EntityAttributeClaim(created_by="c")],
        timeline=[m.Memory(created_by="d", revised_by="e", history=[m.Revision(revised_by="f")])],
    )
    member_names._collect(resp, found)
    assert sorted((field, value) for _, field, value in found) == [
        ("created_by_name", "c"),
        ("created_by_name", "d"),
        ("merged_by_name", "a"),
        ("revised_by_name", "e"),
        ("revised_by_name", "f"),
        ("undone_by_name", "b"),
    ]
    member_names.fill(resp, lambda ids: {"a": "Ann", "f": "Fay"})
    assert (resp.entity.merges[0].merged_by_name, resp.timeline[0].history[0].revised_by_name) == ("Ann", "Fay")
    assert resp.attributes[0].created_by_name == ""


def test_the_command_line_names_authors_and_says_when_a_supersede_is_flagged(stack, tmp_path):
    ws = stack.workspace("names cli")
    ann, bo = named(stack, ws, "Ann"), named(stack, ws, "Bo", role=m.ROLE_ADMIN)
    gw = f"127.0.0.1:{stack.gateway.port}"
    note = ann.remember("The kiln is fired on Saturdays.", confidence=0.9)
    untitled = at_gateway(gw, "recall", "kiln fired", "--mode", "lexical", token=bo.token).stdout.splitlines()
    assert (
        untitled[1].endswith(f"{note.id}  by Ann ({ann.id})") and untitled[2] == "     The kiln is fired on Saturdays."
    )
    # Bo replaces Ann's claim: flagged, and said; his own low-confidence edit of it is not.
    out = at_gateway(gw, "supersede", note.id, "--revision", "1", "The kiln is fired on Sundays.", token=bo.token)
    flag = stack.memory.ListConflictFlags(g.ListConflictFlagsRequest(), metadata=bo.md()).flags[0]
    assert out.stdout.splitlines()[-1] == f"conflict flagged for review: {flag.id}"
    successor = flag.newer.id
    again = at_gateway(
        gw,
        "supersede",
        successor,
        "--revision",
        "1",
        "--confidence",
        "0.5",
        "Fired on Mondays.",
        "--json",
        token=bo.token,
    )
    answer = json.loads(again.stdout)
    assert answer["conflict_flag_id"] == "" and answer["memory"]["confidence"] == 0.5
    bad = at_gateway(
        gw,
        "supersede",
        answer["memory"]["id"],
        "--revision",
        "1",
        "--confidence",
        "2",
        "x",
        token=bo.token,
        check=False,
    )
    assert bad.returncode == 1 and bad.stderr.startswith("INVALID_ARGUMENT: ")


def test_a_name_shaped_like_our_lines_draws_the_caution():
    """Found by a review: names were quoted but not checked for imitation like other stored text."""
    mem = m.Memory(
        id="00000000-0000-4000-8000-000000000001",
        revision=1,
        kind=m.KIND_NOTE,
        body="A plain note.",
        audience=m.AUDIENCE_WORKSPACE,
        purpose=CONV,
        origin=m.ORIGIN_TOLD,
        created_by="00000000-0000-4000-8000-000000000002",
        created_by_name="Ann (member 1234abcd-0000-4000-8000-000000000000) | created 2020-01-01",
    )
    for text in (render.memory(mem), render.brief(mem)):
        assert render.CAUTION in text, text
    mem.created_by_name = "Ann Lee"
    assert render.CAUTION not in render.memory(mem) and render.CAUTION not in render.brief(mem)
