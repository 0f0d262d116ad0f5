"""The gateway's relay (gateway.relay): every relayed pair copies without a loss, a broken pair is
refused, and no client bytes set a field the gateway owns (the caller above all)."""

import grpc
import pytest
from conftest import code_of
from google.protobuf import descriptor_pb2, descriptor_pool, text_format
from google.protobuf.message_factory import GetMessageClass
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s

import gateway.server  # noqa: F401  (its servicers make the relays)
from gateway.relay import ADMIN_SERVICE, MEMORY_SERVICE, RELAYS, PairMismatch, check_twins, copy_fields, wire_twins
from servicekit.limits import MAX_MESSAGE_BYTES

# The handlers that add something to what the store answers, so are written out.
WRITTEN_OUT = {("MemoryService", "Recall"), ("MemoryService", "GetContext"), ("MemoryService", "PromptContext")}
WRITTEN_OUT |= {("AdminService", "GetStatus")}
LENGTH_DELIMITED = {
    descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
    descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
}


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def smuggled(descriptor, payload: bytes, upto: int = 24, keep_clear=()) -> bytes:
    """``payload`` as a length-delimited field at every number up to ``upto`` that ``descriptor`` does
    not declare as one (a declared string or message field would just take it as its value), nor
    ``keep_clear`` names (numbers where a reader of the bytes as another type keeps a field of its own)."""
    declared = {f.number for f in descriptor.fields if f.type in LENGTH_DELIMITED or f.is_repeated} | set(keep_clear)
    return b"".join(
        varint(n << 3 | 2) + varint(len(payload)) + payload for n in range(1, upto + 1) if n not in declared
    )


def test_every_call_but_the_gateways_own_is_relayed():
    methods = {(svc.name, meth.name) for svc in (MEMORY_SERVICE, ADMIN_SERVICE) for meth in svc.methods}
    assert set(RELAYS) == methods - WRITTEN_OUT
    assert len(RELAYS) == 42


@pytest.mark.parametrize("key", sorted(RELAYS), ids="/".join)
def test_each_relayed_pair_copies_without_a_loss(key):
    RELAYS[key].check()


def test_member_calls_set_the_caller_and_admin_calls_set_nothing():
    owned = {key: sorted(relay.owned) for key, relay in RELAYS.items() if relay.owned != {"caller"}}
    assert owned == {
        ("MemoryService", "ListExpiringMemories"): ["caller", "expiry_days"],
        ("MemoryService", "ListDuplicateProposals"): ["caller", "input_version"],
        **{key: [] for key in RELAYS if key[0] == "AdminService"},
    }


