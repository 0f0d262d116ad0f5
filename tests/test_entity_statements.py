"""Relations and attributes stated by memories (docs/entities.md, "Relations and attributes"),
through the gateway: written with Remember, RememberBatch, Derive and Supersede, shown on every read,
refused part by part when malformed, never shown to a reader of nothing that states them, ended by a
supersede and erased by a forget."""

import uuid

import grpc
import pytest
from conftest import code_of
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import error_info

INVALID, NOT_FOUND = grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND


def word() -> str:
    return "zq" + uuid.uuid4().hex[:10]


@pytest.fixture(scope="module")
def team(stack):
    ws = stack.workspace("entity statements")
    return {"ws": ws, "alice": stack.member(ws), "bob": stack.member(ws), "stack": stack}


def name(text: str) -> m.EntityMention:
    return m.EntityMention(name=text)


def rel(subject: str, predicate: str, obj: str) -> m.EntityRelation:
    return m.EntityRelation(subject=name(subject), predicate=predicate, object=name(obj))


def att(subject: str, key: str, value: str) -> m.EntityAttribute:
    return m.EntityAttribute(subject=name(subject), key=key, value=value)


def stated(mem: m.Memory) -> tuple[list, list]:
    return (
        [(r.subject_name, r.predicate, r.object_name) for r in mem.relations],
        [(a.subject_name, a.key, a.value) for a in mem.attributes],
    )


def about_names(mem: m.Memory) -> set[str]:
    return {link.target_entity_name for link in mem.links if link.type == m.LINK_TYPE_ABOUT}


def test_a_memory_states_relations_and_attributes_that_every_read_shows(team):
    alice, stack = team["alice"], team["stack"]
    w = word()
    maria, nutrifax = f"Maria {w}", f"Nutrifax {w}"
    mem = alice.remember(
        f"{w} Maria works at Nutrifax and is in grade 9.",
        entities=[name(maria)],
        relations=[rel(maria, "works_at", nutrifax)],
        attributes=[att(maria, "grade", "9"), att(maria, "school", "Crawford Bay School")],
    )
    want = ([(maria, "works_at", nutrifax)], [(maria, "grade", "9"), (maria, "school", "Crawford Bay School")])
    assert stated(mem) == want
    # Its entities are ones the memory is about: one Maria (named twice, resolved once), and Nutrifax.
    assert about_names(mem) == {maria, nutrifax}
    assert mem.relations[0].subject_id == mem.attributes[0].subject_id
    assert [(r.name, r.outcome) for r in mem.entity_resolutions][:2] == [
        (maria, m.ENTITY_RESOLUTION_OUTCOME_CREATED),
        (maria, m.ENTITY_RESOLUTION_OUTCOME_LINKED),
    ]
    assert stated(alice.read(mem.id)) == want
    listed = stack.memory.ListMemories(g.ListMemoriesRequest(page_size=100), metadata=alice.md()).memories
    assert stated(next(x for x in listed if x.id == mem.id)) == want
    recalled = alice.recall(w, mode=m.RECALL_MODE_LEXICAL).items
    assert stated(next(it.memory for it in recalled if it.memory.id == mem.id)) == want
    # A later write names the same entities: they resolve to the ones the relation made.
    again = alice.remember(f"{w} again", relations=[rel(maria, "sister_of", f"Arowyn {w}")])
    assert again.relations[0].subject_id == mem.relations[0].subject_id


def test_derive_batch_and_supersede_state_them_and_a_supersede_ends_them(team):
    alice, stack = team["alice"], team["stack"]
    w = word()
    first = alice.remember(f"{w} Maria works at Nutrifax", relations=[rel(f"Maria {w}", "works_at", "Nutrifax")])
    derived = stack.memory.Derive(
        g.DeriveRequest(
            source_ids=[first.id], body=f"{w} summary", relations=[rel(f"Maria {w}", "employed_by", "Nutrifax")]
        ),
        metadata=alice.md(),
    ).memory
    assert stated(derived)[0] == [(f"Maria {w}", "employed_by", "Nutrifax")]
    batch = stack.memory.RememberBatch(
        g.RememberBatchRequest(
            requests=[
                g.RememberRequest(
                    purpose=m.PURPOSE_CONVERSATION,
                    audience=m.AUDIENCE_WORKSPACE,
                    body=f"{w} batch {i}",
                    attributes=[att(f"Maria {w}", "age", str(30 + i))],
                )
                for i in range(2)
            ]
        ),
        metadata=alice.md(),
    ).results
    assert [stated(r.memory)[1] for r in batch] == [[(f"Maria {w}", "age", "30")], [(f"Maria {w}", "age", "31")]]
    newer = stack.memory.Supersede(
        g.SupersedeRequest(
            id=first.id,
            expected_revision=1,
            kind=m.KIND_FACT,
            body=f"{w} Maria now works at Acme",
            relations=[rel(f"Maria {w}", "works_at", "Acme")],
        ),
        metadata=alice.md(),
    ).memory
    assert stated(newer)[0] == [(f"Maria {w}", "works_at", "Acme")]
    # The superseded memory keeps what it stated, as history: it is no longer current, nor is its relation.
    old = alice.read(first.id)
    assert old.superseded_by_id == newer.id and stated(old)[0] == [(f"Maria {w}", "works_at", "Nutrifax")]
    maria = newer.relations[0].subject_id
    current = stack.memory.ListMemories(g.ListMemoriesRequest(entity_id=maria, page_size=100), metadata=alice.md())
    assert {x.id for x in current.memories} == {newer.id, derived.id, *(r.memory.id for r in batch)}
    assert [r.predicate for x in current.memories for r in x.relations if r.object_name == "Nutrifax"] == [
        "employed_by"
    ]


