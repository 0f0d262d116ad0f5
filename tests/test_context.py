"""The context bundle (GetContext), pins and the workspace setting, end to end through the gateway
against real PostgreSQL (tests/conftest.py); tokens are servicekit.render's count."""

from __future__ import annotations

import datetime
import json
import subprocess
import uuid

import grpc
import pytest
from cli_runner import at_gateway
from conftest import code_of
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit import render
from servicekit.errors import error_info

PINNED, SUMMARY, ENTITY, RECENT = (
    m.CONTEXT_PART_PINNED,
    m.CONTEXT_PART_SUMMARY,
    m.CONTEXT_PART_ENTITY,
    m.CONTEXT_PART_RECENT,
)
MAX = 100_000


def count(text: str) -> int:
    return render.tokens(text)


def bundle_on(stack, ws: str, on: bool = True) -> g.UpdateWorkspaceSettingsResponse:
    return stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, context_bundle=on), metadata=stack.op()
    )


def get_context(member, budget: int = MAX, purpose=m.PURPOSE_CONVERSATION) -> g.GetContextResponse:
    return member.stack.memory.GetContext(
        g.GetContextRequest(purpose=purpose, token_budget=budget), metadata=member.md()
    )


def pin(member, memory_id: str) -> g.PinMemoryResponse:
    return member.stack.memory.PinMemory(g.PinMemoryRequest(id=memory_id), metadata=member.md())


def unpin(member, memory_id: str) -> g.UnpinMemoryResponse:
    return member.stack.memory.UnpinMemory(g.UnpinMemoryRequest(id=memory_id), metadata=member.md())


def age(stack, ws: str, memory_id: str, hours: float) -> None:
    """Dates a memory ``hours`` before now (creation time is what "newest" and the window read)."""
    with stack.db(ws) as conn:
        conn.execute(
            "UPDATE memory SET created_at = now() - make_interval(secs => %s) WHERE id = %s",
            (hours * 3600, uuid.UUID(memory_id)),
        )


@pytest.fixture(scope="module")
def world(stack):
    """A workspace with the bundle on: alice's summaries, notes about entities, old notes, two pins;
    a tasks memory and bob's private memory that alice's conversation bundle must not show."""
    ws = stack.workspace("context bundle")
    bundle_on(stack, ws)
    alice, bob = stack.member(ws), stack.member(ws)
    ids: dict[str, str] = {}
    entity_ids: dict[str, str] = {}  # a name mentions a new entity; later mentions name its id

    def make(name: str, hours: float, kind=m.KIND_NOTE, about=(), who=None, **kw) -> None:
        req = g.RememberRequest(
            purpose=kw.pop("purpose", m.PURPOSE_CONVERSATION),
            kind=kind,
            title=name,
            body=f"Memory {name} of the context bundle test.",
            audience=kw.pop("audience", m.AUDIENCE_WORKSPACE),
            entities=[
                m.EntityMention(entity_id=entity_ids[a]) if a in entity_ids else m.EntityMention(name=a) for a in about
            ],
        )
        ids[name] = stack.memory.Remember(req, metadata=(who or alice).md()).memory.id
        for link in alice.read(ids[name]).links if who is None else ():
            entity_ids.setdefault(link.target_entity_name, link.target_entity_id)
        age(stack, ws, ids[name], hours)

    for i in range(4):
        make(f"s{i}", 1 + i, kind=m.KIND_SUMMARY)
    about = {0: ["Maria"], 2: ["Maria"], 5: ["Maria"], 1: ["Porto"], 3: ["Porto"], 4: ["Lena"], 6: ["Otto"]}
    about |= {7: ["Ines"], 8: ["Kai"]}
    for i in range(12):
        make(f"n{i}", 5 + i, about=about.get(i, ()))
    for i in range(6):
        make(f"o{i}", 24 * 40, about=["Archive"])  # the most mentioned entity, but not in the last 30 days
    make("t0", 0.5, purpose=m.PURPOSE_TASKS)
    make("b0", 0.5, who=bob, audience=m.AUDIENCE_MEMBER)
    for i in range(1, 4):  # Kai is mentioned four times for bob, once for alice
        make(f"b{i}", 0.5 + i / 10, who=bob, audience=m.AUDIENCE_MEMBER, about=["Kai"])
    pin(alice, ids["n11"])
    pin(alice, ids["s1"])
    return {"ws": ws, "alice": alice, "bob": bob, "ids": ids}


