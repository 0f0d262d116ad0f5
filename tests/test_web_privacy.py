"""A member never sees another member's member-only memory anywhere on the screen: not in search (any
mode, history included), browse (every page, superseded ones too), a memory's page (its own id
answers NOT_FOUND as a missing one; its derivation is not among a readable memory's derivations), the
duplicate proposals (every page), the conflict flags (resolved too, every page) or the expiry review
(every page). The same pages signed in as the owner show them, so each check could fail."""

from __future__ import annotations

import datetime
import uuid

import pytest
from conftest import sign_in
from google.protobuf import timestamp_pb2
from playwright.sync_api import expect
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

pytestmark = pytest.mark.browser

MARK = "Zanzibar-Private-7Q"  # only in bob's member-only memories


def ts(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


@pytest.fixture(scope="module")
def world(stack):
    """Alice and bob share a workspace whose expiry gate is on (30 days). Both write workspace memories
    close to bob's member-only ones; bob derives a member-only memory from alice's, supersedes one of his
    own (a conflict flag: both confidences 0.9) and has an old one (imported, updated 400 days ago)."""
    ws = stack.workspace("web privacy")
    alice, bob = stack.member(ws), stack.member(ws)
    shared = alice.remember(
        "The team lunch is on Friday at noon in the canteen.", title="Lunch", entities=[m.EntityMention(name="Canteen")]
    )
    twin = alice.remember("The team lunch is on Fridays at noon in the canteen.", title="Lunch")  # a visible pair
    private = [
        bob.remember(f"{MARK}: the team lunch is on Friday at noon in the canteen.", audience=m.AUDIENCE_MEMBER),
        bob.remember(f"{MARK}: the team lunch is Friday at noon, canteen.", audience=m.AUDIENCE_MEMBER),
    ]
    private.append(
        stack.memory.Derive(
            g.DeriveRequest(source_ids=[shared.id, private[0].id], body=f"{MARK}: I skip the Friday lunch."),
            metadata=bob.md(),
        ).memory
    )
    # A conflict flag only bob can see: his private claim replaced, by his own decision, with alice's
    # workspace memory (two authors disagree); alice cannot read the older, so not the flag.
    old = bob.remember(f"{MARK}: my locker is number 12.", audience=m.AUDIENCE_MEMBER, confidence=0.9)
    lockers = alice.remember("Lockers are reassigned every term.", confidence=0.9)
    stack.memory.DecideDuplicateProposal(
        g.DecideDuplicateProposalRequest(
            memory_a_id=old.id,
            memory_b_id=lockers.id,
            decision=m.DUPLICATE_DECISION_SUPERSEDE,
            keep_id=lockers.id,
            expected_revision=1,
        ),
        metadata=bob.md(),
    )
    new = bob.remember(f"{MARK}: my locker is number 21.", audience=m.AUDIENCE_MEMBER, confidence=0.9)
    private += [old, new]
    # Bob states an attribute of the shared Canteen in a member-only memory, and merges his private
    # nickname for it into it: the entity pages show him both, and alice neither.
    states = bob.remember(
        f"{MARK}: the canteen's back door code.",
        audience=m.AUDIENCE_MEMBER,
        entities=[m.EntityMention(name=f"{MARK} nick")],
        attributes=[m.EntityAttribute(subject=m.EntityMention(name="Canteen"), key="door_code", value=f"{MARK} 4471")],
    )
    nick = next(r.entity_id for r in states.entity_resolutions if r.name == f"{MARK} nick")
    canteen = next(r.entity_id for r in states.entity_resolutions if r.name == "Canteen")
    stack.memory.MergeEntity(
        g.MergeEntityRequest(entity_id=nick, into_id=canteen, reason=f"{MARK} is my name for it"), metadata=bob.md()
    )
    private.append(states)
    long_ago = ts(datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=400))
    imported = stack.admin.ImportMemories(
        g.ImportMemoriesRequest(
            workspace_id=ws,
            memories=[
                m.ImportedMemory(
                    import_key=f"privacy:{who}",
                    author_member_id=member.id,
                    body=body,
                    audience=audience,
                    purpose=m.PURPOSE_CONVERSATION,
                    created_at=long_ago,
                    updated_at=long_ago,
                )
                for who, member, body, audience in (
                    ("bob", bob, f"{MARK}: my old bike lock code is 9911.", m.AUDIENCE_MEMBER),
                    ("alice", alice, "The old bike shed was painted green.", m.AUDIENCE_WORKSPACE),
                )
            ],
        ),
        metadata=stack.op(),
    )
    private.append(bob.read(imported.memories[0].id))
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, expiry_days=30), metadata=stack.op()
    )
    stack.wait_backlog_empty()
    return {
        "ws": ws,
        "alice": alice,
        "bob": bob,
        "shared": shared,
        "twin": twin,
        "private": private,
        "canteen": canteen,
        "nick": nick,
    }


