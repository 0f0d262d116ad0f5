"""Reviewed entity merges, their undo, aliases and duplicate proposals (docs/entities.md, "Merges and
aliases"), through the gateway: what a merge changes for each reader, who may merge, every refusal,
and merges racing writes and each other."""

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from conftest import code_of
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

INVALID, NOT_FOUND, DENIED = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.PERMISSION_DENIED,
)
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
LINKED = m.ENTITY_RESOLUTION_OUTCOME_LINKED
SAME, ACCENTS, INITIALS = (
    m.ENTITY_DUPLICATE_REASON_SAME_NAME,
    m.ENTITY_DUPLICATE_REASON_ACCENTS,
    m.ENTITY_DUPLICATE_REASON_INITIALS,
)


def word() -> str:
    return "zq" + uuid.uuid4().hex[:10]


@pytest.fixture(scope="module")
def team(stack):
    ws = stack.workspace("entity merges")
    return {
        "ws": ws,
        "alice": stack.member(ws),
        "bob": stack.member(ws),
        "admin": stack.member(ws, role=m.ROLE_ADMIN),
        "stack": stack,
    }


def about(member, body, name, **kw) -> tuple[m.Memory, str]:
    """A memory about ``name`` and the entity it is about."""
    mem = member.remember(body, entities=[m.EntityMention(name=name)], **kw)
    return mem, mem.entity_resolutions[0].entity_id


def merge(member, entity_id, into_id, reason=""):
    req = g.MergeEntityRequest(entity_id=entity_id, into_id=into_id, reason=reason)
    return member.stack.memory.MergeEntity(req, metadata=member.md()).merge


def unmerge(member, entity_id):
    return member.stack.memory.UnmergeEntity(g.UnmergeEntityRequest(entity_id=entity_id), metadata=member.md()).merge


def find(member, name) -> list[g.Entity]:
    return list(member.stack.memory.FindEntities(g.FindEntitiesRequest(name=name), metadata=member.md()).entities)


def listed_about(member, entity_id) -> set[str]:
    req = g.ListMemoriesRequest(entity_id=entity_id, page_size=100)
    return {x.id for x in member.stack.memory.ListMemories(req, metadata=member.md()).memories}


def recalled_about(member, query, entity_id) -> set[str]:
    got = member.recall(query, entity_ids=[entity_id], mode=m.RECALL_MODE_LEXICAL, top_k=50)
    return {it.memory.id for it in got.items}


def test_a_merge_counts_the_merged_entitys_mentions_as_the_others_until_undone(team):
    alice = team["alice"]
    w = word()
    full, short = f"Jonas Berg {w}", f"Jonas {w}"
    a1, a = about(alice, f"{w} Jonas Berg plays cello", full)
    a2, _ = about(alice, f"{w} Jonas Berg moved to Oslo", full)
    b1, b = about(alice, f"{w} Jonas likes rye bread", short)
    assert a != b
    why = "the same person, spelled short"
    done = merge(alice, b, a, reason=why)
    assert (done.entity_id, done.into_id, done.merged_by, done.reason) == (b, a, alice.id, why)
    assert done.merged_at.seconds > 0 and not done.undone_by and not done.HasField("undone_at")
    # Found by its name or its alias, as one entity: A's name, B's as an alias, every mention counted.
    for name in (full, short, short.upper()):
        (ent,) = find(alice, name)
        assert (ent.id, ent.name, list(ent.aliases), ent.mentions) == (a, full, [short], 3)
        assert [(x.entity_id, x.reason) for x in ent.merges] == [(b, "the same person, spelled short")]
    # A filter by either entity reads the whole group, in recall and in listing.
    every = {a1.id, a2.id, b1.id}
    assert listed_about(alice, a) == every and listed_about(alice, b) == every
    assert recalled_about(alice, w, a) == every and recalled_about(alice, w, b) == every
    # A name that was B's still names B, which counts as A's: the group has one more memory.
    again = alice.remember(f"{w} Jonas again", entities=[m.EntityMention(name=short)])
    assert [(r.entity_id, r.outcome) for r in again.entity_resolutions] == [(b, LINKED)]
    assert find(alice, full)[0].mentions == 4 and listed_about(alice, a) == every | {again.id}
    # Undo: B is itself again, with its own mentions; nothing was rewritten.
    undone = unmerge(alice, b)
    assert (undone.entity_id, undone.into_id, undone.undone_by) == (b, a, alice.id) and undone.HasField("undone_at")
    assert [(e.id, list(e.aliases), e.mentions) for e in find(alice, short)] == [(b, [], 2)]
    assert listed_about(alice, a) == {a1.id, a2.id} and listed_about(alice, b) == {b1.id, again.id}
    # And it may be merged again.
    assert merge(alice, b, a).into_id == a