def names(world, items) -> list[str]:
    by_id = {v: k for k, v in world["ids"].items()}
    return [by_id[it.memory.id] for it in items]


def test_off_by_default_is_failed_precondition_naming_the_setting(stack):
    ws = stack.workspace("bundle off")
    alice = stack.member(ws)
    alice.remember("Something to bundle.")
    settings = stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws), metadata=stack.op()
    )
    assert settings.context_bundle is False
    with pytest.raises(grpc.RpcError) as err:
        get_context(alice)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "context_bundle" in err.value.details()
    info = error_info(err.value)
    assert info.reason == "CONTEXT_BUNDLE_OFF" and info.metadata["setting"] == "context_bundle"
    assert bundle_on(stack, ws).context_bundle is True
    assert [it.memory.body for it in get_context(alice).items] == ["Something to bundle."]
    # Turning it off again refuses again; other settings are kept throughout.
    off = bundle_on(stack, ws, False)
    assert off.context_bundle is False and off.dense_floor == pytest.approx(0.30)
    assert code_of(get_context, alice) == grpc.StatusCode.FAILED_PRECONDITION


def test_parts_their_order_and_no_duplicates(world):
    resp = get_context(world["alice"])
    assert not resp.cut_items and resp.token_budget == MAX
    assert names(world, resp.items) == [
        "s1", "n11",  # pinned, newest first
        "s0", "s2",  # the 3 newest summaries, s1 already shown
        "n0", "n1", "n4", "n6", "n7",  # newest about Maria, Porto, Lena, Otto, Ines
        "s3", "n2", "n3", "n5",  # the 10 newest, less those already shown
    ]  # fmt: skip
    parts = [it.part for it in resp.items]
    assert parts == [PINNED] * 2 + [SUMMARY] * 2 + [ENTITY] * 5 + [RECENT] * 4
    mentioned = {it.memory.id: [(e.name, e.mentions) for e in it.entities] for it in resp.items}
    assert mentioned[world["ids"]["n0"]] == [("Maria", 3)]
    assert mentioned[world["ids"]["n1"]] == [("Porto", 2)]
    assert [mentioned[world["ids"][n]] for n in ("n4", "n6", "n7")] == [[("Lena", 1)], [("Otto", 1)], [("Ines", 1)]]
    assert all(not mentioned[world["ids"][n]] for n in ("s1", "n11", "s0", "s3", "n2"))
    # Newest first within each part.
    for part in (PINNED, SUMMARY, ENTITY, RECENT):
        times = [it.memory.created_at.ToDatetime() for it in resp.items if it.part == part]
        assert times == sorted(times, reverse=True)
    # One text block: a heading per part in order, provenance and dates before each memory's text.
    text = resp.text
    headings = ["## Pinned by you", "## Newest summaries", "## Newest memory about each entity", "## Newest memories"]
    assert [text.index(h) for h in headings] == sorted(text.index(h) for h in headings)
    for it in resp.items:
        head = text.index(f"[{it.memory.id[:8]}] ")  # ids shortened (the items carry them whole)
        assert (
            head < text.index(f"by member {world['alice'].id[:8]} | written ", head) < text.index(it.memory.body, head)
        )
    assert text.index('(newest memory about "Maria", mentioned') < text.index(f"[{world['ids']['n0'][:8]}] ")
    assert "Cut to fit" not in text and resp.tokens == count(text)
    assert sum(it.tokens for it in resp.items) < resp.tokens


def test_nothing_the_caller_may_not_read_appears(world):
    ids = world["ids"]
    alice_sees = {it.memory.id for it in get_context(world["alice"]).items}
    assert not alice_sees & {ids["t0"], ids["b0"]} and not alice_sees & {ids[f"o{i}"] for i in range(6)}
    tasks = get_context(world["alice"], purpose=m.PURPOSE_TASKS)
    assert [it.memory.id for it in tasks.items] == [ids["t0"]] and "Archive" not in tasks.text
    bob = get_context(world["bob"])
    assert ids["b0"] in {it.memory.id for it in bob.items}
    assert all(it.part != PINNED for it in bob.items)  # alice's pins are hers
    assert "Pinned by you" not in bob.text
    # Mentions are counted over readable memories only: bob's private ones make Kai his most
    # mentioned entity, and leave alice's counts (Kai: one mention, not in her top five) alone.
    bob_entities = [(e.name, e.mentions) for it in bob.items for e in it.entities]
    assert bob_entities[0] == ("Kai", 4)
    assert "Kai" not in get_context(world["alice"]).text


