"""The review pages in a real browser over the real stack: a duplicate pair decided each of the three
ways (keep both, supersede one by the other, forget one) and a stale revision's refusal, a conflict
flag acknowledged and one undone, an expiring memory kept and one forgotten, the cross-site
request check on a decision, and a pair of long memories (the diff cut, and off the event loop).
Every decision's result is read off the page and checked against the gateway. Screenshots of each
page go to docs/screenshots/ under `make screenshots` (none in a test run)."""

from __future__ import annotations

import datetime
import re
import threading
import time
import urllib.request

import grpc
import pytest
from conftest import code_of, screenshot, sign_in
from google.protobuf import timestamp_pb2
from playwright.sync_api import expect
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

pytestmark = pytest.mark.browser

# Near-identical pairs (cosine well above 0.80 with all-MiniLM-L6-v2), each on a topic of its own.
PAIRS = {
    "keep": (
        "Staff meeting",
        "The weekly staff meeting moved to Thursday at ten in room four.",
        "The weekly staff meeting was moved to Thursday at ten in room four.",
    ),
    "supersede": (
        "Parrot",
        "Maria's parrot is called Captain and speaks Portuguese.",
        "Maria's parrot is named Captain and it speaks Portuguese.",
    ),
    "forget": (
        "Guest wifi",
        "The wifi password for the guest network is printed on the fridge.",
        "The guest network wifi password is printed on the fridge.",
    ),
    "stale": (
        "Dentist",
        "Our dentist appointment is on the fifth of May at nine.",
        "Our dentist appointment is on May the fifth at nine.",
    ),
}


