"""The web screen in a real browser (Playwright driving headless Debian Chromium) over the real
stack: signing in with a member token, search (Recall's ranks, cosine, fused score, dense_available),
a memory (provenance, revisions, derivations), browse (filters, pages), a bad and a revoked token,
gRPC errors as readable messages, memory text shown as text, and the cross-site request check.
Screenshots of each page go to docs/screenshots/ under `make screenshots` (none in a test run)."""

from __future__ import annotations

import datetime
import re
import uuid

import pytest
from conftest import screenshot, sign_in
from playwright.sync_api import expect
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from web.diff import WORDS_COMPARED, Segment, Sides, sides
from web.screen import TOKEN_COOKIE


@pytest.fixture(scope="module")
def team(stack):
    """A workspace with alice (who writes), bob and a narrow member (tasks only), and alice's memories:
    a fact about an entity, corrected once, a memory derived from it, a superseded note and its
    successor, and six notes to page through."""
    ws = stack.workspace("web pages")
    alice, bob = stack.member(ws), stack.member(ws)
    narrow = stack.member(ws, purposes=[m.PURPOSE_TASKS])
    fact = stack.memory.Remember(
        g.RememberRequest(
            purpose=m.PURPOSE_CONVERSATION,
            kind=m.KIND_FACT,
            title="Lighthouse",
            body="The lighthouse keeper Odile polishes the brass lens every morning.",
            audience=m.AUDIENCE_WORKSPACE,
            confidence=0.9,
            entities=[m.EntityMention(name="Odile")],
        ),
        metadata=alice.md(),
    ).memory
    fact = stack.memory.Correct(
        g.CorrectRequest(
            id=fact.id,
            expected_revision=1,
            body="The lighthouse keeper Odile polishes the brass lens every evening.",
        ),
        metadata=alice.md(),
    ).memory
    derived = stack.memory.Derive(
        g.DeriveRequest(
            source_ids=[fact.id], title="Routine", body="Odile keeps an evening routine at the lighthouse."
        ),
        metadata=alice.md(),
    ).memory
    old = alice.remember("The ferry to the island leaves at noon.", title="Ferry")
    successor = stack.memory.Supersede(
        g.SupersedeRequest(
            id=old.id, expected_revision=1, title="Ferry", body="The ferry to the island leaves at one."
        ),
        metadata=alice.md(),
    ).memory
    notes = [alice.remember(f"Paging note number {i} about tide tables.", title=f"Tide {i}") for i in range(6)]
    stack.wait_backlog_empty()
    return {
        "ws": ws,
        "alice": alice,
        "bob": bob,
        "narrow": narrow,
        "fact": fact,
        "derived": derived,
        "old": old,
        "successor": successor,
        "notes": notes,
    }