def test_who_may_merge_and_undo(team):
    alice, bob, admin = team["alice"], team["bob"], team["admin"]
    w = word()
    _, a = about(alice, f"{w} workspace note", f"Harbour {w}")
    _, b = about(alice, f"{w} other note", f"Harbor {w}")
    # Bob can read Alice's workspace memories about B but may not change them: only an admin may merge.
    assert code_of(merge, bob, b, a) == DENIED
    assert merge(admin, b, a).merged_by == admin.id
    # Bob did not merge and may not change Alice's memories: he may not undo; Alice (who may) can.
    assert code_of(unmerge, bob, b) == DENIED
    assert unmerge(alice, b).undone_by == alice.id
    # A member merges what only their own memories mention, into anything they can see.
    _, mine = about(bob, f"{w} bob's own", f"Harbour office {w}", audience=m.AUDIENCE_MEMBER)
    assert merge(bob, mine, a).into_id == a
    assert unmerge(bob, mine).entity_id == mine


def test_merge_and_undo_refuse_bad_input(team):
    alice, bob = team["alice"], team["bob"]
    w = word()
    _, a = about(alice, f"{w} a", f"Alpha {w}")
    _, b = about(alice, f"{w} b", f"Beta {w}")
    _, c = about(alice, f"{w} c", f"Gamma {w}")
    _, hidden = about(alice, f"{w} private", f"Delta {w}", audience=m.AUDIENCE_MEMBER)
    assert code_of(merge, alice, "not-a-uuid", a) == INVALID
    assert code_of(merge, alice, b, "") == INVALID
    assert code_of(merge, alice, a, a) == INVALID
    assert code_of(merge, alice, b, a, reason="x" * 1001) == INVALID
    assert code_of(merge, alice, b, a, reason="a\x00b") == INVALID
    assert code_of(unmerge, alice, "nope") == INVALID
    # An entity the caller cannot see answers as a missing one, on either side.
    assert code_of(merge, bob, hidden, a) == NOT_FOUND
    assert code_of(merge, bob, a, hidden) == NOT_FOUND
    assert code_of(merge, alice, str(uuid.uuid4()), a) == NOT_FOUND
    assert code_of(unmerge, bob, hidden) == NOT_FOUND
    assert code_of(unmerge, alice, a) == PRECONDITION  # not merged
    merge(alice, b, a)
    assert code_of(merge, alice, b, a) == PRECONDITION  # already one entity
    assert code_of(merge, alice, a, b) == PRECONDITION  # the other way round too
    # Merging into a merged entity, or merging one others are merged into, joins the groups.
    assert merge(alice, c, b).into_id == b
    (group,) = find(alice, f"Gamma {w}")
    assert (group.id, sorted(group.aliases), group.mentions) == (a, [f"Beta {w}", f"Gamma {w}"], 3)
    assert code_of(merge, alice, a, c) == PRECONDITION


