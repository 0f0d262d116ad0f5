"""The embedding job embeds identical texts once: a memory whose exact embed input already has a
vector at the current stamp gets a copy of it (written under the same rules as a computed vector),
and every vector records the sha256 of its input."""

import time
import uuid

import numpy as np
import pytest
from prometheus_client import REGISTRY
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.embedding_input import INPUT_VERSION, compose
from store_service.embedding.job import input_sha256


@pytest.fixture(scope="module")
def team(stack):
    ws = stack.workspace("embedding reuse")
    return {"ws": ws, "alice": stack.member(ws), "bob": stack.member(ws), "stack": stack}


def vectors(stack, ws, ids):
    """memory id -> (revision, input_sha256, vector) of the stored vectors."""
    with stack.db(ws) as conn:
        return {
            str(r[0]): (r[1], bytes(r[2]) if r[2] is not None else None, r[3].to_numpy())
            for r in conn.execute(
                "SELECT memory_id, memory_revision, input_sha256, embedding FROM memory_embedding "
                "WHERE memory_id = ANY(%s::uuid[])",
                (list(ids),),
            )
        }


def reused() -> float:
    """Vectors the embedding job has written as copies, from the registry /metrics serves."""
    return REGISTRY.get_sample_value("recallatron_embedding_vectors_reused_total")


def test_identical_text_gets_a_copy_that_outlives_the_original(team, encoder):
    alice, bob, stack, ws = team["alice"], team["bob"], team["stack"], team["ws"]
    title, body = "Parking", f"The delivery van is parked at gate {uuid.uuid4().hex[:6]}."
    original = alice.remember(body, title=title)
    stack.wait_backlog_empty()
    before = reused()
    twin = bob.remember(body, title=title, audience=m.AUDIENCE_MEMBER)  # another member, another audience
    stack.wait_backlog_empty()
    assert reused() - before == 1  # the twin's vector, and nothing else was being embedded
    got = vectors(stack, ws, [original.id, twin.id])
    assert got[original.id][1] == got[twin.id][1] == input_sha256(title, body)
    assert np.array_equal(got[original.id][2], got[twin.id][2])
    assert float(np.dot(got[twin.id][2], encoder.encode([compose(title, body)])[0])) > 0.9999
    original_vec = got[original.id][2]
    alice.stack.memory.Forget(g.ForgetRequest(id=original.id, reason="asked"), metadata=alice.md())
    stack.wait_backlog_empty()
    got = vectors(stack, ws, [original.id, twin.id])
    assert original.id not in got  # no vector survives a forget, but the copy is the twin's own
    assert np.array_equal(got[twin.id][2], original_vec)
    assert bob.recall(body, mode=m.RECALL_MODE_DENSE).items[0].memory.id == twin.id


def test_duplicates_in_one_batch_are_embedded_once(team):
    alice, stack, ws = team["alice"], team["stack"], team["ws"]
    body = f"Batch twin {uuid.uuid4().hex[:8]}: the boiler needs a service in March."
    reqs = [
        g.RememberRequest(
            purpose=m.PURPOSE_CONVERSATION,
            kind=m.KIND_NOTE,
            body=body,
            audience=m.AUDIENCE_WORKSPACE,
            request_id=f"twin-{uuid.uuid4()}",
        )
        for _ in range(4)
    ]
    results = stack.memory.RememberBatch(g.RememberBatchRequest(requests=reqs), metadata=alice.md()).results
    ids = [r.memory.id for r in results]
    stack.wait_backlog_empty()
    got = vectors(stack, ws, ids)
    assert len(got) == 4 and len({got[i][1] for i in ids}) == 1
    assert all(np.array_equal(got[ids[0]][2], got[i][2]) for i in ids)


def test_a_corrected_text_is_never_served_the_old_texts_vector(team, encoder):
    """Twins of an embedded text, corrected at varying moments relative to the worker: each ends
    with the vector of its corrected text and that text's hash; the original keeps its own."""
    alice, stack, ws = team["alice"], team["stack"], team["ws"]
    tag = uuid.uuid4().hex[:6]
    old = f"Glacier {tag}: the ice shelf lost a third of its area."
    original = alice.remember(old)
    stack.wait_backlog_empty()
    twins = []
    for i in range(6):
        mem = alice.remember(old)
        time.sleep(0.05 * i)  # vary the interleaving with the worker
        new = f"Bakery {tag} {i}: the shop on Elm Street sells rye bread."
        stack.memory.Correct(g.CorrectRequest(id=mem.id, expected_revision=1, body=new), metadata=alice.md())
        twins.append((mem.id, new))
    stack.wait_backlog_empty()
    got = vectors(stack, ws, [original.id] + [t[0] for t in twins])
    old_vec = got[original.id][2]
    assert got[original.id][1] == input_sha256("", old)
    for mid, new in twins:
        rev, h, vec = got[mid]
        assert rev == 2 and h == input_sha256("", new)
        assert float(np.dot(vec, encoder.encode([new])[0])) > 0.999
        assert float(np.dot(vec, old_vec)) < 0.9
    # A correction back to the original text is served the original's vector (same input, same stamp).
    mid, _ = twins[0]
    stack.memory.Correct(g.CorrectRequest(id=mid, expected_revision=2, body=old), metadata=alice.md())
    stack.wait_backlog_empty()
    rev, h, vec = vectors(stack, ws, [mid])[mid]
    assert rev == 3 and h == input_sha256("", old) and np.array_equal(vec, old_vec)


def test_vectors_of_another_stamp_are_not_reused(team):
    alice, stack, ws = team["alice"], team["stack"], team["ws"]
    body = f"Stamp check {uuid.uuid4().hex[:8]}: the lab fridge is set to four degrees."
    first = alice.remember(body)
    stack.wait_backlog_empty()
    with stack.db(ws) as conn:  # pretend the first vector came from another model, with a recognisable value
        fake = np.zeros(384, dtype=np.float32)
        fake[0] = 1.0
        conn.execute(
            "UPDATE memory_embedding SET input_version = 'other-model|v9', embedding = %s WHERE memory_id = %s",
            (fake, first.id),
        )
        second = alice.remember(body)
        stack.wait_backlog_empty()
        row = conn.execute(
            "SELECT input_version, embedding FROM memory_embedding WHERE memory_id = %s", (second.id,)
        ).fetchone()
    assert row[0] == INPUT_VERSION and not np.array_equal(row[1].to_numpy(), fake)