def visit_every_page(page, base: str, path: str) -> list[str]:
    """``path`` and every next page after it (page size 1 where the path sets it): their HTML."""
    page.goto(f"{base}{path}")
    seen = [page.content()]
    while page.locator("#next-page").count():
        page.locator("#next-page").click()
        page.wait_for_load_state()  # the next page's whole document, not one still loading
        seen.append(page.content())
        assert len(seen) < 100
    return seen


def results(page) -> str:
    """The search page's HTML without its form (which shows the query typed, the mark included)."""
    return page.evaluate("() => { document.querySelector('#search-form').remove(); return document.body.outerHTML }")


def screens(page, base: str, world) -> dict[str, list[str]]:
    """The HTML of every page of the screen a member can reach about this world's memories."""
    out = {}
    for mode in ("hybrid", "lexical", "dense"):
        page.goto(f"{base}/search?query={MARK}+team+lunch+locker+bike&mode={mode}&top_k=200")
        out[f"search {mode}"] = [results(page)]
    page.goto(f"{base}/search?query={MARK}+locker&include_superseded=1&top_k=200")
    out["search history"] = [results(page)]
    out["browse"] = visit_every_page(page, base, "/memories?superseded=all&page_size=1")
    page.goto(f"{base}/memories/{world['shared'].id}")
    out["shared memory"] = [page.content()]
    out["duplicates"] = visit_every_page(page, base, "/duplicates?purpose=conversation&page_size=1")
    out["conflicts"] = visit_every_page(page, base, "/conflicts?include_resolved=1&page_size=1")
    out["expiring"] = visit_every_page(page, base, "/expiring?superseded=all&page_size=1")
    page.goto(f"{base}/entities?name=Canteen")
    out["entity lookup"] = [page.content()]
    out["entity page"] = visit_every_page(page, base, f"/entities/{world['canteen']}?page_size=1")
    out["entity review"] = visit_every_page(page, base, "/entities/review?page_size=1")
    return out


def test_another_members_memory_is_nowhere_on_the_screen(stack, web_screen, page, world):
    bob, alice, private = world["bob"], world["alice"], world["private"]
    ids = [x.id for x in private]

    sign_in(page, web_screen, bob.token)  # the owner sees them: the pages below can show them
    mine = screens(page, web_screen, world)
    for name in (
        "search lexical",
        "browse",
        "shared memory",
        "duplicates",
        "conflicts",
        "expiring",
        "entity lookup",
        "entity page",
    ):
        assert any(MARK in html for html in mine[name]), name
    assert any(world["nick"] in html for html in mine["entity page"])
    assert all(any(i in html for htmls in mine.values() for html in htmls) for i in ids)
    page.context.clear_cookies()

    sign_in(page, web_screen, alice.token)
    theirs = screens(page, web_screen, world)
    for name, htmls in theirs.items():
        for html in htmls:
            assert MARK not in html, name
            assert not [i for i in ids if i in html], name
            assert world["nick"] not in html, name
    # The pages did show alice what she may read: her pair, her old memory, the shared memory.
    assert any(world["shared"].id in html and world["twin"].id in html for html in theirs["duplicates"])
    assert any("bike shed" in html for html in theirs["expiring"])
    assert "The team lunch is on Friday" in theirs["shared memory"][0]
    page.goto(f"{web_screen}/memories/{world['shared'].id}")
    expect(page.locator("#derivations")).to_contain_text("No memory you can read was derived from it.")

    # Bob's memory by its id reads exactly as one that does not exist.
    page.goto(f"{web_screen}/memories/{uuid.uuid4()}")
    missing = page.locator("#error").inner_text()
    for i in ids:
        page.goto(f"{web_screen}/memories/{i}")
        expect(page.locator("#error")).to_have_text(missing)
        assert MARK not in page.content()
