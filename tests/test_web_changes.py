"""Correct, supersede and forget from a memory's page, in a real browser over the real stack
(web/memory_page.py): each through its review page and Confirm, each result read back through the
gateway; a revision changed meanwhile (at the form and at the review page) refused with "changed
since you read it" and nothing overwritten; bad input (empty, too long, not a number, nothing
changed) as the gateway's message; a change posted without the CSRF token refused; and the forms only
for a person the gateway lets change the memory: not for another member (a workspace memory: the
forms absent and a posted change PERMISSION_DENIED; a member-only one: NOT_FOUND, exactly as a memory
that does not exist, nothing of it on the page), but for an admin on a workspace memory."""

from __future__ import annotations

import re
import uuid

import grpc
import pytest
from conftest import code_of, sign_in
from playwright.sync_api import expect
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

pytestmark = pytest.mark.browser

STALE = "Changed since you read it: you read revision {read}, and it is now at revision {current}"


@pytest.fixture(scope="module")
def team(stack):
    """Alice writes; bob is another member; carol is an admin."""
    ws = stack.workspace("web changes")
    return {"alice": stack.member(ws), "bob": stack.member(ws), "carol": stack.member(ws, role=m.ROLE_ADMIN)}


def open_form(page, name: str):
    """Opens the change form ``name`` (a details element) of the memory page; returns it."""
    box = page.locator(f"details#{name}")
    box.locator("summary").click()
    return box


def token_of(page) -> str:
    return page.locator("input[name=csrftoken]").first.get_attribute("value")


def correct_api(stack, member, mem: m.Memory, body: str) -> m.Memory:
    """A change made meanwhile, through the gateway."""
    req = g.CorrectRequest(id=mem.id, expected_revision=mem.revision, body=body)
    return stack.memory.Correct(req, metadata=member.md()).memory


def test_correct_through_the_review_page(stack, web_screen, page, team):
    alice = team["alice"]
    mem = alice.remember("The boat leaves from pier 3.\nBring a coat.", title="Boat", confidence=0.85)
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/memories/{mem.id}")

    # Only the title changes: the review marks it, and only it is sent on (the body's line break
    # comes back from the textarea as CR LF and must not count as a change).
    form = open_form(page, "correct")
    form.get_by_label("Title").fill("Ferry boat")
    form.get_by_role("button", name="Review the correction").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Correct this memory?")
    expect(page.locator("#after mark.changed")).to_have_text(["Ferry boat"])
    expect(page.locator("#after .body mark")).to_have_count(0)
    expect(page.locator("#after .side-label")).to_have_text("After: revision 2")
    sent = page.locator("#confirm input[type=hidden]").evaluate_all("els => els.map(e => e.name)")
    assert sorted(sent) == ["confirmed", "csrftoken", "expected_revision", "title"]
    page.get_by_role("button", name="Save the correction").click()
    expect(page).to_have_url(re.compile(f"/memories/{mem.id}\\?done=corrected$"))
    expect(page.locator("#notice")).to_have_text(re.compile(r"^Corrected: this is revision 2;"))
    stored = alice.read(mem.id, include_history=True)
    assert (stored.revision, stored.title, stored.body) == (
        2,
        "Ferry boat",
        "The boat leaves from pier 3.\nBring a coat.",
    )
    assert stored.confidence == 0.85 and [(r.revision, r.title) for r in stored.history] == [(1, "Boat")]

    # Then the body and the confidence.
    form = open_form(page, "correct")
    form.get_by_label("Body").fill("The boat leaves from pier 4.\nBring a coat.")
    form.get_by_label("Confidence (0 to 1)").fill("0.6")
    form.get_by_role("button", name="Review the correction").click()
    expect(page.locator("#before .body mark.changed")).to_have_text(["3."])
    expect(page.locator("#after .body mark.changed")).to_have_text(["4."])
    expect(page.locator("#after .meta")).to_contain_text("confidence 0.6")
    page.get_by_role("button", name="Save the correction").click()
    expect(page.locator("#notice")).to_have_text(re.compile(r"^Corrected: this is revision 3;"))
    stored = alice.read(mem.id)
    assert (stored.revision, stored.body, stored.confidence) == (3, "The boat leaves from pier 4.\nBring a coat.", 0.6)
    expect(page.locator("article.single .body")).to_have_text("The boat leaves from pier 4.\nBring a coat.")

    # Cancel on the review page changes nothing.
    form = open_form(page, "correct")
    form.get_by_label("Body").fill("Cancelled text.")
    form.get_by_role("button", name="Review the correction").click()
    page.locator("#cancel").click()
    expect(page).to_have_url(re.compile(f"/memories/{mem.id}$"))
    assert alice.read(mem.id).revision == 3