@pytest.mark.browser
def test_sign_in_search_and_open_a_memory(stack, web_screen, page, team):
    alice, fact = team["alice"], team["fact"]
    page.goto(f"{web_screen}/search")
    expect(page).to_have_url(re.compile(r"/login$"))  # not signed in: the login page
    screenshot(page, "login")
    sign_in(page, web_screen, alice.token)
    expect(page).to_have_url(re.compile(r"/search$"))
    cookie = next(c for c in page.context.cookies() if c["name"] == TOKEN_COOKIE)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] == alice.token

    query = "who polishes the lighthouse lens"
    page.get_by_label("Query").fill(query)
    page.get_by_label("Mode").select_option("hybrid")
    page.get_by_label("Purpose").select_option("conversation")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#dense-available")).to_have_text("true")
    want = alice.recall(query, mode=m.RECALL_MODE_HYBRID)
    assert want.dense_available and want.items[0].memory.id == fact.id
    rows = page.locator("tr.hit")
    expect(rows).to_have_count(len(want.items))
    for i, item in enumerate(want.items):  # the gateway's own numbers, row by row
        row = rows.nth(i)
        assert row.get_attribute("data-memory-id") == item.memory.id
        expect(row.locator(".lexical-rank")).to_have_text(str(item.lexical_rank or "–"))
        expect(row.locator(".dense-rank")).to_have_text(str(item.dense_rank or "–"))
        expect(row.locator(".cosine")).to_have_text(f"{item.cosine:.4f}" if item.dense_rank else "–")
        expect(row.locator(".fused")).to_have_text(f"{item.fused_score:.5f}")
    expect(page.locator("#reranked")).to_have_text("true" if want.reranked else "false")
    screenshot(page, "search")

    page.get_by_role("link", name="Lighthouse").first.click()
    expect(page).to_have_url(re.compile(f"/memories/{fact.id}$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Lighthouse")
    expect(page.locator("#revisions tbody tr")).to_have_count(2)  # the current one and revision 1
    expect(page.locator("#revisions")).to_contain_text("polishes the brass lens every morning.")
    expect(page.locator("#links a.entity")).to_have_text("Odile")
    expect(page.locator("#derivations article")).to_have_count(1)
    expect(page.locator("#derivations")).to_contain_text("Odile keeps an evening routine")
    screenshot(page, "memory")

    page.locator("#derivations a").first.click()  # the derivation names its source
    expect(page).to_have_url(re.compile(f"/memories/{team['derived'].id}$"))
    expect(page.locator("#links a.source")).to_have_text(fact.id)
    page.locator("#links a.source").click()
    page.locator("#links a.about-list").click()  # browse, filtered by the entity
    expect(page.locator("article.memory")).to_have_count(1)
    expect(page.locator("#list-summary")).to_have_text("1 shown of 1")


@pytest.mark.browser
def test_superseded_memory_links_its_successor_and_history_search(stack, web_screen, page, team):
    sign_in(page, web_screen, team["alice"].token)
    page.goto(f"{web_screen}/memories/{team['old'].id}")
    expect(page.locator("a.successor")).to_have_text(team["successor"].id)
    # The timeline: the memory, then its successor, each with when it held; the old one's end is
    # where the successor's validity starts.
    items = page.locator("#timeline li")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_have_attribute("data-memory-id", team["old"].id)
    expect(items.nth(1)).to_have_attribute("data-memory-id", team["successor"].id)
    start = team["successor"].valid_from.ToDatetime(tzinfo=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    expect(items.nth(0).locator(".when")).to_contain_text(f"– {start}")
    expect(items.nth(1).locator(".when")).to_contain_text(f"{start} – now")
    expect(page.locator("dd.validity")).to_contain_text(f"until {start}")
    # Its revision is its latest, not a current one: the memory is superseded.
    expect(page.locator("#revisions tr.current td").first).to_have_text("1 (latest; the memory is superseded)")
    page.goto(f"{web_screen}/memories/{team['successor'].id}")
    expect(page.locator("#revisions tr.current td").first).to_have_text("1 (current)")
    page.goto(f"{web_screen}/search")
    page.get_by_label("Query").fill("ferry island noon")
    page.get_by_label("superseded too").check()
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#recall-summary")).to_contain_text("Mode lexical")  # history recall is keyword-only
    expect(page.locator(f"tr.hit[data-memory-id='{team['old'].id}']")).to_have_count(1)


@pytest.mark.browser
def test_browse_filters_and_pages(stack, web_screen, page, team):
    alice = team["alice"]
    sign_in(page, web_screen, alice.token)
    page.get_by_role("link", name="Browse").click()
    total = stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=alice.md()).total_size
    expect(page.locator("#list-summary")).to_have_text(f"{total} shown of {total}")
    page.get_by_label("Kind").select_option("note")
    page.get_by_label("Page size").fill("4")
    page.get_by_role("button", name="Filter").click()
    want = stack.memory.ListMemories(g.ListMemoriesRequest(kind=m.KIND_NOTE, page_size=200), metadata=alice.md())
    assert want.total_size == 8  # six tide notes, the ferry's successor and the derived note
    seen = []
    while True:
        seen += page.locator("article.memory").evaluate_all("els => els.map(e => e.dataset.memoryId)")
        expect(page.locator("#list-summary")).to_contain_text(f"of {want.total_size}")
        if len(seen) == 4:
            screenshot(page, "browse")
        if not page.locator("#next-page").count():
            break
        page.locator("#next-page").click()
    assert seen == [x.id for x in want.memories]  # newest first, every page, nothing twice
    page.locator("#first-page").click()
    expect(page.locator("article.memory")).to_have_count(4)

    # Filters the gateway judges: superseded only, a time range, an entity id of the wrong shape.
    page.get_by_label("Superseded").select_option("superseded")
    page.get_by_label("Kind").select_option("")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("article.memory")).to_have_count(1)
    assert page.locator("article.memory").get_attribute("data-memory-id") == team["old"].id
    page.get_by_label("Superseded").select_option("current")
    page.get_by_label("Created before").fill("2000-01-01")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#list-summary")).to_have_text("0 shown of 0")
    page.get_by_label("Created before").fill("")
    page.get_by_label("About entity (id)").fill("not-a-uuid")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#error")).to_have_text(re.compile(r"^INVALID_ARGUMENT: .*entity_id"))


