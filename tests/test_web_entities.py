"""The entity pages in a real browser over the real stack: from a memory's entity to its page (names,
attributes and relations with the memories that state them, the timeline a page at a time, as of a
day), the entity review merging a proposed pair, the merge undone from the entity's page, a refusal
read as the gateway's status and message, stored names and values shown as text, and the
cross-site request check on a merge."""

from __future__ import annotations

import re
import uuid

import pytest
from conftest import screenshot, sign_in
from google.protobuf import timestamp_pb2
from playwright.sync_api import expect
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

pytestmark = pytest.mark.browser


def ts(text: str) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromJsonString(text)
    return out


@pytest.fixture(scope="module")
def people(stack):
    """Alice writes about Maria (an attribute changed over time, a relation out and one in) and about
    "M. Lind", a likely duplicate; bob is another member."""
    ws = stack.workspace("web entities")
    alice, bob = stack.member(ws), stack.member(ws)
    tag = uuid.uuid4().hex[:6]
    maria = f"Maria Lind{tag}"

    def remember(body, **kw):
        return alice.remember(body, **kw)

    grade8 = remember(
        f"{maria} is in grade 8.",
        attributes=[m.EntityAttribute(subject=m.EntityMention(name=maria), key="grade", value="8")],
        valid_from=ts("2025-09-01T00:00:00Z"),
    )
    grade9 = stack.memory.Supersede(
        g.SupersedeRequest(
            id=grade8.id,
            expected_revision=1,
            body=f"{maria} is in grade 9.",
            attributes=[m.EntityAttribute(subject=m.EntityMention(name=maria), key="grade", value="9")],
            valid_from=ts("2026-09-01T00:00:00Z"),
        ),
        metadata=alice.md(),
    ).memory
    works = remember(
        f"{maria} works at Nutrifax.",
        relations=[
            m.EntityRelation(
                subject=m.EntityMention(name=maria), predicate="works_at", object=m.EntityMention(name="Nutrifax")
            )
        ],
    )
    sister = remember(
        f"Arowyn is {maria}'s sister.",
        relations=[
            m.EntityRelation(
                subject=m.EntityMention(name="Arowyn"), predicate="sister_of", object=m.EntityMention(name=maria)
            )
        ],
    )
    hostile = "<b>Bold</b>\n[00000000-0000-0000-0000-000000000000] revision 9"
    odd = remember(
        "An odd one.", attributes=[m.EntityAttribute(subject=m.EntityMention(name=maria), key="nick", value=hostile)]
    )
    short = remember(f"M. Lind{tag} called.", entities=[m.EntityMention(name=f"M. Lind{tag}")])
    return {
        "ws": ws,
        "alice": alice,
        "bob": bob,
        "maria": maria,
        "maria_id": works.relations[0].subject_id,
        "short_id": short.entity_resolutions[0].entity_id,
        "grade8": grade8,
        "grade9": grade9,
        "works": works,
        "sister": sister,
        "odd": odd,
        "hostile": hostile,
    }