def test_the_budget_cuts_and_says_what(world):
    full = get_context(world["alice"])
    resp = get_context(world["alice"], budget=400)
    assert resp.token_budget == 400 and resp.tokens <= 400 and resp.tokens == count(resp.text)
    kept, cut = [it.memory.id for it in resp.items], [it.memory.id for it in resp.cut_items]
    assert kept and cut
    order = [it.memory.id for it in full.items]
    assert sorted(kept + cut, key=order.index) == order and kept == sorted(kept, key=order.index)
    full_tokens = {it.memory.id: it.tokens for it in full.items}
    assert {it.memory.id: it.tokens for it in [*resp.items, *resp.cut_items]} == full_tokens
    assert f"# Cut to fit 400 tokens: {len(cut)} of {len(order)} memories left out (" in resp.text
    assert not any(f"[{mid}] revision" in resp.text for mid in cut)
    # The default budget is 1,500 tokens.
    default = get_context(world["alice"], budget=0)
    assert default.token_budget == 1_500 and default.tokens <= 1_500 and default.tokens == count(default.text)


def test_a_memory_that_does_not_fit_is_cut_and_later_ones_still_fit(stack):
    ws = stack.workspace("bundle long pin")
    bundle_on(stack, ws)
    alice = stack.member(ws)
    long = alice.remember(" ".join(f"word{i}" for i in range(1_500)))
    short = [alice.remember(f"Short note {i}.").id for i in range(3)]
    pin(alice, long.id)
    resp = get_context(alice, budget=0)
    assert [it.memory.id for it in resp.cut_items] == [long.id]
    assert [it.memory.id for it in resp.items] == short[::-1]
    assert resp.cut_items[0].part == PINNED and resp.cut_items[0].tokens > 1_500
    assert "# Cut to fit 1500 tokens: 1 of 4 memories left out (1 pinned)" in resp.text
    assert "word17" not in resp.text and resp.tokens <= 1_500


def test_pins(stack):
    ws = stack.workspace("bundle pins")
    bundle_on(stack, ws)
    alice, bob = stack.member(ws), stack.member(ws, purposes=[m.PURPOSE_CONVERSATION])
    old = alice.remember("An old note worth keeping in view.")
    for i in range(12):
        alice.remember(f"Newer note {i}.")
    private = bob.remember("Bob's own note.", audience=m.AUDIENCE_MEMBER)
    tasks = alice.remember("A tasks memory.", purpose=m.PURPOSE_TASKS)
    assert old.id not in {it.memory.id for it in get_context(alice).items}  # too old for the 10 newest

    first = pin(alice, old.id)
    assert first.memory_id == old.id and not first.already_pinned and first.pinned_at.seconds > 0
    again = pin(alice, old.id)
    assert again.already_pinned and again.pinned_at == first.pinned_at
    resp = get_context(alice)
    assert resp.items[0].memory.id == old.id and resp.items[0].part == PINNED
    assert sum(it.memory.id == old.id for it in resp.items) == 1

    # Only memories the caller can read: another member's private one, an unknown or malformed id,
    # a memory of a purpose the token lacks are NOT_FOUND, as Read answers.
    for target in (private.id, str(uuid.uuid4()), "not-a-uuid"):
        assert code_of(pin, alice, target) == grpc.StatusCode.NOT_FOUND
        assert code_of(unpin, alice, target) == grpc.StatusCode.NOT_FOUND
    assert code_of(pin, bob, tasks.id) == grpc.StatusCode.NOT_FOUND
    # A pin of another purpose is not in this purpose's bundle.
    pin(alice, tasks.id)
    assert tasks.id not in {it.memory.id for it in get_context(alice).items}
    assert [it.memory.id for it in get_context(alice, purpose=m.PURPOSE_TASKS).items] == [tasks.id]

    # A pinned memory that is superseded stays pinned, shown with its successor.
    succ = stack.memory.Supersede(
        g.SupersedeRequest(id=old.id, expected_revision=1, kind=m.KIND_NOTE, body="The old note, replaced."),
        metadata=alice.md(),
    ).memory
    resp = get_context(alice)
    assert resp.items[0].memory.id == old.id and resp.items[0].memory.superseded_by_id == succ.id
    assert f"superseded by {succ.id}" in resp.text
    assert succ.id in {it.memory.id for it in resp.items if it.part == RECENT}

    assert unpin(alice, old.id).was_pinned is True
    assert unpin(alice, old.id).was_pinned is False
    assert old.id not in {it.memory.id for it in get_context(alice).items}

    # A forgotten pin shows nothing.
    pin(alice, succ.id)
    stack.memory.Forget(g.ForgetRequest(id=succ.id, reason="test"), metadata=alice.md())
    assert succ.id not in {it.memory.id for it in get_context(alice).items}