def ts(when: datetime.datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def proposal(page, a_id: str, b_id: str):
    """The proposal section of a pair, whichever of the two is A."""
    return page.locator(
        f"section.proposal[data-a='{a_id}'][data-b='{b_id}'], section.proposal[data-a='{b_id}'][data-b='{a_id}']"
    )


def proposed_pairs(stack, member) -> set[frozenset[str]]:
    resp = stack.memory.ListDuplicateProposals(
        g.ListDuplicateProposalsRequest(purpose=m.PURPOSE_CONVERSATION, page_size=200), metadata=member.md()
    )
    return {frozenset((p.memory_a.id, p.memory_b.id)) for p in resp.proposals}


@pytest.fixture(scope="module")
def dup_team(stack):
    ws = stack.workspace("web duplicates")
    alice = stack.member(ws)
    pairs = {}
    for name, (title, older, newer) in PAIRS.items():
        first = alice.remember(older, title=title)
        second = alice.remember(newer, title=title)
        pairs[name] = (second, first)  # (newer, older): the list's A and B
    stack.wait_backlog_empty()
    return ws, alice, pairs


def test_duplicate_pairs_decided_each_way(stack, web_screen, page, dup_team):
    _, alice, pairs = dup_team
    assert {frozenset((a.id, b.id)) for a, b in pairs.values()} <= proposed_pairs(stack, alice)
    sign_in(page, web_screen, alice.token)
    page.get_by_role("link", name="Duplicates").click()
    expect(page.locator("#dense-available")).to_have_text("true")
    for a, b in pairs.values():
        box = proposal(page, a.id, b.id)
        expect(box).to_have_count(1)
        expect(box.locator(".cosine")).to_contain_text("cosine 0.")
    # The differences are marked: "was" is in the newer text only.
    keep_box = proposal(page, *[x.id for x in pairs["keep"]])
    expect(keep_box.locator("mark.changed").first).to_be_visible()
    assert "was" in " ".join(keep_box.locator("article").nth(0).locator("mark.changed").all_inner_texts())
    screenshot(page, "duplicates")

    # Keep both: the pair is gone from the list, and never proposed again.
    keep_box.get_by_role("button", name="Keep both").click()
    expect(page.locator("#notice")).to_have_text("Kept both: this pair will not be proposed again.")
    a, b = pairs["keep"]
    expect(proposal(page, a.id, b.id)).to_have_count(0)
    assert frozenset((a.id, b.id)) not in proposed_pairs(stack, alice)

    # Supersede the older (B) by the newer (A).
    a, b = pairs["supersede"]
    proposal(page, a.id, b.id).get_by_role("button", name="Keep A, supersede B").click()
    expect(page.locator("#notice")).to_contain_text(f"Superseded “Parrot” ({b.id}) by “Parrot” ({a.id}).")
    assert alice.read(b.id).superseded_by_id == a.id and not alice.read(a.id).superseded_by_id
    expect(proposal(page, a.id, b.id)).to_have_count(0)

    # Forget one (A, the newer).
    a, b = pairs["forget"]
    proposal(page, a.id, b.id).get_by_role("button", name="Forget A").click()
    expect(page.locator("#notice")).to_have_text(f"Forgot 1 memory(ies): {a.id}.")
    assert code_of(alice.read, a.id) == grpc.StatusCode.NOT_FOUND and alice.read(b.id).id == b.id
    screenshot(page, "duplicates-decided")

    # A stale revision: B is corrected after the page was shown; the supersede names the current revision.
    a, b = pairs["stale"]
    stack.memory.Correct(
        g.CorrectRequest(id=b.id, expected_revision=1, body=PAIRS["stale"][1] + " Bring the card."),
        metadata=alice.md(),
    )
    proposal(page, a.id, b.id).get_by_role("button", name="Keep A, supersede B").click()
    expect(page.locator("#error")).to_have_text(re.compile(r"^ABORTED: .*current 2"))
    assert not alice.read(b.id).superseded_by_id


def test_a_decision_without_the_csrf_token_is_refused(stack, web_screen, page, dup_team):
    _, alice, pairs = dup_team
    a, b = pairs["stale"]
    sign_in(page, web_screen, alice.token)
    form = {"memory_a_id": a.id, "memory_b_id": b.id, "decision": "forget", "forget_id": b.id}
    resp = page.context.request.post(f"{web_screen}/duplicates/decide", form=form, max_redirects=0)
    assert resp.status == 403 and "cross-site request token" in resp.text()
    assert alice.read(b.id).id == b.id  # nothing was forgotten


def test_gateway_errors_on_a_decision_read_as_messages(stack, web_screen, page, dup_team):
    """Input the gateway refuses (here: a pair of the same memory twice) shows its code and message."""
    _, alice, pairs = dup_team
    a, _ = pairs["stale"]
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/duplicates")
    token = page.locator("input[name=csrftoken]").first.get_attribute("value")
    form = {"csrftoken": token, "memory_a_id": a.id, "memory_b_id": a.id, "decision": "keep_both"}
    resp = page.context.request.post(f"{web_screen}/duplicates/decide", form=form)
    assert resp.status == 400 and "INVALID_ARGUMENT: " in resp.text()


def test_conflict_flags_acknowledged_and_undone(stack, web_screen, page):
    ws = stack.workspace("web conflicts")
    # Alice's claims replaced by an admin's: two authors disagreeing (an edit of one's own is no flag).
    writer = stack.member(ws, display_name="Wren Writer")
    alice = stack.member(ws, role=m.ROLE_ADMIN, display_name="Alice Admin")
    flagged = {}
    for name, title, before, after in (
        ("ack", "Library hours", "The library opens at eight.", "The library opens at nine."),
        ("undo", "Boiler service", "The boiler was serviced in March.", "The boiler was serviced in April."),
    ):
        old = writer.remember(before, title=title, confidence=0.9)
        new = stack.memory.Supersede(
            g.SupersedeRequest(id=old.id, expected_revision=1, title=title, body=after, confidence=0.95),
            metadata=alice.md(),
        ).memory
        flagged[name] = (old, new)
    own = writer.remember("The bins go out on Monday.", confidence=0.9)
    stack.memory.Supersede(
        g.SupersedeRequest(id=own.id, expected_revision=1, body="The bins go out on Tuesday.", confidence=0.9),
        metadata=writer.md(),
    )
    sign_in(page, web_screen, alice.token)
    page.get_by_role("link", name="Conflicts").click()
    expect(page.locator("section.flag")).to_have_count(2)
    # Each side names its author (name and id).
    authors = page.locator("section.flag").first.locator(".author")
    expect(authors).to_have_text([f"Wren Writer ({writer.id})", f"Alice Admin ({alice.id})"])
    expect(page.locator("#conflicts-summary")).to_have_text("2 shown of 2 flag(s)")
    # Acknowledge is the primary action, first and filled with the accent; Undo an outlined second.
    buttons = page.locator("section.flag").first.locator(".decisions button")
    expect(buttons).to_have_text(["Acknowledge (the newer stands)", "Undo (bring the older text back)"])
    fills = buttons.evaluate_all("els => els.map(e => getComputedStyle(e).backgroundColor)")
    assert fills == ["rgb(45, 91, 211)", "rgb(255, 255, 255)"]
    screenshot(page, "conflicts")

    old, new = flagged["ack"]
    box = page.locator("section.flag", has=page.locator(f"article[data-memory-id='{new.id}']"))
    box.get_by_role("button", name="Acknowledge (the newer stands)").click()
    expect(page.locator("#notice")).to_have_text(
        f"Acknowledged: “Library hours” ({new.id}) stays the successor of “Library hours” ({old.id})."
    )
    expect(page.locator("section.flag")).to_have_count(1)

    old, new = flagged["undo"]
    page.locator("section.flag").get_by_role("button", name="Undo (bring the older text back)").click()
    expect(page.locator("#notice")).to_contain_text("now carries the older memory's text")
    restored_id = re.search(r"\(([0-9a-f-]{36})\) now carries", page.locator("#notice").inner_text()).group(1)
    restored = alice.read(restored_id)
    assert restored.body == "The boiler was serviced in March." and alice.read(new.id).superseded_by_id == restored_id
    expect(page.locator("section.flag")).to_have_count(0)

    page.get_by_label("resolved ones too").check()
    page.get_by_role("button", name="Show").click()
    expect(page.locator("section.flag .state")).to_have_text(["undone", "acknowledged"])
    expect(page.locator("section.flag").first).to_contain_text(f"by Alice Admin ({alice.id})")
    expect(page.locator("a.restored")).to_have_text(restored_id)
    screenshot(page, "conflicts-resolved")


def test_expiring_memories_kept_and_forgotten(stack, web_screen, page):
    ws = stack.workspace("web expiry")
    alice = stack.member(ws)
    long_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=400)
    imported = stack.admin.ImportMemories(
        g.ImportMemoriesRequest(
            workspace_id=ws,
            memories=[
                m.ImportedMemory(
                    import_key=f"old:{i}",
                    author_member_id=alice.id,
                    title=title,
                    body=body,
                    audience=m.AUDIENCE_WORKSPACE,
                    purpose=m.PURPOSE_CONVERSATION,
                    created_at=ts(long_ago),
                    updated_at=ts(long_ago),
                )
                for i, (title, body) in enumerate(
                    [
                        ("Old gate code", "The garden gate code is 4711."),
                        ("Old plumber", "The plumber Henrik fixed the sink in the cellar."),
                    ]
                )
            ],
        ),
        metadata=stack.op(),
    )
    gate_code, plumber = (r.id for r in imported.memories)
    fresh = alice.remember("The garden gate squeaks since the storm.", title="Gate")
    stack.wait_backlog_empty()
    sign_in(page, web_screen, alice.token)
    page.get_by_role("link", name="Expiring").click()
    expect(page.locator("#gate")).to_have_text(
        "The expiry gate is off in this workspace: nothing is hidden from recall."
    )
    expect(page.locator("#expiring-summary")).to_have_text("0 shown of 0")

    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, expiry_days=30), metadata=stack.op()
    )
    assert {i.memory.id for i in alice.recall("garden gate", mode=m.RECALL_MODE_LEXICAL).items} == {fresh.id}
    page.reload()
    expect(page.locator("#gate")).to_contain_text("memories not updated for 30 days")
    expect(page.locator("#expiring-summary")).to_have_text("2 shown of 2")
    expect(page.locator("article.memory")).to_have_count(2)
    assert fresh.id not in page.content()
    screenshot(page, "expiring")

    page.locator(f"article[data-memory-id='{gate_code}']").get_by_role("button", name="Keep").click()
    expect(page.locator("#notice")).to_have_text(
        f"Kept “Old gate code” ({gate_code}): it is back in recall (changed now)."
    )
    expect(page.locator("article.memory")).to_have_count(1)
    hits = {i.memory.id for i in alice.recall("garden gate", mode=m.RECALL_MODE_LEXICAL).items}
    assert hits == {fresh.id, gate_code}

    page.locator(f"article[data-memory-id='{plumber}']").get_by_role("button", name="Forget").click()
    expect(page.locator("#notice")).to_have_text(f"Forgot 1 memory(ies): {plumber}.")
    expect(page.locator("#expiring-summary")).to_have_text("0 shown of 0")
    assert code_of(alice.read, plumber) == grpc.StatusCode.NOT_FOUND


