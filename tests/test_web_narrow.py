"""Every page of the web screen at a phone's width (390 CSS pixels), in a real browser over the real
stack, each holding what makes it wide (a long title, an unbroken URL, ids, result and revision
tables, side-by-side pairs, forms): the page never scrolls sideways (the document is no wider than
the screen), every form control and navigation link outside a table lies within the screen, and a
correction made at that width goes through."""

from __future__ import annotations

import re
import uuid

import pytest
from conftest import sign_in
from playwright.sync_api import expect
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

pytestmark = pytest.mark.browser

WIDTH = 390


@pytest.fixture(scope="module")
def world(stack):
    """Alice's workspace with something on every page: a memory with a long title, an unbroken URL,
    entities, a relation and an attribute, corrected once and derived from; a near-duplicate pair; a
    conflict flag; a likely duplicate entity (initials) and a merge to undo."""
    ws = stack.workspace("web narrow")
    alice = stack.member(ws, role=m.ROLE_ADMIN, display_name="Alice Lindqvist-Nordenskiöld")  # may replace others'
    tag = uuid.uuid4().hex[:6]
    maria, nutrifax = f"Maria Lind{tag}", f"Nutrifax{tag}"
    url = "https://example.org/" + "very-long-path-segment-" * 8
    first = alice.remember(
        f"{maria} works at {nutrifax}; the details are at {url}",
        title="Where Maria works, as her colleagues told us at the spring meeting of the whole team",
        confidence=0.9,
        relations=[
            m.EntityRelation(
                subject=m.EntityMention(name=maria), predicate="works_at", object=m.EntityMention(name=nutrifax)
            )
        ],
        attributes=[m.EntityAttribute(subject=m.EntityMention(name=maria), key="team", value="logistics")],
    )
    fact = stack.memory.Correct(
        g.CorrectRequest(id=first.id, expected_revision=1, body=first.body + " (checked)"), metadata=alice.md()
    ).memory
    stack.memory.Derive(g.DeriveRequest(source_ids=[fact.id], body=f"{maria} is in logistics."), metadata=alice.md())
    alice.remember(f"M. Lind{tag} called about the order.", entities=[m.EntityMention(name=f"M. Lind{tag}")])
    ltd = alice.remember(f"{nutrifax} Ltd sent an invoice.", entities=[m.EntityMention(name=f"{nutrifax} Ltd")])
    alice.remember("The weekly staff meeting moved to Thursday at ten in room four.", title="Staff meeting")
    alice.remember("The weekly staff meeting was moved to Thursday at ten in room four.", title="Staff meeting")
    # Another member's claim that alice replaces: a disagreement, flagged (her own edits are not).
    older = stack.member(ws, display_name="A colleague with quite a long display name for a phone").remember(
        "The library opens at eight.", title="Library hours", confidence=0.9
    )
    stack.memory.Supersede(
        g.SupersedeRequest(id=older.id, expected_revision=1, body="The library opens at nine.", confidence=0.95),
        metadata=alice.md(),
    )
    nutrifax_id = next(r.entity_id for r in first.entity_resolutions if r.name == nutrifax)
    ltd_id = next(r.entity_id for r in ltd.entity_resolutions)
    stack.memory.MergeEntity(
        g.MergeEntityRequest(entity_id=ltd_id, into_id=nutrifax_id, reason="the same company"), metadata=alice.md()
    )
    stack.wait_backlog_empty()
    return {"alice": alice, "fact": fact, "maria": maria, "nutrifax_id": nutrifax_id}


@pytest.fixture
def phone(browser):
    """A fresh browser context 390 pixels wide (an iPhone's CSS width)."""
    context = browser.new_context(viewport={"width": WIDTH, "height": 844})
    context.set_default_timeout(60_000)
    yield context.new_page()
    context.close()