def test_from_a_memory_to_its_entitys_page(stack, web_screen, page, people):
    alice, maria_id = people["alice"], people["maria_id"]
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/memories/{people['works'].id}")
    expect(page.locator("#statements li.relation")).to_have_text(f"{people['maria']} works_at Nutrifax")
    page.locator("#links a.entity", has_text=people["maria"]).click()
    expect(page).to_have_url(re.compile(f"/entities/{maria_id}$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(people["maria"])
    want = stack.memory.GetEntity(g.GetEntityRequest(entity=maria_id), metadata=alice.md())
    expect(page.locator("#mentions")).to_have_text(str(want.entity.mentions))
    rows = page.locator("#attributes tbody tr")
    expect(rows).to_have_count(2)  # grade 9 (the current one) and the nickname
    expect(rows.nth(0)).to_contain_text("grade")
    expect(rows.nth(0)).to_contain_text("9")
    expect(rows.nth(0).locator("a")).to_have_text(people["grade9"].id)
    # A stored value is text: no element made of it, its line break and brackets shown as they are.
    expect(page.locator("#attributes b")).to_have_count(0)
    expect(rows.nth(1).locator(".value")).to_have_text(people["hostile"])
    expect(page.locator("#relations tr.out")).to_contain_text("works_at")
    expect(page.locator("#relations tr.in")).to_contain_text("sister_of")
    expect(page.locator("#timeline-summary")).to_have_text(
        f"{len(want.timeline)} shown of {want.timeline_size}, the latest said first"
    )
    screenshot(page, "entity")
    # As of a day when grade 8 held.
    page.get_by_label("As of").fill("2026-01-01")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#attributes tbody tr").first).to_contain_text("8")
    expect(page.locator("#attributes tbody tr").first.locator("a")).to_have_text(people["grade8"].id)
    # The timeline a page at a time.
    page.goto(f"{web_screen}/entities/{maria_id}?page_size=2")
    seen = []
    while True:
        seen += page.locator("#timeline article").evaluate_all("els => els.map(e => e.dataset.memoryId)")
        if not page.locator("#next-page").count():
            break
        page.locator("#next-page").click()
    assert seen == [x.id for x in stack.memory.GetEntity(
        g.GetEntityRequest(entity=maria_id, page_size=100), metadata=alice.md()
    ).timeline]  # fmt: skip
    # An entity nobody can see reads as the gateway's NOT_FOUND.
    page.goto(f"{web_screen}/entities/{uuid.uuid4()}")
    expect(page.locator("#error")).to_have_text(re.compile(r"^NOT_FOUND: "))


def test_review_merge_and_undo(stack, web_screen, page, people):
    alice, bob = people["alice"], people["bob"]
    maria_id, short_id = people["maria_id"], people["short_id"]
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/entities")
    page.get_by_role("link", name="Review entities that may be one").click()
    proposal = page.locator(f"section.entity-proposal[data-a='{maria_id}'][data-b='{short_id}']")
    expect(proposal.locator(".score")).to_have_text("0.60 · initials")
    screenshot(page, "entity-review")
    proposal.locator("input[name=reason]").first.fill("the same Maria")
    proposal.get_by_role("button", name="Merge B into A").click()
    expect(page.locator("#notice")).to_have_text(f"Merged {short_id} into {maria_id}. Undo it from the entity's page.")
    expect(page.locator(f"section.entity-proposal[data-b='{short_id}']")).to_have_count(0)
    found = stack.memory.FindEntities(g.FindEntitiesRequest(name=f"M. Lind{people['maria'][10:]}"), metadata=alice.md())
    assert [(e.id, e.merges[0].reason) for e in found.entities] == [(maria_id, "the same Maria")]
    # The merge on the entity's page, and its undo.
    page.goto(f"{web_screen}/entities/{short_id}")
    expect(page).to_have_url(re.compile(f"/entities/{short_id}$"))
    expect(page.get_by_role("heading", level=1)).to_have_text(people["maria"])
    expect(page.locator("#aliases li")).to_have_text(f"M. Lind{people['maria'][10:]}")
    row = page.locator(f"#merges tr[data-merged='{short_id}']")
    expect(row).to_contain_text("the same Maria")
    row.get_by_role("button", name="Undo").click()
    expect(page.locator("#notice")).to_have_text(f"Undid the merge of {short_id} into {maria_id}.")
    expect(page.locator("#merges tbody tr.empty")).to_have_count(1)
    # A refusal is the gateway's: bob may not merge alice's entities.
    page.context.clear_cookies()
    sign_in(page, web_screen, bob.token)
    page.goto(f"{web_screen}/entities/{maria_id}")
    page.get_by_label("Merge the entity with id").fill(short_id)
    page.get_by_role("button", name="Merge").click()
    expect(page.locator("#error")).to_have_text(re.compile(r"^PERMISSION_DENIED: you may merge an entity only when"))


def test_a_merge_without_the_form_token_is_refused(stack, web_screen, page, people):
    alice = people["alice"]
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/entities/{people['maria_id']}")
    response = page.request.post(
        f"{web_screen}/entities/merge",
        form={"entity_id": people["short_id"], "into_id": people["maria_id"]},
        headers={"origin": web_screen},
    )
    assert response.status == 403
    found = stack.memory.GetEntity(g.GetEntityRequest(entity=people["maria_id"]), metadata=alice.md())
    assert not found.entity.merges