def test_a_retry_answers_the_first_write_and_other_statements_are_another_request(team):
    alice = team["alice"]
    rid = f"rid-{uuid.uuid4().hex}"
    w = word()
    first = alice.remember(f"{w} x", relations=[rel("Ola", "knows", "Kari")], request_id=rid)
    again = alice.remember(f"{w} x", relations=[rel("Ola", "knows", "Kari")], request_id=rid)
    assert again.id == first.id and stated(again) == stated(first)
    assert code_of(alice.remember, f"{w} x", relations=[rel("Ola", "likes", "Kari")], request_id=rid) == (
        grpc.StatusCode.ALREADY_EXISTS
    )


@pytest.mark.parametrize(
    ("relations", "attributes", "field"),
    [
        ([rel("A", "WorksAt", "B")], [], "relations[0].predicate"),
        ([rel("A", "works at", "B")], [], "relations[0].predicate"),
        ([rel("A", "", "B")], [], "relations[0].predicate"),
        ([rel("A", "1st_of", "B")], [], "relations[0].predicate"),
        ([rel("A", "works__at", "B")], [], "relations[0].predicate"),
        ([rel("A", "x" * 65, "B")], [], "relations[0].predicate"),
        ([rel("A", "knows", "B"), rel("A", "knows_", "B")], [], "relations[1].predicate"),
        ([m.EntityRelation(subject=name("A"), predicate="knows")], [], "relations[0].object"),
        ([rel(" ", "knows", "B")], [], "relations[0].subject"),
        ([rel("A", "knows", "\u200b")], [], "relations[0].object"),
        ([rel("A", "knows", "x" * 201)], [], "relations[0].object"),
        ([rel("A", "knows", "B")] * 21, [], "relations"),
        ([], [att("A", "Grade", "9")], "attributes[0].key"),
        ([], [att("A", "grade", "")], "attributes[0].value"),
        ([], [att("A", "grade", " \u2060 ")], "attributes[0].value"),
        ([], [att("A", "grade", "x" * 1001)], "attributes[0].value"),
        ([], [att("A", "grade", "a\x00b")], "attributes[0].value"),
        ([], [m.EntityAttribute(key="grade", value="9")], "attributes[0].subject"),
        ([], [att("A", "grade", "9")] * 21, "attributes"),
    ],
)
def test_malformed_statements_are_invalid_naming_the_part_and_write_nothing(team, relations, attributes, field):
    alice = team["alice"]
    w = word()
    with pytest.raises(grpc.RpcError) as err:
        alice.remember(f"{w} bad", relations=relations, attributes=attributes)
    assert err.value.code() == INVALID and error_info(err.value).metadata["field"] == field, err.value.details()
    assert alice.recall(w, mode=m.RECALL_MODE_LEXICAL).items == []


def test_an_entity_id_the_writer_cannot_see_is_not_found_in_a_statement(team):
    alice, bob = team["alice"], team["bob"]
    hidden = alice.remember("private", audience=m.AUDIENCE_MEMBER, entities=[name(f"Hidden {word()}")])
    (secret,) = [link.target_entity_id for link in hidden.links]
    for bad in (secret, "not-a-uuid", str(uuid.uuid4())):
        relation = m.EntityRelation(subject=name("Bob"), predicate="knows", object=m.EntityMention(entity_id=bad))
        assert code_of(bob.remember, "x", relations=[relation]) == NOT_FOUND
        attribute = m.EntityAttribute(subject=m.EntityMention(entity_id=bad), key="age", value="3")
        assert code_of(bob.remember, "x", attributes=[attribute]) == NOT_FOUND


def test_only_a_reader_of_the_memory_sees_what_it_states_and_a_forget_erases_it(team):
    alice, bob, stack = team["alice"], team["bob"], team["stack"]
    w = word()
    private = alice.remember(
        f"{w} private",
        audience=m.AUDIENCE_MEMBER,
        relations=[rel(f"Tove {w}", "dates", f"Secret {w}")],
        attributes=[att(f"Tove {w}", "pin", "5127")],
    )
    assert code_of(bob.read, private.id) == NOT_FOUND
    found = stack.memory.FindEntities(g.FindEntitiesRequest(name=f"Secret {w}"), metadata=bob.md()).entities
    assert list(found) == []
    bobs = bob.recall(w, mode=m.RECALL_MODE_LEXICAL).items
    assert bobs == []
    stack.memory.Forget(g.ForgetRequest(id=private.id, reason="asked"), metadata=alice.md())
    with stack.db(team["ws"]) as conn:
        for table in ("entity_relation", "entity_attribute"):
            left = conn.execute(f"SELECT count(*) FROM {table} WHERE memory_id = %s", (uuid.UUID(private.id),))
            assert left.fetchone()[0] == 0, table


def test_an_imported_entity_is_found_by_its_name(team):
    alice, stack = team["alice"], team["stack"]
    w = word()
    resp = stack.admin.ImportMemories(
        g.ImportMemoriesRequest(
            workspace_id=team["ws"],
            entities=[m.ImportedEntity(import_key=f"e:{w}", name=f"Imported {w}")],
            memories=[
                m.ImportedMemory(
                    import_key=f"m:{w}",
                    author_member_id=alice.id,
                    body=f"{w} imported",
                    purpose=m.PURPOSE_CONVERSATION,
                    audience=m.AUDIENCE_WORKSPACE,
                    entity_keys=[f"e:{w}"],
                )
            ],
        ),
        metadata=stack.op(),
    )
    (found,) = stack.memory.FindEntities(g.FindEntitiesRequest(name=f"imported {w}"), metadata=alice.md()).entities
    assert found.id == resp.entities[0].id
    again = alice.remember(f"{w} again", entities=[name(f"Imported {w}")])
    assert again.entity_resolutions[0].entity_id == found.id
