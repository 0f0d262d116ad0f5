"""The store's callers are its own peers (the gateway, the MCP server, the web screen), but a peer's
bug must still get a plain refusal, not INTERNAL: every StoreService method that takes a ``caller``
is sent one whose member id is not a UUID."""

from __future__ import annotations

import grpc
import pytest
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc

from servicekit import clients
from servicekit.errors import error_info

SERVICE = s.DESCRIPTOR.services_by_name["StoreService"]
WITH_CALLER = sorted(
    name for name, method in SERVICE.methods_by_name.items() if "caller" in method.input_type.fields_by_name
)


@pytest.fixture(scope="module")
def store_and_caller(stack):
    ws = stack.workspace("callers")
    alice = stack.member(ws)
    alice.remember("The boiler is serviced in March.")
    store = store_pb2_grpc.StoreServiceStub(clients.channel(f"127.0.0.1:{stack.store.port}"))
    return store, store.Authenticate(s.AuthenticateRequest(token=alice.token)).caller


def test_methods_taking_a_caller_are_the_memory_calls():
    # Which methods this test covers, so that one gaining or losing a caller is seen here.
    assert len(WITH_CALLER) >= 30 and {"Read", "LexicalCandidates", "Remember", "GetContext"} <= set(WITH_CALLER)


@pytest.mark.parametrize("method", WITH_CALLER)
@pytest.mark.parametrize("member_id", ["", "not-a-uuid", "1234", "\x00", "ffffffff-ffff-ffff-ffff-fffffffffffff"])
def test_a_malformed_member_id_is_refused_by_name(store_and_caller, method, member_id):
    store, caller = store_and_caller
    request = getattr(s, SERVICE.methods_by_name[method].input_type.name)()
    request.caller.CopyFrom(caller)
    request.caller.member_id = member_id
    with pytest.raises(grpc.RpcError) as refused:
        getattr(store, method)(request, timeout=30)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, refused.value.details())
    info = error_info(refused.value)
    assert info is not None and info.metadata.get("field") == "caller.member_id", (method, info)


def test_a_well_formed_caller_still_reads(store_and_caller):
    store, caller = store_and_caller
    found = store.LexicalCandidates(
        s.LexicalCandidatesRequest(caller=caller, query="boiler serviced", limit=5, purpose=m.PURPOSE_CONVERSATION)
    )
    assert len(found.candidates) == 1


@pytest.mark.parametrize(
    "spelling", [str.upper, lambda i: "{" + i + "}", lambda i: i.replace("-", ""), lambda i: "urn:uuid:" + i]
)
def test_a_member_id_in_another_spelling_is_taken_as_its_canonical_one(store_and_caller, spelling):
    store, caller = store_and_caller
    other = s.LexicalCandidatesRequest(caller=caller, query="boiler serviced", limit=5, purpose=m.PURPOSE_CONVERSATION)
    other.caller.member_id = spelling(caller.member_id)
    assert other.caller.member_id != caller.member_id
    assert len(store.LexicalCandidates(other).candidates) == 1


def test_a_token_is_checked_before_the_caller_beside_it(store_and_caller):
    store, caller = store_and_caller
    for beside in (m.Caller(), m.Caller(workspace_id=caller.workspace_id, member_id="not-a-uuid")):
        with pytest.raises(grpc.RpcError) as refused:
            store.LexicalCandidates(
                s.LexicalCandidatesRequest(
                    token="rct_not-a-real-token", caller=beside, query="boiler", purpose=m.PURPOSE_CONVERSATION
                )
            )
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, refused.value.details()