def test_no_merge_shows_a_name_alias_count_or_record_the_reader_cannot_see(team):
    alice, bob = team["alice"], team["bob"]
    w = word()
    public, public_id = about(alice, f"{w} public note", f"Nova {w}")
    secret = f"Secret nickname {w}"
    _, hidden = about(bob, f"{w} private note", secret, audience=m.AUDIENCE_MEMBER)
    merge(bob, hidden, public_id, reason="my private nickname for Nova")
    # Bob sees the group whole; Alice only what she can read: no alias, no extra count, no record.
    (bobs,) = find(bob, f"Nova {w}")
    assert (list(bobs.aliases), bobs.mentions, len(bobs.merges)) == ([secret], 2, 1)
    (alices,) = find(alice, f"Nova {w}")
    assert (list(alices.aliases), alices.mentions, list(alices.merges)) == ([], 1, [])
    assert find(alice, secret) == []
    assert listed_about(alice, public_id) == {public.id}
    # Alice naming the secret name makes her own entity: the alias she cannot see resolves nothing.
    mine, created = about(alice, f"{w} alice names it", secret)
    assert created not in (hidden, public_id)
    # A group whose root the reader cannot see shows as its visible member, never the root.
    _, root = about(bob, f"{w} bob's private root", f"Root {w}", audience=m.AUDIENCE_MEMBER)
    _, shared = about(bob, f"{w} bob's workspace note", f"Leaf {w}")
    merge(bob, shared, root)
    (seen,) = find(alice, f"Leaf {w}")
    assert (seen.id, seen.name, list(seen.aliases), list(seen.merges)) == (shared, f"Leaf {w}", [], [])
    assert find(alice, f"Root {w}") == []
    again = alice.remember(f"{w} leaf again", entities=[m.EntityMention(name=f"Leaf {w}")])
    assert [(r.entity_id, r.outcome) for r in again.entity_resolutions] == [(shared, LINKED)]
    assert all(root not in (p.entity_a.id, p.entity_b.id) for p in duplicates(alice))


def duplicates(member, **kw) -> list[g.EntityDuplicate]:
    req = g.ListEntityDuplicatesRequest(**kw)
    return list(member.stack.memory.ListEntityDuplicates(req, metadata=member.md()).proposals)


def test_duplicate_proposals_are_listed_best_first_and_merge_nothing(team, stack):
    ws = stack.workspace("entity duplicates")
    alice, bob = stack.member(ws), stack.member(ws)
    ids = {}
    for name, who, audience in (
        ("Mara Lind", alice, m.AUDIENCE_MEMBER),
        ("mara  LIND", bob, m.AUDIENCE_WORKSPACE),
        ("Zoë Hart", alice, m.AUDIENCE_WORKSPACE),
        ("Zoe Hart", alice, m.AUDIENCE_WORKSPACE),
        ("J. Berg", alice, m.AUDIENCE_WORKSPACE),
        ("Jonas Berg", alice, m.AUDIENCE_WORKSPACE),
        ("John Berg", alice, m.AUDIENCE_WORKSPACE),
        ("Kai", alice, m.AUDIENCE_WORKSPACE),
        # Combining marks alone: nothing is left of either without accents, so no pair.
        ("\u0301", alice, m.AUDIENCE_WORKSPACE),
        ("\u0300", alice, m.AUDIENCE_WORKSPACE),
    ):
        ids[name] = about(who, f"a note about {name}", name, audience=audience)[1]
    about(alice, "Jonas Berg again", "Jonas Berg")  # more mentions: the natural one to merge into
    got = duplicates(alice)
    pairs = [({p.entity_a.name, p.entity_b.name}, p.reason, p.score) for p in got]
    assert pairs[:2] == [({"Mara Lind", "mara  LIND"}, SAME, 1.0), ({"Zoë Hart", "Zoe Hart"}, ACCENTS, 0.9)]
    assert sorted(map(sorted, (names for names, _, _ in pairs[2:]))) == [
        ["J. Berg", "John Berg"],
        ["J. Berg", "Jonas Berg"],
    ]
    assert all(reason == INITIALS and score == 0.6 for _, reason, score in pairs[2:])
    berg = next(p for p in got if {p.entity_a.name, p.entity_b.name} == {"J. Berg", "Jonas Berg"})
    assert (berg.entity_a.name, berg.entity_a.mentions, berg.entity_b.mentions) == ("Jonas Berg", 2, 1)
    # Bob cannot see Alice's private Mara: no pair of it, and nothing merged by listing.
    assert all("Mara Lind" not in (p.entity_a.name, p.entity_b.name) for p in duplicates(bob))
    assert len(find(alice, "Mara Lind")) == 2
    # Pages of one walk the whole list, once each; a token is bound to its member.
    first = alice.stack.memory.ListEntityDuplicates(g.ListEntityDuplicatesRequest(page_size=3), metadata=alice.md())
    assert first.total_size == 4 and len(first.proposals) == 3 and first.next_page_token
    rest = duplicates(alice, page_size=3, page_token=first.next_page_token)
    assert [p.entity_b.id for p in (*first.proposals, *rest)] == [p.entity_b.id for p in got]
    assert code_of(duplicates, bob, page_token=first.next_page_token) == INVALID
    assert code_of(duplicates, alice, page_token="garbage") == INVALID
    assert code_of(duplicates, alice, page_size=-1) == INVALID
    # Once merged, a pair is no longer proposed, nor a group against itself (two of its names share a form).
    merge(alice, ids["Zoe Hart"], ids["Zoë Hart"])
    merge(alice, ids["J. Berg"], ids["Jonas Berg"])
    after = duplicates(alice)
    assert all({p.entity_a.name, p.entity_b.name} != {"Zoë Hart", "Zoe Hart"} for p in after)
    assert all(p.entity_a.id != p.entity_b.id for p in after) and len(after) == 2, after


