"""Names on the web screen (issue 25, item 1): every page that shows an author shows the member's
display name beside the id (the memory list, a memory's page with who made each revision, the
search, the duplicates and conflicts pages, an entity's merges), escaped; a member still sees
nothing of another member's private memories, their names included."""

from __future__ import annotations

import pytest
from conftest import sign_in
from playwright.sync_api import expect
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m


@pytest.mark.browser
def test_pages_that_show_an_author_show_the_name(stack, web_screen, page):
    ws = stack.workspace("web names")
    ann = stack.member(ws, display_name="Ann <b>Lee</b>")  # markup in a name stays text
    bo = stack.member(ws, role=m.ROLE_ADMIN, display_name="Bo Admin")
    cy = stack.member(ws, display_name="Cy Private")
    note = ann.remember("The greenhouse vents open at 25 degrees.", title="Greenhouse")
    stack.memory.Correct(
        g.CorrectRequest(id=note.id, expected_revision=1, body="The greenhouse vents open at 24 degrees."),
        metadata=bo.md(),
    )
    secret = cy.remember("Cy's private note about the greenhouse.", audience=m.AUDIENCE_MEMBER)
    ann_name, bo_name = f"Ann <b>Lee</b> ({ann.id})", f"Bo Admin ({bo.id})"

    sign_in(page, web_screen, bo.token)
    page.goto(f"{web_screen}/memories")
    card = page.locator(f"article[data-memory-id='{note.id}']")
    expect(card.locator(".author")).to_have_text(ann_name)
    assert page.locator("b", has_text="Lee").count() == 0  # escaped, not markup

    page.goto(f"{web_screen}/memories/{note.id}")
    expect(page.locator("dd.author")).to_have_text(ann_name)
    expect(page.locator("dd.reviser")).to_have_text(bo_name)
    rows = page.locator("#revisions tbody tr")
    expect(rows.nth(0).locator("td").nth(1)).to_have_text(bo_name)
    expect(rows.nth(1).locator("td").nth(1)).to_have_text(ann_name)

    page.goto(f"{web_screen}/search?query=greenhouse")
    expect(page.locator(f"tr.hit[data-memory-id='{note.id}'] .author")).to_have_text(ann_name)
    # Nothing of Cy's private memory, nor Cy's name with it, reaches Bo (an admin).
    assert "Cy Private" not in page.content() and secret.id not in page.content()
    page.goto(f"{web_screen}/memories/{secret.id}")
    assert "Cy Private" not in page.content() and "private note" not in page.content()


@pytest.mark.browser
def test_entity_merges_name_who_merged(stack, web_screen, page):
    ws = stack.workspace("web names entities")
    ann = stack.member(ws, role=m.ROLE_ADMIN, display_name="Ann Merger")
    a = ann.remember("Oskar runs the pantry.", entities=[m.EntityMention(name="Oskar")])
    b = ann.remember("Oskar L. restocked it.", entities=[m.EntityMention(name="Oskar L.")])
    a_id = next(x.target_entity_id for x in ann.read(a.id).links if x.type == m.LINK_TYPE_ABOUT)
    b_id = next(x.target_entity_id for x in ann.read(b.id).links if x.type == m.LINK_TYPE_ABOUT)
    stack.memory.MergeEntity(g.MergeEntityRequest(entity_id=b_id, into_id=a_id), metadata=ann.md())
    sign_in(page, web_screen, ann.token)
    page.goto(f"{web_screen}/entities/{a_id}")
    expect(page.locator(f"#merges tr[data-merged='{b_id}'] td").nth(2)).to_have_text(f"Ann Merger ({ann.id})")