@pytest.mark.browser
def test_search_and_browse_take_a_time_window(stack, web_screen, page, team):
    """ "Said from" and "Said before" (docs/time.md): the team's memories carry no occurred_at, so
    they were said when written, today; a window ending before today holds none of them, one around
    today all, and a window that ends before it starts is the gateway's INVALID_ARGUMENT."""
    alice = team["alice"]
    today = datetime.datetime.now(datetime.UTC).date()
    tomorrow, yesterday = today + datetime.timedelta(days=1), today - datetime.timedelta(days=1)
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/search")
    page.get_by_label("Query").fill("lighthouse lens")
    page.get_by_label("Mode").select_option("lexical")
    page.get_by_label("Said from").fill(yesterday.isoformat())
    page.get_by_label("Said before").fill(tomorrow.isoformat())
    page.get_by_role("button", name="Search").click()
    want = alice.recall("lighthouse lens", mode=m.RECALL_MODE_LEXICAL)
    expect(page.locator("tr.hit")).to_have_count(len(want.items))
    assert want.items
    page.get_by_label("Said before").fill(yesterday.isoformat())
    page.get_by_label("Said from").fill("2000-01-01")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("p.empty")).to_have_text("Nothing you can read matches.")
    page.get_by_label("Said from").fill(tomorrow.isoformat())
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#error")).to_have_text(re.compile(r"^INVALID_ARGUMENT: occurred_before must be after"))

    # Time words in the question: read and shown, the memories said then first; or not read at all.
    page.get_by_label("Said from").fill("")
    page.get_by_label("Said before").fill("")
    page.get_by_label("Query").fill("lighthouse lens since 2020")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#time-window")).to_contain_text("since 2020")
    expect(page.locator("#time-window")).to_contain_text("2020-01-01 00:00:00 UTC")
    expect(page.locator("#time-window")).to_contain_text("in each arm, those said then first")
    page.get_by_label("no time words").check()
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#recall-summary")).to_be_visible()
    expect(page.locator("#time-window")).to_have_count(0)

    # A time whose offset moves it out of years 1..9999 is the form's error (400), never a crash.
    for path in ("search?query=gull&occurred_after=", "memories?occurred_before=", "memories?created_after="):
        edge = "0001-01-01T00:00:00%2B01:00" if "after" in path else "9999-12-31T23:59:59-01:00"
        response = page.goto(f"{web_screen}/{path}{edge}")
        assert response.status == 400, path
        expect(page.locator("#error")).to_contain_text("is outside years 1..9999 in UTC")

    page.get_by_role("link", name="Browse").click()
    total = stack.memory.ListMemories(g.ListMemoriesRequest(), metadata=alice.md()).total_size
    page.get_by_label("Said from").fill(yesterday.isoformat())
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#list-summary")).to_have_text(f"{total} shown of {total}")
    page.get_by_label("Said from").fill(tomorrow.isoformat())
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#list-summary")).to_have_text("0 shown of 0")