def test_duplicates_without_the_embedder_say_they_could_not_be_computed(stack, web_screen, page, dup_team):
    """With the embed service down the list is not an error: the page says the pairs could not be computed."""
    _, alice, _ = dup_team
    sign_in(page, web_screen, alice.token)
    with stack.embed_down():
        page.goto(f"{web_screen}/duplicates")
        expect(page.locator("#dense-available")).to_have_text("false")
        expect(page.locator("#no-vectors")).to_contain_text("could not be computed")
        expect(page.locator("#error")).to_have_count(0)
    deadline = time.monotonic() + 60  # leave the stack as found: the meaning arm answering again
    while not alice.recall("staff meeting").dense_available:
        assert time.monotonic() < deadline, "the embed service did not come back"
        time.sleep(0.5)


def test_a_long_pair_is_diffed_off_the_event_loop_and_cut(stack, web_screen, page, monkeypatch):
    """Two near-identical memories of 60,000 characters in the duplicate review: the page answers, its
    diff cut at WORDS_COMPARED words and saying so, the change among them marked and the one after
    them shown unmarked; and while the page's diff runs (held inside the alignment until the test
    lets it go) the health endpoint answers: the diff runs off the server's event loop."""
    from rapidfuzz.distance import Indel

    from web.diff import WORDS_COMPARED

    ws = stack.workspace("web long pair")
    alice = stack.member(ws)
    older = " ".join(f"tern{i}" for i in range(10_000))[:60_000]
    late = f"tern{WORDS_COMPARED + 100}"
    newer = older.replace(" tern3 ", " puffin3 ", 1).replace(f" {late} ", " puffin-late ", 1)
    b = alice.remember(older, title="Seabirds")
    a = alice.remember(newer, title="Seabirds")
    stack.wait_backlog_empty()

    entered, release = threading.Event(), threading.Event()
    opcodes = Indel.opcodes

    def held(x, y):
        if len(x) > 1_000 and not entered.is_set():
            entered.set()
            release.wait(120)
        return opcodes(x, y)

    monkeypatch.setattr(Indel, "opcodes", held)
    sign_in(page, web_screen, alice.token)
    expect(page.get_by_role("heading", level=1)).to_have_text("Search")
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in page.context.cookies())
    answered = {}

    def review():
        req = urllib.request.Request(f"{web_screen}/duplicates", headers={"Cookie": cookie})
        answered["page"] = urllib.request.urlopen(req, timeout=180).read().decode()

    reviewer = threading.Thread(target=review)
    reviewer.start()
    try:
        assert entered.wait(120), "the review page never reached the diff"
        assert urllib.request.urlopen(f"{web_screen}/healthz", timeout=60).read() == b"ok"
        assert reviewer.is_alive()  # the review page is still held in its diff
    finally:
        release.set()
        reviewer.join(180)
    assert f'data-a="{a.id}" data-b="{b.id}"' in answered["page"]

    page.goto(f"{web_screen}/duplicates")
    pair = proposal(page, a.id, b.id)
    expect(pair.locator(".cut-note")).to_have_text(
        re.compile(rf"only the first {WORDS_COMPARED:,} words of each side were compared")
    )
    expect(pair.locator(f"[data-memory-id='{a.id}'] mark.changed")).to_have_text(["puffin3"])
    expect(pair.locator(f"[data-memory-id='{b.id}'] mark.changed")).to_have_text(["tern3"])
    expect(pair.locator(f"[data-memory-id='{a.id}'] .body .uncompared")).to_contain_text("puffin-late")
    expect(pair.locator(f"[data-memory-id='{b.id}'] .body .uncompared")).to_contain_text(late)
    body = pair.locator(f"[data-memory-id='{a.id}'] .body")
    assert body.inner_text() == newer