def test_at_most_100_pins(stack):
    ws = stack.workspace("bundle pin limit")
    alice = stack.member(ws)
    batch = g.RememberBatchRequest(
        requests=[
            g.RememberRequest(purpose=m.PURPOSE_CONVERSATION, body=f"pin me {i}", audience=m.AUDIENCE_WORKSPACE)
            for i in range(101)
        ]
    )
    ids = [r.memory.id for r in stack.memory.RememberBatch(batch, metadata=alice.md()).results]
    for mid in ids[:100]:
        pin(alice, mid)
    with pytest.raises(grpc.RpcError) as err:
        pin(alice, ids[100])
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "at most 100" in err.value.details()
    assert error_info(err.value).reason == "PIN_LIMIT"
    assert pin(alice, ids[0]).already_pinned  # pinning again is not a new pin
    unpin(alice, ids[0])
    assert not pin(alice, ids[100]).already_pinned


def test_bad_input(stack, world):
    alice = world["alice"]
    for budget in (-1, 1, 199, 100_001):
        with pytest.raises(grpc.RpcError) as err:
            get_context(alice, budget=budget)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "token_budget" in err.value.details()
    assert code_of(get_context, alice, purpose=m.PURPOSE_UNSPECIFIED) == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(get_context, alice, purpose=99) == grpc.StatusCode.INVALID_ARGUMENT
    narrow = stack.member(world["ws"], purposes=[m.PURPOSE_TASKS])
    assert code_of(get_context, narrow) == grpc.StatusCode.PERMISSION_DENIED
    assert get_context(narrow, budget=200, purpose=m.PURPOSE_TASKS).tokens <= 200
    call = stack.memory.GetContext
    assert code_of(call, g.GetContextRequest(purpose=m.PURPOSE_CONVERSATION)) == grpc.StatusCode.UNAUTHENTICATED
    assert (
        code_of(call, g.GetContextRequest(purpose=1), metadata=(("authorization", "Bearer rct_nope"),))
        == grpc.StatusCode.UNAUTHENTICATED
    )
    assert code_of(stack.memory.PinMemory, g.PinMemoryRequest(id="")) == grpc.StatusCode.UNAUTHENTICATED


def test_an_empty_bundle_says_so(stack):
    ws = stack.workspace("bundle empty")
    bundle_on(stack, ws)
    resp = get_context(stack.member(ws), budget=200)
    assert not resp.items and not resp.cut_items and "No memories of this purpose" in resp.text
    assert resp.tokens == count(resp.text) <= 200
    assert datetime.datetime.now(datetime.UTC).isoformat()[:10] in resp.text


def cli(stack, token: str, *args: str) -> subprocess.CompletedProcess:
    """``recallatron ARGS`` in this process (tests/cli_runner.py) at the stack's gateway, with member ``token``."""
    return at_gateway(f"127.0.0.1:{stack.gateway.port}", *args, token=token, check=False)