def test_supersede_through_the_review_page(stack, web_screen, page, team):
    alice, bob = team["alice"], team["bob"]
    old = alice.remember("The office closes at six.", title="Office hours")
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/memories/{old.id}")
    form = open_form(page, "supersede")
    form.get_by_label("Kind").select_option("decision")
    form.get_by_label("Body").fill("The office closes at seven from March.")
    form.get_by_label("Confidence (0 to 1)").fill("0.7")
    form.get_by_label("Audience").select_option("member")
    form.get_by_role("button", name="Review the new memory").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Supersede this memory?")
    expect(page.locator("#after .meta")).to_contain_text("decision · confidence 0.7 · member-only: just you")
    sent = page.locator("#confirm input[type=hidden]").evaluate_all(
        "els => Object.fromEntries(els.map(e => [e.name, e.value]))"
    )
    page.get_by_role("button", name="Supersede it").click()
    expect(page).to_have_url(re.compile(r"/memories/[0-9a-f-]{36}\?done=superseded$"))
    new_id = re.search(r"/memories/([0-9a-f-]{36})", page.url).group(1)
    # Confirm sent twice (a second click) supersedes once: its request id answers with the same successor.
    again = page.context.request.post(f"{web_screen}/memories/{old.id}/supersede", form=sent, max_redirects=0)
    assert again.status == 303 and again.headers["location"] == f"/memories/{new_id}?done=superseded"
    expect(page.locator("#notice")).to_have_text(re.compile(r"^Superseded: this is the new memory"))
    new = alice.read(new_id)
    assert (new.kind, new.title, new.body, new.confidence) == (
        m.KIND_DECISION,
        "Office hours",
        "The office closes at seven from March.",
        0.7,
    )
    assert new.audience == m.AUDIENCE_MEMBER and new.audience_member_id == alice.id
    assert alice.read(old.id).superseded_by_id == new_id
    assert code_of(bob.read, new_id) == grpc.StatusCode.NOT_FOUND  # narrowed to alice
    # The superseded memory offers only Forget now, and points to its successor.
    page.goto(f"{web_screen}/memories/{old.id}")
    expect(page.locator("details#correct, details#supersede")).to_have_count(0)
    expect(page.locator("details#forget")).to_have_count(1)
    expect(page.locator("#ended-hint a")).to_have_attribute("href", f"/memories/{new_id}")


def test_forget_through_the_review_page(stack, web_screen, page, team):
    alice = team["alice"]
    mem = alice.remember("The spare key is under the blue pot.", title="Spare key")
    derived = stack.memory.Derive(
        g.DeriveRequest(source_ids=[mem.id], body="Keys are kept under pots."), metadata=alice.md()
    ).memory
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/memories/{mem.id}")
    form = open_form(page, "forget")
    form.get_by_label("Reason (kept on the tombstone)").fill("the key moved")
    form.get_by_role("button", name="Review what is forgotten").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Forget this memory?")
    expect(page.locator("#reason")).to_have_text("the key moved")
    expect(page.locator("#derivations article")).to_have_attribute("data-memory-id", derived.id)
    assert alice.read(mem.id).id == mem.id  # the review forgets nothing
    page.get_by_role("button", name="Forget it").click()
    expect(page).to_have_url(re.compile(f"/memories/{mem.id}/forgotten\\?count=2$"))
    expect(page.locator("#forgotten")).to_have_text(
        re.compile(f"^Memory {mem.id} and 1 derived from it were forgotten: nobody can read or recall them")
    )
    assert code_of(alice.read, mem.id) == grpc.StatusCode.NOT_FOUND
    assert code_of(alice.read, derived.id) == grpc.StatusCode.NOT_FOUND
    # The forgotten page says "forgotten" only of a memory that cannot be read.
    live = alice.remember("Still here.")
    page.goto(f"{web_screen}/memories/{live.id}/forgotten?count=1")
    expect(page).to_have_url(re.compile(f"/memories/{live.id}$"))