def test_merges_racing_writes_and_each_other_lose_nothing_and_never_chain(team):
    alice = team["alice"]
    w = word()
    _, a = about(alice, f"{w} first", f"Ravi {w}")
    _, b = about(alice, f"{w} second", f"Ravi K {w}")
    written: list[str] = []
    stop = threading.Event()

    def writer(name):
        while not stop.is_set():
            written.append(alice.remember(f"{w} racing note", entities=[m.EntityMention(name=name)]).id)

    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(writer, f"Ravi {w}"), pool.submit(writer, f"Ravi K {w}")]
        for _ in range(6):
            merge(alice, b, a)
            unmerge(alice, b)
        stop.set()
        for job in jobs:
            job.result()
    merge(alice, b, a)
    # Every write landed about the group, and counts once.
    assert written and listed_about(alice, a) >= set(written)
    (group,) = find(alice, f"Ravi {w}")
    assert group.mentions == len(written) + 2
    # Two merges of one pair, either way round, race: one wins, the other finds them one already.
    unmerge(alice, b)
    for _ in range(5):
        barrier = threading.Barrier(2)

        def race(args, barrier=barrier):
            barrier.wait()
            return code_of(merge, alice, *args)

        with ThreadPoolExecutor(2) as pool:
            codes = list(pool.map(race, [(b, a), (a, b)]))
        assert sorted(map(str, codes)) == sorted(map(str, [grpc.StatusCode.OK, PRECONDITION])), codes
        unmerge(alice, b if codes[0] == grpc.StatusCode.OK else a)


