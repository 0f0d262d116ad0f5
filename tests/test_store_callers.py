"""The store's callers are its own peers (the gateway, the MCP server, the web screen), but a peer's
bug must still get a plain refusal, not INTERNAL: every StoreService method that takes a ``caller``
is sent one whose member id is not a UUID."""

from __future__ import annotations

import uuid

import grpc
import pytest
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc

from servicekit import clients
from servicekit.checks import parse_uuid
from servicekit.errors import InvalidArgument, error_info

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


# Malformed ids, and spellings Python's uuid.UUID reads (some as another id) that are not a UUID's.
MALFORMED = ["", "not-a-uuid", "1234", "\x00", "ffffffff-ffff-ffff-ffff-fffffffffffff"]
LENIENT = [
    lambda i: "+" + i.replace("-", "")[1:],
    lambda i: " " + i.replace("-", "")[1:],
    lambda i: i[:4] + "_" + i[5:],
    lambda i: "\uff11" * 32,  # full-width digits
    lambda i: "urn:uuid:" + i,
    lambda i: i + "\n",
    lambda i: "{" + i,
    lambda i: i[:8] + i[9:],  # one hyphen left out of four
]


def test_spellings_that_read_as_another_id_are_refused():
    some = "2181a787-1c5e-4b53-9d7e-0e2b4b1c9f10"
    for spell in LENIENT:
        with pytest.raises(InvalidArgument):
            parse_uuid(spell(some), "member_id")
    for fine in (some, some.upper(), "{" + some + "}", some.replace("-", "")):
        assert parse_uuid(fine) == uuid.UUID(some)


@pytest.mark.parametrize("method", WITH_CALLER)
@pytest.mark.parametrize("member_id", MALFORMED + [f"lenient {k}" for k in range(len(LENIENT))])
def test_a_malformed_member_id_is_refused_by_name(store_and_caller, method, member_id):
    store, caller = store_and_caller
    request = getattr(s, SERVICE.methods_by_name[method].input_type.name)()
    request.caller.CopyFrom(caller)
    if member_id.startswith("lenient "):
        member_id = LENIENT[int(member_id.split()[1])](caller.member_id)
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


@pytest.mark.parametrize("spelling", [str.upper, lambda i: "{" + i + "}", lambda i: i.replace("-", "")])
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