def test_a_change_made_meanwhile_is_never_overwritten(stack, web_screen, page, team):
    alice = team["alice"]
    mem = alice.remember("The meeting is in room 5.", title="Meeting")
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/memories/{mem.id}")

    # Changed between the memory page and its form's review: refused at once, the typed text kept.
    form = open_form(page, "correct")
    form.get_by_label("Body").fill("The meeting is in room 6.")
    mem = correct_api(stack, alice, mem, "The meeting is in room 7.")
    response_status = []
    page.on("response", lambda r: response_status.append(r.status) if r.request.method == "POST" else None)
    form.get_by_role("button", name="Review the correction").click()
    expect(page.locator("#error")).to_have_text(re.compile("^" + re.escape(STALE.format(read=1, current=2))))
    assert response_status[-1] == 409
    expect(page.locator("details#correct")).to_have_attribute("open", "")
    expect(page.locator("details#correct textarea")).to_have_value("The meeting is in room 6.")
    expect(page.locator("article.single .body")).to_have_text("The meeting is in room 7.")  # as it is now
    assert alice.read(mem.id).body == "The meeting is in room 7."

    # Changed between the review page and Confirm: the gateway's ABORTED, said the same way.
    page.locator("details#correct").get_by_role("button", name="Review the correction").click()
    expect(page.locator("#after .body")).to_have_text("The meeting is in room 6.")
    mem = correct_api(stack, alice, mem, "The meeting is in room 8.")
    page.get_by_role("button", name="Save the correction").click()
    expect(page.locator("#error")).to_have_text(
        STALE.format(read=2, current=3) + " (shown below). Nothing was changed: read it again, and make your "
        "change again if it still applies. (ABORTED: revision conflict: expected 2, current 3)"
    )
    assert response_status[-1] == 409
    assert alice.read(mem.id).body == "The meeting is in room 8."

    # Supersede too.
    form = open_form(page, "supersede")
    form.get_by_label("Body").fill("The meeting moved online.")
    form.get_by_role("button", name="Review the new memory").click()
    mem = correct_api(stack, alice, mem, "The meeting is in room 9.")
    page.get_by_role("button", name="Supersede it").click()
    expect(page.locator("#error")).to_contain_text(STALE.format(read=3, current=4))
    assert not alice.read(mem.id).superseded_by_id

    # Forget takes no revision: the screen compares the one read with the memory's now.
    form = open_form(page, "forget")
    form.get_by_role("button", name="Review what is forgotten").click()
    mem = correct_api(stack, alice, mem, "The meeting is in room 10.")
    page.get_by_role("button", name="Forget it").click()
    expect(page.locator("#error")).to_have_text(re.compile("^" + re.escape(STALE.format(read=4, current=5))))
    assert response_status[-1] == 409
    assert alice.read(mem.id).body == "The meeting is in room 10."  # not forgotten


def test_bad_input_reads_as_the_gateways_message(stack, web_screen, page, team):
    alice = team["alice"]
    mem = alice.remember("Parking is free on Sundays.", title="Parking")
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/memories/{mem.id}")
    cases = [
        ("correct", "Body", "   ", r"^INVALID_ARGUMENT: body must not be empty or blank"),
        (
            "correct",
            "Body",
            "x" * 70_000,
            r"^INVALID_ARGUMENT: body is 70000 bytes; the limit is 65536 bytes of UTF-8$",
        ),
        ("correct", "Confidence (0 to 1)", "high", r"^confidence: not a number: 'high'$"),
        ("correct", "Confidence (0 to 1)", "2", r"^INVALID_ARGUMENT: confidence must be between 0 and 1$"),
        ("correct", "Title", "Parking", r"^Nothing to correct: "),
        ("supersede", "Body", "", r"^INVALID_ARGUMENT: body must not be empty or blank"),
        ("forget", "Reason (kept on the tombstone)", "r" * 1001, r"^INVALID_ARGUMENT: reason must be at most 1000"),
    ]
    buttons = {
        "correct": "Review the correction",
        "supersede": "Review the new memory",
        "forget": "Review what is forgotten",
    }
    for name, label, value, message in cases:
        page.goto(f"{web_screen}/memories/{mem.id}")
        form = open_form(page, name)
        form.get_by_label(label).fill(value)
        form.get_by_role("button", name=buttons[name]).click()
        expect(page.locator("#error")).to_have_text(re.compile(message))
        expect(page.locator(f"details#{name}")).to_have_attribute("open", "")
    # The same refused by the gateway itself when the review page is skipped.
    form = {"csrftoken": token_of(page), "expected_revision": "1", "confirmed": "1", "body": ""}
    resp = page.context.request.post(f"{web_screen}/memories/{mem.id}/correct", form=form, max_redirects=0)
    assert resp.status == 400 and "INVALID_ARGUMENT: body must not be empty or blank" in resp.text()
    stored = alice.read(mem.id)
    assert (stored.revision, stored.body, stored.superseded_by_id) == (1, "Parking is free on Sundays.", "")