def test_a_merge_the_caller_cannot_see_neither_shows_nor_blocks_nor_leaks(team):
    """A merge joins two entities only for a reader who can see both: to anyone else it does not
    exist, in what they are shown, in what they are refused and in what they may do."""
    alice, bob, admin = team["alice"], team["bob"], team["admin"]
    w = word()
    _, leaf = about(alice, f"{w} leaf note", f"Leaf {w}")  # a workspace memory: everyone sees Leaf
    _, root = about(alice, f"{w} root note", f"Root {w}", audience=m.AUDIENCE_MEMBER)  # Alice's alone
    merge(alice, leaf, root, reason="alice's private reason")
    _, other = about(admin, f"{w} other note", f"Other {w}")
    _, never = about(admin, f"{w} never merged", f"Never {w}")
    # The admin may not undo what they cannot see; they are answered as for an entity never merged.
    assert code_of(unmerge, admin, leaf) == code_of(unmerge, admin, never) == PRECONDITION
    assert code_of(unmerge, bob, leaf) == code_of(unmerge, bob, never) == PRECONDITION
    # Nothing hidden blocks them: Leaf may be merged, and merged into, by what they see.
    done = merge(admin, leaf, other)
    assert (done.into_id, done.reason) == (other, "")
    (seen,) = find(admin, f"Other {w}")
    assert (seen.id, list(seen.aliases), [x.entity_id for x in seen.merges]) == (other, [f"Leaf {w}"], [leaf])
    # Alice sees both merges: one entity of three names, her root (merged into nothing) first.
    (hers,) = find(alice, f"Leaf {w}")
    assert (hers.id, sorted(hers.aliases), len(hers.merges)) == (root, [f"Leaf {w}", f"Other {w}"], 2)
    # Alice's private entity merged into one of Bob's does not stop Bob merging his own.
    _, b = about(bob, f"{w} bee", f"Bee {w}")
    _, c = about(bob, f"{w} cee", f"Cee {w}")
    _, p = about(alice, f"{w} pea", f"Pea {w}", audience=m.AUDIENCE_MEMBER)
    merge(alice, p, b, reason="my pea is bob's bee")
    assert merge(bob, b, c).into_id == c
    (bobs,) = find(bob, f"Bee {w}")
    assert (bobs.id, list(bobs.aliases), bobs.mentions, len(bobs.merges)) == (c, [f"Bee {w}"], 2, 1)


def test_a_filter_by_an_entity_the_reader_cannot_see_reads_nothing_after_a_merge(team):
    alice, bob, stack = team["alice"], team["bob"], team["stack"]
    w = word()
    once, x = about(alice, f"{w} once public", f"Xavier {w}")  # Bob saw x's id here
    about(alice, f"{w} private about x", f"Xavier {w}", audience=m.AUDIENCE_MEMBER)
    stack.memory.Forget(g.ForgetRequest(id=once.id, reason="gone"), metadata=alice.md())
    _, walter = about(alice, f"{w} workspace note about Walter", f"Walter {w}")
    merge(alice, x, walter)
    assert listed_about(bob, x) == set() and recalled_about(bob, w, x) == set()
    assert len(listed_about(alice, x)) == 2


def test_forgetting_what_made_an_entity_visible_leaves_its_group_free(team):
    alice, admin, stack = team["alice"], team["admin"], team["stack"]
    w = word()
    _, a = about(alice, f"{w} a", f"Aaa {w}")
    bm, b = about(alice, f"{w} b", f"Bbb {w}")
    _, c = about(alice, f"{w} c", f"Ccc {w}")
    merge(alice, b, a)
    stack.memory.Forget(g.ForgetRequest(id=bm.id, reason="gone"), metadata=alice.md())
    assert code_of(unmerge, alice, b) == NOT_FOUND  # nobody sees B any more
    (left,) = find(alice, f"Aaa {w}")
    assert (list(left.aliases), left.mentions, list(left.merges)) == ([], 1, [])
    assert merge(admin, a, c).into_id == c


def test_the_context_bundle_answers_while_merges_and_forgets_race_it(team, stack):
    ws = stack.workspace("entity merge races")
    stack.admin.UpdateWorkspaceSettings(
        g.UpdateWorkspaceSettingsRequest(workspace_id=ws, context_bundle=True), metadata=stack.op()
    )
    alice = stack.member(ws)
    _, a = about(alice, "a note about Ann", "Ann")
    _, b = about(alice, "a note about Anna", "Anna")
    stop = threading.Event()
    codes: list = []

    def bundle():
        while not stop.is_set():
            req = g.GetContextRequest(purpose=m.PURPOSE_CONVERSATION)
            codes.append(code_of(stack.memory.GetContext, req, metadata=alice.md()))

    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(bundle), pool.submit(bundle)]
        for i in range(15):
            merge(alice, b, a)
            unmerge(alice, b)
            gone, _ = about(alice, f"a passing note {i}", f"Passing {i}")
            stack.memory.Forget(g.ForgetRequest(id=gone.id, reason="gone"), metadata=alice.md())
        stop.set()
        for job in jobs:
            job.result()
    assert codes and set(codes) == {grpc.StatusCode.OK}


