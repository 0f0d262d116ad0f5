"""Entity pages (GetEntity, docs/entities.md, "Entity pages") through the gateway: attributes and
relations with the memories that state them, current or as of a day, the timeline a page at a time,
aliases after a merge, only what the caller can read, and bad input."""

import datetime
import uuid

import grpc
import pytest
from conftest import code_of
from google.protobuf import timestamp_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

INVALID, NOT_FOUND = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND


def word() -> str:
    return "zq" + uuid.uuid4().hex[:10]


def ts(text: str) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(datetime.datetime.fromisoformat(text))
    return out


@pytest.fixture(scope="module")
def team(stack):
    ws = stack.workspace("entity pages")
    return {"alice": stack.member(ws), "bob": stack.member(ws), "stack": stack}


def page(member, entity: str, **kw) -> g.GetEntityResponse:
    return member.stack.memory.GetEntity(g.GetEntityRequest(entity=entity, **kw), metadata=member.md())


def name(text: str) -> m.EntityMention:
    return m.EntityMention(name=text)


def test_a_page_shows_attributes_and_relations_with_their_memories_now_and_as_of_a_day(team):
    alice, stack = team["alice"], team["stack"]
    w = word()
    maria, nutrifax, arowyn = f"Maria {w}", f"Nutrifax {w}", f"Arowyn {w}"
    grade8 = alice.remember(
        f"{w} Maria is in grade 8.",
        attributes=[m.EntityAttribute(subject=name(maria), key="grade", value="8")],
        valid_from=ts("2025-09-01T00:00:00+00:00"),
    )
    works = alice.remember(
        f"{w} Maria works at Nutrifax.",
        relations=[m.EntityRelation(subject=name(maria), predicate="works_at", object=name(nutrifax))],
        valid_from=ts("2025-01-01T00:00:00+00:00"),
    )
    sister = alice.remember(
        f"{w} Arowyn is Maria's sister.",
        relations=[m.EntityRelation(subject=name(arowyn), predicate="sister_of", object=name(maria))],
    )
    grade9 = stack.memory.Supersede(
        g.SupersedeRequest(
            id=grade8.id,
            expected_revision=1,
            body=f"{w} Maria is in grade 9.",
            attributes=[m.EntityAttribute(subject=name(maria), key="grade", value="9")],
            valid_from=ts("2026-09-01T00:00:00+00:00"),
        ),
        metadata=alice.md(),
    ).memory
    now = page(alice, maria)
    maria_id = works.relations[0].subject_id
    assert (now.entity.id, now.entity.name, now.entity.mentions) == (maria_id, maria, 4)
    assert [(a.key, a.value, a.memory_id) for a in now.attributes] == [("grade", "9", grade9.id)]
    assert now.attributes[0].created_by == alice.id
    assert [(r.predicate, r.entity_name, r.memory_id) for r in now.relations_out] == [("works_at", nutrifax, works.id)]
    assert [(r.predicate, r.entity_name, r.memory_id) for r in now.relations_in] == [("sister_of", arowyn, sister.id)]
    # The timeline: every readable memory about her, the superseded one too, the latest said first
    # (when it happened, else when it was written; not when its claim became true).
    assert [x.id for x in now.timeline] == [grade9.id, sister.id, works.id, grade8.id]
    assert now.timeline_size == 4 and not now.next_page_token
    # As of a day in between, the grade the memory valid then stated; by id, the same page.
    then = page(alice, maria_id, as_of=ts("2026-01-01T00:00:00+00:00"))
    assert [(a.key, a.value, a.memory_id) for a in then.attributes] == [("grade", "8", grade8.id)]
    assert [r.memory_id for r in then.relations_out] == [works.id]
    before = page(alice, maria_id, as_of=ts("2024-01-01T00:00:00+00:00"))
    assert list(before.attributes) == [] and list(before.relations_out) == []
    # Invalidate ends what it stated; a forget erases it.
    stack.memory.Invalidate(
        g.InvalidateRequest(id=works.id, expected_revision=1, reason="she left"), metadata=alice.md()
    )
    assert list(page(alice, maria).relations_out) == []
    stack.memory.Forget(g.ForgetRequest(id=grade9.id, reason="asked"), metadata=alice.md())
    after = page(alice, maria)
    assert [(a.key, a.value) for a in after.attributes] == [("grade", "8")]  # put back: current again
    assert grade9.id not in [x.id for x in after.timeline]