@pytest.mark.browser
def test_errors_read_as_status_and_message(stack, web_screen, page, team):
    sign_in(page, web_screen, team["narrow"].token)
    page.goto(f"{web_screen}/search?query=lighthouse&purpose=conversation")
    expect(page.locator("#error")).to_have_text(re.compile(r"^PERMISSION_DENIED: "))
    page.goto(f"{web_screen}/memories/{uuid.uuid4()}")
    expect(page.locator("#error")).to_have_text(re.compile(r"^NOT_FOUND: "))
    # A memory the narrow member may not read answers exactly as one that does not exist.
    missing = page.locator("#error").inner_text().split(": ", 1)[1]
    page.goto(f"{web_screen}/memories/{team['fact'].id}")
    expect(page.locator("#error")).to_have_text(f"NOT_FOUND: {missing}")
    assert "Lighthouse" not in page.content()
    page.goto(f"{web_screen}/memories?page_token=junk")
    expect(page.locator("#error")).to_have_text(re.compile(r"^INVALID_ARGUMENT: page_token"))
    page.goto(f"{web_screen}/memories?created_after=yesterday")
    expect(page.locator("#error")).to_have_text(re.compile(r"^created_after: not a date"))
    assert "Traceback" not in page.content()


@pytest.mark.browser
def test_bad_token_and_revoked_token(stack, web_screen, page, team):
    sign_in(page, web_screen, "rct_not-a-real-token")
    expect(page).to_have_url(re.compile(r"/login$"))
    expect(page.locator("#error")).to_have_text(re.compile(r"^UNAUTHENTICATED: "))
    assert not [c for c in page.context.cookies() if c["name"] == TOKEN_COOKIE]
    screenshot(page, "login-refused")
    sign_in(page, web_screen, "rct_ünïcödé token")  # not even a header value: refused before any call
    expect(page.locator("#error")).to_have_text(re.compile(r"^That is not a member token"))
    assert not [c for c in page.context.cookies() if c["name"] == TOKEN_COOKIE]

    carol = stack.member(team["ws"])
    sign_in(page, web_screen, carol.token)
    page.goto(f"{web_screen}/memories")
    expect(page.locator("#list-summary")).to_be_visible()
    stack.admin.RevokeMember(g.RevokeMemberRequest(workspace_id=team["ws"], member_id=carol.id), metadata=stack.op())
    page.reload()  # the next call with the revoked token: the login page, the gateway's message, no cookie
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in")
    expect(page.locator("#error")).to_have_text(re.compile(r"^UNAUTHENTICATED: "))
    assert "Paging note" not in page.content()
    assert not [c for c in page.context.cookies() if c["name"] == TOKEN_COOKIE]
    page.goto(f"{web_screen}/memories")
    expect(page).to_have_url(re.compile(r"/login$"))


@pytest.mark.browser
def test_sign_out(stack, web_screen, page, team):
    sign_in(page, web_screen, team["bob"].token)
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    assert not [c for c in page.context.cookies() if c["name"] == TOKEN_COOKIE]
    page.goto(f"{web_screen}/memories")
    expect(page).to_have_url(re.compile(r"/login$"))


@pytest.mark.browser
def test_memory_text_is_shown_as_text(stack, web_screen, page, team):
    hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> Quokka-Markup-9Z'
    team["bob"].remember(hostile, title="<b>bold?</b>")
    stack.wait_backlog_empty()
    sign_in(page, web_screen, team["bob"].token)
    page.goto(f"{web_screen}/search?query=Quokka-Markup-9Z&mode=lexical")
    expect(page.locator("tr.hit .body")).to_have_text(hostile)
    expect(page.locator("tr.hit a").first).to_have_text("<b>bold?</b>")
    assert page.evaluate("window.__pwned") is None