def test_a_write_by_name_links_the_entity_of_that_name_never_a_private_alias(team):
    alice, bob = team["alice"], team["bob"]
    w = word()
    _, nova = about(bob, f"{w} Nova leads the team", f"Nova {w}")
    _, nick = about(bob, f"{w} my note", f"Sparkles {w}", audience=m.AUDIENCE_MEMBER)
    merge(bob, nova, nick, reason="Sparkles is my secret nickname for Nova")
    mem = bob.remember(f"{w} Nova shipped", entities=[m.EntityMention(name=f"Nova {w}")])
    assert [(r.entity_id, r.outcome) for r in mem.entity_resolutions] == [(nova, LINKED)]
    read = alice.read(mem.id)
    assert [link.target_entity_name for link in read.links] == [f"Nova {w}"]
    (seen,) = find(alice, f"Nova {w}")
    assert (seen.name, list(seen.aliases), list(seen.merges)) == (f"Nova {w}", [], [])
    # Of two entities of one name, a workspace memory takes the one workspace memories mention,
    # however many private mentions the other has; a member-only memory the most mentioned.
    kim = f"Kim {w}"
    _, private = about(bob, f"{w} kim 1", kim, audience=m.AUDIENCE_MEMBER)
    for i in range(2):
        bob.remember(f"{w} kim {i + 2}", audience=m.AUDIENCE_MEMBER, entities=[m.EntityMention(entity_id=private)])
    _, shared = about(alice, f"{w} kim at work", kim)
    wide = bob.remember(f"{w} kim for all", entities=[m.EntityMention(name=kim)])
    assert [(r.entity_id, list(r.other_entity_ids)) for r in wide.entity_resolutions] == [(shared, [private])]
    narrow = bob.remember(f"{w} kim for me", audience=m.AUDIENCE_MEMBER, entities=[m.EntityMention(name=kim)])
    assert [(r.entity_id, list(r.other_entity_ids)) for r in narrow.entity_resolutions] == [(private, [shared])]


def test_merges_take_turns_so_two_joining_the_same_groups_do_not_both_succeed(team, stack):
    alice = team["alice"]
    w = word()
    (_, a), (_, b), (_, c), (_, d) = (about(alice, f"{w} {x}", f"{x} {w}") for x in ("Aa", "Bb", "Cc", "Dd"))
    merge(alice, b, a)
    merge(alice, d, c)
    with stack.db(team["ws"]) as conn:
        conn.execute("BEGIN")
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (0x656E7469,))  # the merge lock (entity_review)
        with ThreadPoolExecutor(2) as pool:
            jobs = [pool.submit(code_of, merge, alice, b, c), pool.submit(code_of, merge, alice, d, a)]
            time.sleep(1.0)  # both wait on the lock
            conn.execute("COMMIT")
            codes = sorted(str(job.result()) for job in jobs)
    assert codes == sorted(map(str, [grpc.StatusCode.OK, PRECONDITION])), codes


def test_a_name_form_many_share_proposes_a_bounded_list(team, stack):
    ws = stack.workspace("entity duplicates at scale")
    alice = stack.member(ws)
    letters = "aáàâäãåā"
    names = sorted({"Tag " + "".join(letters[(i >> (3 * k)) % 8] for k in range(4)) for i in range(200)})[:60]
    reqs = [
        g.RememberRequest(
            purpose=m.PURPOSE_CONVERSATION,
            audience=m.AUDIENCE_WORKSPACE,
            body=f"about {n}",
            entities=[m.EntityMention(name=n)],
        )
        for n in names
    ]
    stack.memory.RememberBatch(g.RememberBatchRequest(requests=reqs), metadata=alice.md())
    resp = stack.memory.ListEntityDuplicates(g.ListEntityDuplicatesRequest(page_size=10), metadata=alice.md())
    assert resp.total_size == 50 * 49 // 2  # the 50 most mentioned of the one accent-free form
    assert all(p.reason == ACCENTS for p in resp.proposals)