def test_a_page_is_built_only_from_what_the_reader_can_read_and_follows_merges(team):
    alice, bob, stack = team["alice"], team["bob"], team["stack"]
    w = word()
    tove = f"Tove {w}"
    public = alice.remember(f"{w} Tove runs the bakery.", entities=[name(tove)])
    tove_id = public.entity_resolutions[0].entity_id
    private = alice.remember(
        f"{w} private",
        audience=m.AUDIENCE_MEMBER,
        attributes=[m.EntityAttribute(subject=m.EntityMention(entity_id=tove_id), key="pin", value="5127")],
        relations=[
            m.EntityRelation(subject=m.EntityMention(entity_id=tove_id), predicate="dates", object=name(f"Secret {w}"))
        ],
    )
    mine = page(alice, tove_id)
    assert (mine.entity.mentions, [a.value for a in mine.attributes], len(mine.relations_out)) == (2, ["5127"], 1)
    theirs = page(bob, tove)
    assert (theirs.entity.mentions, list(theirs.attributes), list(theirs.relations_out)) == (1, [], [])
    assert [x.id for x in theirs.timeline] == [public.id] and theirs.timeline_size == 1
    assert code_of(page, bob, f"Secret {w}") == NOT_FOUND
    assert private.id not in str(theirs)
    # After Alice merges her nickname entity into Tove, her page shows it as an alias and counts it.
    nick = alice.remember(f"{w} nick", entities=[name(f"Tova {w}")])
    nick_id = nick.entity_resolutions[0].entity_id
    stack.memory.MergeEntity(g.MergeEntityRequest(entity_id=nick_id, into_id=tove_id), metadata=alice.md())
    merged = page(alice, nick_id)
    assert (merged.entity.id, list(merged.entity.aliases), merged.entity.mentions) == (tove_id, [f"Tova {w}"], 3)
    assert nick.id in [x.id for x in merged.timeline]
    # Undone, the merge stays on the page's record: who merged, who undid, when.
    stack.memory.UnmergeEntity(g.UnmergeEntityRequest(entity_id=nick_id), metadata=alice.md())
    after = page(alice, tove_id)
    assert [(x.entity_id, x.into_id, x.undone_by) for x in after.undone_merges] == [(nick_id, tove_id, alice.id)]
    theirs = page(bob, tove).undone_merges  # bob sees both entities (workspace memories): the record too
    assert [(x.entity_id, x.into_id) for x in theirs] == [(nick_id, tove_id)]
    # Two groups of one name: the most mentioned, the other listed.
    other = bob.remember(f"{w} bob's own", audience=m.AUDIENCE_MEMBER, entities=[name(f"Twin {w}")])
    alice.remember(f"{w} alice's", entities=[name(f"Twin {w}")])
    alice.remember(f"{w} alice's again", entities=[name(f"Twin {w}")])
    bob_page = page(bob, f"Twin {w}")
    assert len(bob_page.other_entity_ids) == 1 and bob_page.entity.mentions == 2
    assert bob_page.other_entity_ids[0] == other.entity_resolutions[0].entity_id


def test_the_timeline_goes_a_page_at_a_time_and_bad_input_is_refused(team):
    alice, bob = team["alice"], team["bob"]
    w = word()
    ids = [alice.remember(f"{w} note {i}", entities=[name(f"Pager {w}")]).id for i in range(5)]
    seen, token = [], ""
    for _ in range(3):
        got = page(alice, f"Pager {w}", page_size=2, page_token=token)
        seen += [x.id for x in got.timeline]
        token = got.next_page_token
    assert seen == ids[::-1] and not token
    first = page(alice, f"Pager {w}", page_size=2)
    for bad, code in (
        (dict(entity=""), INVALID),
        (dict(entity="x" * 201), INVALID),
        (dict(entity="a\x00b"), INVALID),
        (dict(entity=f"Nobody {w}"), NOT_FOUND),
        (dict(entity=str(uuid.uuid4())), NOT_FOUND),
        (dict(entity=f"Pager {w}", page_size=-1), INVALID),
        (dict(entity=f"Pager {w}", page_token="garbage"), INVALID),
        (dict(entity=f"Pager {w}", as_of=ts("2300-01-01T00:00:00+00:00")), INVALID),
        (dict(entity=f"Pager {w}", known_at=timestamp_pb2.Timestamp(seconds=-(10**12))), INVALID),
    ):
        assert (
            code_of(lambda b=bad: alice.stack.memory.GetEntity(g.GetEntityRequest(**b), metadata=alice.md())) == code
        ), bad
    # A token is bound to its member and its entity.
    token = first.next_page_token
    assert code_of(page, bob, f"Pager {w}", page_token=token) == INVALID
    other = alice.remember(f"{w} x", entities=[name(f"Other {w}")])
    assert code_of(page, alice, other.entity_resolutions[0].entity_id, page_token=token) == INVALID


def test_a_page_shows_the_newest_claims_and_counts_the_older_ones(team):
    alice = team["alice"]
    w = word()
    kari = f"Kari {w}"
    said = [
        alice.remember(
            f"{w} mood {i}", attributes=[m.EntityAttribute(subject=name(kari), key="mood", value=f"mood {i}")]
        )
        for i in range(7)
    ]
    works = [
        alice.remember(
            f"{w} works {i}",
            relations=[m.EntityRelation(subject=name(kari), predicate="works_at", object=name(f"Acme {w}"))],
        )
        for i in range(2)
    ]
    got = page(alice, kari)
    assert [a.memory_id for a in got.attributes] == [x.id for x in said[::-1][:5]]  # the newest five of the key
    assert [(r.entity_name, r.memory_id) for r in got.relations_out] == [(f"Acme {w}", works[1].id)]
    assert got.claims_left_out == 2 + 1 and got.timeline_size == 9


def test_a_token_survives_a_merge_and_a_name_that_looks_like_an_id_is_found(team):
    alice, stack = team["alice"], team["stack"]
    w = word()
    ids = [alice.remember(f"{w} ann {i}", entities=[name(f"Ann {w}")]).id for i in range(3)]
    anne = alice.remember(f"{w} anne", entities=[name(f"Anne {w}")])
    first = page(alice, f"Ann {w}", page_size=2)
    ann_id = first.entity.id
    stack.memory.MergeEntity(
        g.MergeEntityRequest(entity_id=ann_id, into_id=anne.entity_resolutions[0].entity_id), metadata=alice.md()
    )
    rest = page(alice, f"Ann {w}", page_size=2, page_token=first.next_page_token)
    # The walk goes on from where it was in the group's timeline (Anne's newer memory is behind it).
    assert [x.id for x in first.timeline] == ids[::-1][:2] and [x.id for x in rest.timeline] == [ids[0]]
    assert rest.entity.mentions == 4
    # An entity may be named like an id: asked by that name, it is found by name.
    odd = str(uuid.uuid4())
    named_odd = alice.remember(f"{w} odd", entities=[name(odd)])
    assert page(alice, odd).entity.id == named_odd.entity_resolutions[0].entity_id