def misfits(page, what: str) -> list[str]:
    """What makes the page not fit the screen: the page scrolling sideways (named by the innermost
    elements reaching past the screen), or a control or header link outside a table (tables scroll
    inside themselves) lying past its edge."""
    found = []
    page.wait_for_load_state()  # a page still loading has no body to measure yet
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.body.scrollWidth]")
    if max(widths) > WIDTH:
        wide = page.evaluate(
            """(width) => [...document.body.querySelectorAll('*')]
                .filter(e => e.getBoundingClientRect().right > width
                             && ![...e.children].some(c => c.getBoundingClientRect().right > width))
                .map(e => [e.outerHTML.slice(0, 120), Math.round(e.getBoundingClientRect().right)])""",
            WIDTH,
        )
        found.append(f"{what}: {max(widths)} pixels wide; past the screen: {wide}")
    outside = page.evaluate(
        """(width) => [...document.querySelectorAll(
                'input:not([type=hidden]), select, textarea, button, summary, header a')]
            .filter(e => !e.closest('table') && e.getClientRects().length)
            .map(e => [e.outerHTML.slice(0, 100), e.getBoundingClientRect().left, e.getBoundingClientRect().right])
            .filter(([, left, right]) => left < 0 || right > width)""",
        WIDTH,
    )
    if outside:
        found.append(f"{what}: controls past the screen's edge: {outside}")
    return found


def test_every_page_fits_a_phone(stack, web_screen, phone, world):
    page, alice, fact = phone, world["alice"], world["fact"]
    page.goto(f"{web_screen}/login")
    expect(page.get_by_label("Member token")).to_be_visible()
    problems = misfits(page, "login")
    sign_in(page, web_screen, alice.token)

    pages = {
        "search": ("/search?query=where+does+maria+work&mode=hybrid", "tr.hit"),
        "browse": ("/memories", "article.memory"),
        "memory": (f"/memories/{fact.id}", "#revisions tbody tr"),
        "entities": (f"/entities?name={world['maria']}", "#entities li a.entity"),
        "entity": (f"/entities/{world['nutrifax_id']}", "#merges tr[data-merged]"),
        "entity review": ("/entities/review", "section.entity-proposal"),
        "duplicates": ("/duplicates", "section.proposal"),
        "conflicts": ("/conflicts", "section.flag"),
        "expiring": ("/expiring", "#gate"),
    }
    for what, (path, filled) in pages.items():
        response = page.goto(f"{web_screen}{path}")
        assert response.status == 200, what
        assert page.locator(filled).count() > 0, f"{what}: nothing on the page to make it wide"
        if what == "memory":
            for summary in page.locator("#changes summary").all():
                summary.click()  # the change forms open, to be measured too
            expect(page.locator("#changes form.change")).to_have_count(3)
        problems += misfits(page, what)
    assert problems == []


def test_a_correction_at_phone_width(stack, web_screen, phone, world):
    page, alice = phone, world["alice"]
    mem = alice.remember("The courier comes on Tuesdays.", title="Courier")
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/memories/{mem.id}")
    form = page.locator("details#correct")
    form.locator("summary").click()
    form.get_by_label("Body").fill("The courier comes on Wednesdays.")
    form.get_by_role("button", name="Review the correction").click()
    expect(page.locator("#after .body")).to_have_text("The courier comes on Wednesdays.")
    assert misfits(page, "correction review") == []
    page.get_by_role("button", name="Save the correction").click()
    expect(page).to_have_url(re.compile(f"/memories/{mem.id}\\?done=corrected$"))
    assert alice.read(mem.id).body == "The courier comes on Wednesdays."

    page.locator("details#forget summary").click()
    page.get_by_role("button", name="Review what is forgotten").click()
    expect(page.get_by_role("button", name="Forget it")).to_be_visible()  # the review page, loaded
    assert misfits(page, "forget review") == []
    page.get_by_role("button", name="Forget it").click()
    expect(page.locator("#forgotten")).to_be_visible()
    assert misfits(page, "forgotten") == []
