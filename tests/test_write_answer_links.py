"""A write's answer carries the links it just wrote: Remember, each RememberBatch entry and Derive
answer with the memory as Read shows it (about and derived_from links), and a retry under the same
request_id answers exactly what the first call answered (README.md, "Retries and request ids": the
answer is the first result)."""

import uuid

from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

CONV = m.PURPOSE_CONVERSATION


def _links(memory: m.Memory) -> list:
    return sorted((ln.type, ln.target_entity_id, ln.target_entity_name, ln.target_memory_id) for ln in memory.links)


def test_remember_answer_has_its_about_links_and_equals_the_retry(stack):
    ws = stack.workspace("write answer links")
    alice = stack.member(ws)
    name = f"Maria {uuid.uuid4().hex[:6]}"
    req = g.RememberRequest(
        purpose=CONV,
        body="Maria keeps a parrot.",
        audience=m.AUDIENCE_WORKSPACE,
        entities=[m.EntityMention(name=name)],
        request_id=f"rid-{uuid.uuid4().hex}",
    )
    first = stack.memory.Remember(req, metadata=alice.md()).memory
    retry = stack.memory.Remember(req, metadata=alice.md()).memory
    read = alice.read(first.id)
    assert [ln.target_entity_name for ln in read.links] == [name]
    assert _links(first) == _links(read)
    assert retry == first


def test_remember_batch_entries_answer_with_their_links(stack):
    ws = stack.workspace("write answer links, batch")
    alice = stack.member(ws)
    reqs = [
        g.RememberRequest(
            purpose=CONV,
            body=f"entry {i} about Ana",
            audience=m.AUDIENCE_WORKSPACE,
            entities=[m.EntityMention(name="Ana")],
            request_id=f"rid-batch-{uuid.uuid4().hex}",
        )
        for i in range(3)
    ]
    first = stack.memory.RememberBatch(g.RememberBatchRequest(requests=reqs), metadata=alice.md()).results
    retry = stack.memory.RememberBatch(g.RememberBatchRequest(requests=reqs), metadata=alice.md()).results
    for a, b in zip(first, retry, strict=True):
        assert _links(a.memory) == _links(alice.read(a.memory.id)) and len(a.memory.links) == 1
        assert a.memory == b.memory


def test_derive_answer_has_its_derived_from_link(stack):
    ws = stack.workspace("write answer links, derive")
    alice = stack.member(ws)
    source = alice.remember("The meeting moved to Tuesday.")
    derived = stack.memory.Derive(
        g.DeriveRequest(source_ids=[source.id], body="Meetings are on Tuesdays now."),
        metadata=alice.md(),
    ).memory
    assert [ln.target_memory_id for ln in derived.links if ln.type == m.LINK_TYPE_DERIVED_FROM] == [source.id]
    assert _links(derived) == _links(alice.read(derived.id))