@pytest.mark.browser
def test_a_post_without_the_csrf_token_is_refused(stack, web_screen, page, team):
    """A POST without its session's form token, or with a wrong one, is refused with 403 before
    anything runs (here: a sign-in that would otherwise succeed), and so is a form a page elsewhere
    submits (its browser says so: Sec-Fetch-Site). tests/test_web_csrf.py holds the rest."""
    bob = team["bob"]
    page.goto(f"{web_screen}/login")  # the browser holds its session cookie now
    for form in ({"token": bob.token}, {"token": bob.token, "csrftoken": "forged"}):
        resp = page.context.request.post(f"{web_screen}/login", form=form, max_redirects=0)
        assert resp.status == 403 and "cross-site request token" in resp.text()
    assert not [c for c in page.context.cookies() if c["name"] == TOKEN_COOKIE]

    sign_in(page, web_screen, bob.token)
    page.goto("about:blank")
    page.set_content(
        f'<form method="post" action="{web_screen}/logout"><button>go</button></form>'  # a page elsewhere
    )
    page.click("button")
    expect(page.locator("#error")).to_have_text(re.compile(r"^Refused: this form was sent from another site"))
    assert [c for c in page.context.cookies() if c["name"] == TOKEN_COOKIE]  # still signed in
    page.goto(f"{web_screen}/memories")
    expect(page.locator("#list-summary")).to_be_visible()


@pytest.mark.browser
def test_the_gateway_down_reads_as_unavailable(stack, browser, team):
    """A screen whose gateway does not answer shows UNAVAILABLE, not a stack trace."""
    import threading
    import time

    import uvicorn
    from conftest import free_port

    from web.app import build

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(build(f"127.0.0.1:{free_port()}"), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    context = browser.new_context()
    try:
        page = context.new_page()
        sign_in(page, f"http://127.0.0.1:{port}", team["bob"].token)
        expect(page.locator("#error")).to_have_text(re.compile(r"^UNAVAILABLE: "))
    finally:
        context.close()
        server.should_exit = True
        thread.join(timeout=30)


def test_diff_marks_the_changed_words_and_gives_each_text_back():
    d = sides("The ferry leaves at noon.", "The ferry leaves at one, daily.")
    assert "".join(s.text for s in d.left) == "The ferry leaves at noon."
    assert "".join(s.text for s in d.right) == "The ferry leaves at one, daily."
    assert [s.text for s in d.left if s.changed] == ["noon."]
    assert [s.text for s in d.right if s.changed] == ["one, daily."]
    assert not d.cut
    assert sides("", "new text") == Sides([], [Segment("new text", True)], False)
    same = sides("a  b\n c", "a  b\n c")
    assert same.left == same.right == [Segment("a  b\n c", False)]
    # Repeated words, the input that made difflib's matching take seconds for a few hundred words.
    d = sides("x " * 1000, "y x " * 500)
    assert [s.text for s in d.right if s.changed] == ["y"] * 500
    assert "".join(s.text for s in d.left if not s.changed).split() == ["x"] * 500


def test_diff_of_long_texts_compares_the_first_words_only(monkeypatch):
    """Two 64 KiB texts: only the first WORDS_COMPARED words of each side go to the alignment (so one
    pair is a bounded piece of work); the changes among them are marked, the rest comes back whole,
    unmarked and flagged as not compared."""
    from rapidfuzz.distance import Indel

    words = [f"w{i}" for i in range(12_000)]
    left = " ".join(words)[:65_536]
    changed = {10: "x10", WORDS_COMPARED - 1: "last", WORDS_COMPARED + 5: "late", 10_000: "end"}
    right = " ".join(changed.get(i, w) for i, w in enumerate(words))[:65_536]
    lengths = []
    opcodes = Indel.opcodes
    monkeypatch.setattr(Indel, "opcodes", lambda a, b: lengths.append((len(a), len(b))) or opcodes(a, b))
    d = sides(left, right)
    assert lengths and max(max(pair) for pair in lengths) <= 2 * WORDS_COMPARED + 1
    assert d.cut
    assert "".join(s.text for s in d.left) == left and "".join(s.text for s in d.right) == right
    assert [s.text for s in d.left if s.changed] == ["w10", f"w{WORDS_COMPARED - 1}"]
    assert [s.text for s in d.right if s.changed] == ["x10", "last"]
    first_not_compared = f" {words[WORDS_COMPARED]} "
    assert d.left[-1] == Segment(left[left.index(first_not_compared) + 1 :], False, compared=False)
    assert d.right[-1] == Segment(right[right.index(first_not_compared) + 1 :], False, compared=False)
    assert "late" in d.right[-1].text and "end" in d.right[-1].text
    assert all(s.compared for s in d.left[:-1] + d.right[:-1])
    assert sides("short", "short text").cut is False