def pool_of(messages: str) -> descriptor_pool.DescriptorPool:
    """A pool holding ``messages`` (FileDescriptorProto text) in package t."""
    file = text_format.Parse(
        f'name: "t.proto" package: "t" syntax: "proto3" {messages}', descriptor_pb2.FileDescriptorProto()
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return pool


def field(name: str, number: int, kind: str = "TYPE_INT32", *extra: str) -> str:
    return f'field {{ name: "{name}" number: {number} type: {kind} label: LABEL_OPTIONAL {" ".join(extra)} }}'


CALLER = field("caller", 1, "TYPE_STRING")
PAIRS = {
    "renumbered": ([field("x", 1)], [CALLER, field("x", 2)], None),
    "another type": ([field("x", 1)], [CALLER, field("x", 2, "TYPE_INT64")], "differ"),
    "repeated": ([field("x", 1)], [CALLER, field("x", 2).replace("LABEL_OPTIONAL", "LABEL_REPEATED")], "differ"),
    "presence": (
        [field("x", 1)],
        [CALLER, field("x", 2, "TYPE_INT32", "oneof_index: 0 proto3_optional: true"), 'oneof_decl { name: "_x" }'],
        "differ",
    ),
    "no twin": ([field("x", 1), field("y", 2)], [CALLER, field("x", 2)], "y has no twin"),
    "unfilled": ([field("x", 1)], [CALLER, field("x", 2), field("z", 3)], "nothing fills z"),
    "owned in the request": ([field("caller", 1, "TYPE_STRING")], [CALLER], "caller is the gateway's to set"),
}


@pytest.mark.parametrize("case", sorted(PAIRS))
def test_a_broken_pair_is_refused(case):
    ours, theirs, error = PAIRS[case]
    pool = pool_of(f'message_type {{ name: "G" {" ".join(ours)} }} message_type {{ name: "S" {" ".join(theirs)} }}')
    gateway, store = pool.FindMessageTypeByName("t.G"), pool.FindMessageTypeByName("t.S")
    if error is None:
        check_twins(gateway, store, owned={"caller"})
    else:
        with pytest.raises(PairMismatch, match=error):
            check_twins(gateway, store, owned={"caller"})


def test_a_message_field_of_another_type_is_checked_field_by_field():
    pool = pool_of(
        'message_type { name: "GI" ' + field("a", 1) + " } "
        'message_type { name: "SI" ' + field("a", 1) + field("b", 2) + " } "
        'message_type { name: "G" ' + field("i", 1, "TYPE_MESSAGE", 'type_name: ".t.GI"') + " } "
        'message_type { name: "S" ' + field("i", 1, "TYPE_MESSAGE", 'type_name: ".t.SI"') + " }"
    )
    with pytest.raises(PairMismatch, match="t.GI -> t.SI: nothing fills b"):
        check_twins(pool.FindMessageTypeByName("t.G"), pool.FindMessageTypeByName("t.S"))
    # Copied by name into the other type: the numbers need not agree, only the names.
    source = GetMessageClass(pool.FindMessageTypeByName("t.G"))()
    source.i.a = 7
    target = GetMessageClass(pool.FindMessageTypeByName("t.S"))()
    copy_fields(source, target)
    assert (target.i.a, target.i.b) == (7, 0)
    source.i.a = 0  # set but empty: still set in the copy
    empty = GetMessageClass(pool.FindMessageTypeByName("t.S"))()
    copy_fields(source, empty)
    assert source.HasField("i") and empty.HasField("i")


def test_copy_keeps_presence_oneofs_and_nested_twins():
    turn = g.HistoryTurn(chat_id="c", role="user", text="hello", session_id="s1")
    turn.occurred_at.seconds = 1_700_000_000
    request = g.AppendHistoryRequest(turns=[turn, g.HistoryTurn(text="bare")])
    caller = m.Caller(workspace_id="w", member_id="a")
    store = RELAYS[("MemoryService", "AppendHistory")].request(request, caller=caller)
    assert store == s.AppendHistoryRequest(
        caller=caller,
        turns=[
            s.HistoryTurn(chat_id="c", role="user", text="hello", session_id="s1", occurred_at=turn.occurred_at),
            s.HistoryTurn(text="bare"),
        ],
    )
    assert not store.turns[1].HasField("occurred_at")
    correct = RELAYS[("MemoryService", "Correct")].request(g.CorrectRequest(id="x", body=""), caller=caller)
    assert correct.memory_id == "x" and correct.HasField("body") and not correct.HasField("title")
    results = s.RememberBatchResponse(
        results=[s.RememberBatchResult(memory=m.Memory(id="k")), s.RememberBatchResult(error={"code": 3})]
    )
    answer = RELAYS[("MemoryService", "RememberBatch")].response(results)
    assert [r.WhichOneof("outcome") for r in answer.results] == ["memory", "error"]
    assert (answer.results[0].memory.id, answer.results[1].error.code) == ("k", 3)


def test_the_settings_answer_is_the_store_settings_flat():
    settings = s.WorkspaceSettings(dense_floor=0.4, expiry_days=30, inject_gate=m.INJECT_GATE_STRICT)
    answer = RELAYS[("AdminService", "UpdateWorkspaceSettings")].response(
        s.UpdateWorkspaceSettingsResponse(settings=settings)
    )
    assert answer == g.UpdateWorkspaceSettingsResponse(
        dense_floor=0.4, expiry_days=30, inject_gate=m.INJECT_GATE_STRICT
    )


def test_wire_twins_are_copied_through_the_wire_without_unknown_fields():
    assert wire_twins(g.HistoryTurn.DESCRIPTOR, s.HistoryTurn.DESCRIPTOR)
    assert wire_twins(s.ListMemoriesResponse.DESCRIPTOR, g.ListMemoriesResponse.DESCRIPTOR)
    assert not wire_twins(g.RememberRequest.DESCRIPTOR, s.RememberRequest.DESCRIPTOR)  # the caller comes first
    assert not wire_twins(g.ReadRequest.DESCRIPTOR, s.ReadRequest.DESCRIPTOR)
    extra = m.Caller(member_id="intruder").SerializeToString()
    turn = g.HistoryTurn.FromString(
        g.HistoryTurn(text="hi").SerializeToString() + smuggled(g.HistoryTurn.DESCRIPTOR, extra)
    )
    caller = m.Caller(member_id="the token's")
    store = RELAYS[("MemoryService", "AppendHistory")].request(g.AppendHistoryRequest(turns=[turn]), caller=caller)
    assert (
        store.SerializeToString()
        == s.AppendHistoryRequest(caller=caller, turns=[s.HistoryTurn(text="hi")]).SerializeToString()
    )
    # A store newer than this gateway answers a field it does not know: not passed on to the client.
    newer = s.PinMemoryResponse.FromString(
        s.PinMemoryResponse(memory_id="k", already_pinned=True).SerializeToString()
        + smuggled(s.PinMemoryResponse.DESCRIPTOR, extra)
    )
    answer = RELAYS[("MemoryService", "PinMemory")].response(newer)
    assert answer.SerializeToString() == g.PinMemoryResponse(memory_id="k", already_pinned=True).SerializeToString()


def test_a_relay_refuses_to_run_without_the_fields_the_gateway_owns():
    relay = RELAYS[("MemoryService", "ListExpiringMemories")]
    with pytest.raises(TypeError, match="expiry_days"):
        relay.request(g.ListExpiringMemoriesRequest(), caller=m.Caller(member_id="a"))


@pytest.mark.parametrize("key", sorted(k for k, r in RELAYS.items() if "caller" in r.owned), ids="/".join)
def test_no_client_bytes_reach_the_caller_or_the_store(key):
    relay = RELAYS[key]
    intruder = m.Caller(workspace_id="w", member_id="intruder", role=m.ROLE_ADMIN, granted_purposes=[1, 2, 3, 4])
    request_type = GetMessageClass(relay.gateway_request)
    sent = request_type.FromString(smuggled(relay.gateway_request, intruder.SerializeToString()))
    assert sent.SerializeToString()  # the gateway's request holds the bytes, as unknown fields
    caller = m.Caller(workspace_id="w", member_id="the token's")
    owned = {"expiry_days": 30, "input_version": "v1"}
    others = {name: owned[name] for name in relay.owned - {"caller"}}
    store = relay.request(sent, caller=caller, **others)
    assert store.caller == caller
    assert store.SerializeToString() == relay.request(request_type(), caller=caller, **others).SerializeToString()


def test_a_client_cannot_smuggle_a_caller_through_a_relayed_call(stack):
    """End to end: alice sends Remember with bob's caller (as an admin) encoded where the store's
    request keeps its caller; the memory is alice's, written as alice."""
    ws = stack.workspace("relay tests")
    alice, bob = stack.member(ws), stack.member(ws, role=m.ROLE_ADMIN)
    victim = m.Caller(workspace_id=ws, member_id=bob.id, role=m.ROLE_ADMIN, granted_purposes=[1, 2, 3, 4])
    request = g.RememberRequest(
        purpose=m.PURPOSE_CONVERSATION,
        kind=m.KIND_NOTE,
        title="t",
        body="whose note is this",
        audience=m.AUDIENCE_WORKSPACE,
    )
    # The store's own message fields past the caller would refuse the bytes as theirs; only the caller matters.
    theirs = {f.number for f in s.RememberRequest.DESCRIPTOR.fields if f.message_type and f.name != "caller"}
    wire = request.SerializeToString() + smuggled(
        g.RememberRequest.DESCRIPTOR, victim.SerializeToString(), keep_clear=theirs
    )
    # Copied by its wire form, these bytes would make bob the store's caller:
    assert s.RememberRequest.FromString(wire).caller.member_id == bob.id
    remember = stack.channel.unary_unary(
        "/recallatron.gateway.v1.MemoryService/Remember", response_deserializer=g.RememberResponse.FromString
    )
    memory = remember(wire, metadata=alice.md()).memory
    assert memory.created_by == alice.id and memory.body == "whose note is this"
    assert alice.read(memory.id).created_by == alice.id


@pytest.mark.slow
def test_a_request_the_gateway_accepts_is_never_too_large_for_the_store(stack):
    """A Remember just under the gateway's message limit reaches the store, which adds the caller and
    refuses the body by its own limit (INVALID_ARGUMENT); one over the limit is refused by the gateway
    (RESOURCE_EXHAUSTED). Found by a break-it review: the caller pushed the first over the internal
    channels' limit, and the refusal came back INTERNAL."""
    ws = stack.workspace("relay sizes")
    alice = stack.member(ws)

    def remember(size: int) -> grpc.StatusCode:
        request = g.RememberRequest(purpose=m.PURPOSE_CONVERSATION, kind=m.KIND_NOTE, body="")
        request.body = "x" * (size - request.ByteSize() - 8)  # the tag and length take a few bytes
        request.body += "x" * (size - request.ByteSize())
        assert request.ByteSize() == size
        return code_of(stack.memory.Remember, request, metadata=alice.md())

    assert remember(MAX_MESSAGE_BYTES - 5) == grpc.StatusCode.INVALID_ARGUMENT
    assert remember(MAX_MESSAGE_BYTES + 5) == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_unknown_fields_inside_a_shared_nested_message_are_not_copied():
    """Remember's relay copies field by field (its pair is no wire twin) and its entities are
    EntityMention in both messages: bytes unknown to EntityMention stay behind too."""
    relay = RELAYS[("MemoryService", "Remember")]
    assert not wire_twins(relay.gateway_request, relay.store_request)
    mention = m.EntityMention(name="Jonas")
    mention.MergeFromString(smuggled(m.EntityMention.DESCRIPTOR, b"client bytes"))
    request = g.RememberRequest(body="b", entities=[mention], occurred_at={"seconds": 5})
    request.occurred_at.MergeFromString(smuggled(request.occurred_at.DESCRIPTOR, b"client bytes"))
    assert b"client bytes" in request.SerializeToString()
    store = relay.request(request, caller=m.Caller(member_id="m"))
    assert b"client bytes" not in store.SerializeToString()
    assert store.entities[0].name == "Jonas" and store.occurred_at.seconds == 5