def test_the_commands(stack):
    ws = stack.workspace("bundle cli")
    alice = stack.member(ws)
    old = alice.remember("The first note, pinned from the command line.")
    for i in range(10):
        alice.remember(f"A later note {i}.")
    off = cli(stack, alice.token, "context")
    assert off.returncode == 1 and off.stderr.startswith("FAILED_PRECONDITION: ") and "context_bundle" in off.stderr
    on = cli(
        stack,
        "",
        "workspace",
        "settings",
        "--workspace",
        ws,
        "--context-bundle",
        "on",
        "--operator-token",
        stack.operator_token,
    )
    assert on.returncode == 0 and on.stdout.strip().endswith("context_bundle=on"), on.stderr
    pinned = cli(stack, alice.token, "pin", old.id)
    assert pinned.returncode == 0 and pinned.stdout.startswith(f"pinned {old.id} at "), pinned.stderr
    assert cli(stack, alice.token, "pin", old.id).stdout.startswith(f"already pinned {old.id}")
    block = cli(stack, alice.token, "context")
    assert block.returncode == 0 and block.stdout.startswith("# Recallatron context (conversation, built ")
    assert (
        block.stdout.index("## Pinned by you") < block.stdout.index("The first note") < block.stdout.index("## Newest")
    )
    # The block is GetContext's text (the opening line names the time it was built).
    assert block.stdout.rstrip("\n").split("\n")[1:] == get_context(alice, budget=0).text.split("\n")[1:]
    as_json = json.loads(cli(stack, alice.token, "context", "--budget", "200", "--json").stdout)
    assert as_json["token_budget"] == 200 and as_json["tokens"] <= 200 and as_json["cut_items"]
    assert cli(stack, alice.token, "unpin", old.id).stdout.strip() == f"unpinned {old.id}"
    assert cli(stack, alice.token, "unpin", old.id).stdout.strip() == f"{old.id} was not pinned"
    bad = cli(stack, alice.token, "context", "--budget", "50")
    assert bad.returncode == 1 and bad.stderr.startswith("INVALID_ARGUMENT: token_budget")
    assert cli(stack, alice.token, "context", "--budget", "lots").returncode == 2
    missing = cli(stack, alice.token, "pin", str(uuid.uuid4()))
    assert missing.returncode == 1 and missing.stderr.strip() == "NOT_FOUND: memory not found"


# Unbroken words past what a word-piece tokenizer counts (it makes each one token, or [UNK]).
LONG_WORDS = {
    "one letter": "a" * 50_000,
    "mixed letters": "".join("abcdefghijklmnopqrstuvwxyz"[(i * 7 + i // 26) % 26] for i in range(50_000)),
    "digits": "7" * 50_000,
    "cjk": "語" * 21_000,
    "emoji": "🦜" * 16_000,
    "url": "https://example.org/" + "x1-" * 16_000,
}


def test_a_long_unbroken_word_cannot_escape_the_budget(stack):
    ws = stack.workspace("bundle long words")
    bundle_on(stack, ws)
    alice = stack.member(ws)
    short = alice.remember("A short note that fits.")
    long = {name: alice.remember(f"{word}").id for name, word in LONG_WORDS.items()}
    for mid in long.values():
        pin(alice, mid)
    for budget in (300, 1_000):
        resp = get_context(alice, budget=budget)
        assert len(resp.text) <= 4 * budget and resp.tokens == count(resp.text) <= budget
        assert set(long.values()) <= {it.memory.id for it in resp.cut_items}
        assert all(it.tokens > 5_000 for it in resp.cut_items if it.memory.id != short.id)
        assert not any(word[:50] in resp.text for word in LONG_WORDS.values())
        assert f"# Cut to fit {budget} tokens: " in resp.text
    assert [it.memory.id for it in resp.items] == [short.id]  # at 1,000 the short one fits
    assert f"{len(long)} of {len(long) + 1} memories left out ({len(long)} pinned)" in resp.text
    # `recallatron context` prints that text, bounded alike.
    out = cli(stack, alice.token, "context", "--budget", "300")
    assert out.returncode == 0 and len(out.stdout) <= 4 * 300 + 1 and "# Cut to fit 300 tokens: 6 of 7" in out.stdout
    # With room, one of them is kept whole and counted by its length.
    alone = stack.workspace("bundle one long word")
    bundle_on(stack, alone)
    bob = stack.member(alone)
    bob.remember(LONG_WORDS["one letter"])
    roomy = get_context(bob, budget=20_000)
    assert not roomy.cut_items and LONG_WORDS["one letter"] in roomy.text
    assert 50_000 // 3 < roomy.tokens == count(roomy.text) <= 20_000