def test_a_change_without_the_csrf_token_is_refused(stack, web_screen, page, team):
    alice = team["alice"]
    mem = alice.remember("The alarm code is written nowhere.", title="Alarm")
    sign_in(page, web_screen, alice.token)
    page.goto(f"{web_screen}/memories/{mem.id}")
    for change, fields in (("forget", {}), ("correct", {"body": "Changed."}), ("supersede", {"body": "New."})):
        form = {"expected_revision": "1", "confirmed": "1", **fields}
        resp = page.context.request.post(f"{web_screen}/memories/{mem.id}/{change}", form=form, max_redirects=0)
        assert resp.status == 403 and "cross-site request token" in resp.text(), change
    stored = alice.read(mem.id)
    assert (stored.revision, stored.body, stored.superseded_by_id) == (1, "The alarm code is written nowhere.", "")
    # A form larger than any the screen sends (a 64 KiB body, form-encoded) is refused unread.
    form = {"csrftoken": token_of(page), "expected_revision": "1", "confirmed": "1", "body": "é" * 100_000}
    resp = page.context.request.post(f"{web_screen}/memories/{mem.id}/correct", form=form, max_redirects=0)
    assert resp.status == 413
    assert alice.read(mem.id).revision == 1


def test_only_who_may_change_a_memory_gets_the_forms(stack, web_screen, page, team):
    alice, bob, carol = team["alice"], team["bob"], team["carol"]
    shared = alice.remember("The printer on floor 2 jams on A3.", title="Printer")
    private = alice.remember(
        "Alice-Private-K9: my doctor is on Elm Street.", title="Doctor", audience=m.AUDIENCE_MEMBER
    )

    # Alice, the author, gets them on both.
    sign_in(page, web_screen, alice.token)
    for mem in (shared, private):
        page.goto(f"{web_screen}/memories/{mem.id}")
        expect(page.locator("#changes details")).to_have_count(3)

    # Bob reads the workspace memory but may not change it: no forms, and a posted change is the
    # gateway's PERMISSION_DENIED on the page (403), at the review step and at Confirm alike.
    sign_in(page, web_screen, bob.token)
    resp = page.goto(f"{web_screen}/memories/{shared.id}")
    assert resp.status == 200
    expect(page.locator("article.single .body")).to_have_text(shared.body)
    expect(page.locator("#changes")).to_have_count(0)
    token = token_of(page)
    for confirmed in ("", "1"):
        for change, fields in (
            ("correct", {"body": "Bob was here."}),
            ("supersede", {"body": "Bob's."}),
            ("forget", {}),
        ):
            form = {"csrftoken": token, "expected_revision": "1", "confirmed": confirmed, **fields}
            resp = page.context.request.post(f"{web_screen}/memories/{shared.id}/{change}", form=form, max_redirects=0)
            assert resp.status == 403, (change, confirmed)
            assert "PERMISSION_DENIED: you may read this memory but not change it" in resp.text(), (change, confirmed)
    stored = alice.read(shared.id)
    assert (stored.revision, stored.body, stored.superseded_by_id) == (1, shared.body, "")

    # Alice's member-only memory is, to bob, a memory that does not exist: its page and every posted
    # change answer as a made-up id does, and nothing of it shows.
    missing = page.goto(f"{web_screen}/memories/{uuid.uuid4()}")
    assert missing.status == 404
    not_found = page.locator("#error").inner_text()
    assert not_found.startswith("NOT_FOUND: ")
    resp = page.goto(f"{web_screen}/memories/{private.id}")
    assert resp.status == 404
    expect(page.locator("#error")).to_have_text(not_found)
    expect(page.locator("#changes")).to_have_count(0)
    assert "Alice-Private-K9" not in page.content() and "Doctor" not in page.content()
    for confirmed in ("", "1"):
        for change in ("correct", "supersede", "forget"):
            form = {"csrftoken": token, "expected_revision": "1", "confirmed": confirmed, "body": "Bob's."}
            resp = page.context.request.post(f"{web_screen}/memories/{private.id}/{change}", form=form, max_redirects=0)
            assert resp.status == 404 and not_found in resp.text(), (change, confirmed)
            assert "Alice-Private-K9" not in resp.text() and "Doctor" not in resp.text()
    stored = alice.read(private.id)
    assert (stored.revision, stored.body, stored.superseded_by_id) == (1, private.body, "")

    # Carol, an admin, may change the workspace memory (the change rule), never read the private one.
    sign_in(page, web_screen, carol.token)
    page.goto(f"{web_screen}/memories/{shared.id}")
    expect(page.locator("#changes details")).to_have_count(3)
    assert page.goto(f"{web_screen}/memories/{private.id}").status == 404
    expect(page.locator("#changes")).to_have_count(0)
