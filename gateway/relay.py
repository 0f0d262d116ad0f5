"""The gateway's calls that only pass through to the store, relayed by their descriptors.

A relayed call's gateway request is copied into its store twin (the StoreService method of the
same name) field by field, by name, recursing into message fields whose types differ (a gateway
``HistoryTurn`` into the store's); the fields only the gateway may fill (the caller the token
resolved to, and what it derives from the token or the workspace) are then set by the gateway,
over anything copied; the store's answer is copied back the same way. Numbers are not relied on
(the store's requests put the caller first), and unknown fields are never copied, so no bytes a
client sends reach the store except through a field the gateway's own message declares.

Each pair is checked when its relay is made (so at import): every gateway field has a twin of the
same type, cardinality, presence and oneof, every store field is either a twin or owned by the
gateway, and the answer's fields match both ways. A proto edit that breaks a pair fails the
gateway's start and tests/test_relay.py rather than dropping a field silently.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc

from gateway.auth import authenticate

MEMORY_SERVICE = g.DESCRIPTOR.services_by_name["MemoryService"]
ADMIN_SERVICE = g.DESCRIPTOR.services_by_name["AdminService"]
STORE_SERVICE = s.DESCRIPTOR.services_by_name["StoreService"]
# The gateway names the memory a call acts on ``id``; the store's request, ``memory_id``.
BY_ID = {"id": "memory_id"}
# Every relay made, by (gateway service, method): tests/test_relay.py checks each pair again.
RELAYS: dict[tuple[str, str], Relay] = {}


class PairMismatch(TypeError):
    """A gateway message and its store twin cannot be copied field by field without a loss."""


def _shape(field: FieldDescriptor) -> tuple:
    """What must agree between a field and its twin, besides a message field's own fields."""
    return (
        field.type,
        field.is_repeated,
        field.has_presence,
        field.containing_oneof.name if field.containing_oneof else None,
        field.enum_type.full_name if field.enum_type else None,
    )


def check_twins(
    source: Descriptor, target: Descriptor, renames: Mapping[str, str] | None = None, owned=frozenset()
) -> None:
    """Raises PairMismatch unless every field of ``source`` has a twin in ``target`` (the field of the
    same name, or ``renames[name]``) of the same shape, and every field of ``target`` is a twin or
    ``owned`` (filled by the gateway, so never a twin: a client must not be able to set it). Message
    fields of the same type need nothing more; of different types, their fields are checked the
    same way, both ways (nothing owned)."""
    renames = renames or {}
    where = f"{source.full_name} -> {target.full_name}"
    twins = {renames.get(f.name, f.name): f for f in source.fields}
    for name in owned:
        if name in twins:
            raise PairMismatch(f"{where}: {name} is the gateway's to set, yet the request carries it")
        if name not in target.fields_by_name:
            raise PairMismatch(f"{where}: no field {name} to set")
    for field in target.fields:
        if field.name not in twins and field.name not in owned:
            raise PairMismatch(f"{where}: nothing fills {field.name}")
    for name, field in twins.items():
        twin = target.fields_by_name.get(name)
        if twin is None:
            raise PairMismatch(f"{where}: {field.name} has no twin")
        if _shape(field) != _shape(twin):
            raise PairMismatch(f"{where}: {field.name} and {name} differ in type, cardinality, presence or oneof")
        if field.message_type is None or field.message_type is twin.message_type:
            continue
        if field.message_type.GetOptions().map_entry:
            raise PairMismatch(f"{where}: {field.name} is a map of a type of its own (not relayed)")
        check_twins(field.message_type, twin.message_type)


@functools.cache
def wire_twins(a: Descriptor, b: Descriptor) -> bool:
    """Whether ``a`` and ``b`` have the same fields under the same numbers, of the same shapes, down
    through their message fields: then a message of one is a message of the other on the wire."""
    if a is b:
        return True
    ours, theirs = {f.number: f for f in a.fields}, {f.number: f for f in b.fields}
    if ours.keys() != theirs.keys():
        return False
    for number, field in ours.items():
        twin = theirs[number]
        if field.name != twin.name or _shape(field) != _shape(twin):
            return False
        if field.message_type is not None and not wire_twins(field.message_type, twin.message_type):
            return False
    return True


def copy_fields(source: Message, target: Message, renames: Mapping[str, str] | None = None) -> None:
    """Copies every field ``source`` sets into its twin in ``target`` (see ``check_twins``, which
    must hold). Unknown fields of ``source``, at any depth, are not copied: they are dropped once,
    after the copy (a nested message of a type both share is copied whole, unknown fields and all).
    Wire twins (``wire_twins``) are copied through their wire form, an order of magnitude faster
    than field by field in Python."""
    _copy(source, target, renames)
    target.DiscardUnknownFields()


def _copy(source: Message, target: Message, renames: Mapping[str, str] | None) -> None:
    if not renames and wire_twins(source.DESCRIPTOR, target.DESCRIPTOR):
        target.MergeFromString(source.SerializeToString())
        return
    for field, value in source.ListFields():
        name = renames.get(field.name, field.name) if renames else field.name
        twin = target.DESCRIPTOR.fields_by_name[name]
        if field.message_type is None:
            if field.is_repeated:
                getattr(target, name).extend(value)
            else:
                setattr(target, name, value)
        elif field.message_type is twin.message_type:
            if field.is_repeated:
                getattr(target, name).extend(value)
            else:
                getattr(target, name).CopyFrom(value)
        elif field.is_repeated:
            into = getattr(target, name)
            for item in value:
                _copy(item, into.add(), None)
        else:
            into = getattr(target, name)
            into.SetInParent()  # set even when empty, as in the source
            _copy(value, into, None)


class Relay:
    """One gateway method relayed to the StoreService method of the same name.

    ``renames`` maps gateway request fields to store ones of another name; ``owned`` names the store
    request's fields the gateway sets itself (every call must give each of them); ``answer_field``,
    when given, is the field of the store's response the gateway answers with.
    """

    def __init__(
        self,
        service,
        method: str,
        *,
        renames: Mapping[str, str] | None = None,
        owned: tuple[str, ...] = (),
        answer_field: str | None = None,
    ) -> None:
        ours, theirs = service.methods_by_name[method], STORE_SERVICE.methods_by_name[method]
        self.method, self.renames, self.owned = method, dict(renames or {}), frozenset(owned)
        self.answer_field = answer_field
        self.gateway_request, self.gateway_response = ours.input_type, ours.output_type
        self.store_request = theirs.input_type
        self.store_answer = (
            theirs.output_type.fields_by_name[answer_field].message_type if answer_field else theirs.output_type
        )
        self.check()
        self._store_request_cls = GetMessageClass(self.store_request)
        self._response_cls = GetMessageClass(self.gateway_response)
        RELAYS[(service.name, method)] = self

    def check(self) -> None:
        """Raises PairMismatch unless both directions copy without a loss."""
        check_twins(self.gateway_request, self.store_request, self.renames, self.owned)
        check_twins(self.store_answer, self.gateway_response)

    def request(self, request: Message, **owned) -> Message:
        """The store's request: ``request``'s fields, then the gateway's ``owned`` fields over them."""
        if set(owned) != self.owned:
            raise TypeError(f"{self.method} relays with {sorted(self.owned)} set by the gateway, given {sorted(owned)}")
        out = self._store_request_cls()
        copy_fields(request, out, self.renames)
        for name, value in owned.items():
            if isinstance(value, Message):
                getattr(out, name).CopyFrom(value)
            else:
                setattr(out, name, value)
        return out

    def response(self, response: Message) -> Message:
        """The gateway's answer from the store's ``response``."""
        out = self._response_cls()
        copy_fields(getattr(response, self.answer_field) if self.answer_field else response, out)
        return out

    def __call__(self, store: store_pb2_grpc.StoreServiceStub, request: Message, **owned) -> Message:
        """Calls the store (its stub's deadline and breaker, as every store call) and answers."""
        return self.response(getattr(store, self.method)(self.request(request, **owned)))


OwnedValue = Callable[[object, s.AuthenticateResponse], object]


def member_call(method: str, *, renames: Mapping[str, str] | None = None, **derived: OwnedValue):
    """A MemoryService handler relaying ``method`` for the caller the token resolves to
    (gateway.auth.authenticate); ``derived`` gives further fields the gateway sets, each from the
    servicer and the authentication (for example the workspace's expiry days)."""
    relay = Relay(MEMORY_SERVICE, method, renames=renames, owned=("caller", *derived))

    def handler(self, request, context):
        auth = authenticate(self.store, context)
        values = {name: value(self, auth) for name, value in derived.items()}
        return relay(self.store, request, caller=auth.caller, **values)

    handler.__name__ = handler.__qualname__ = method
    handler.__doc__ = f"Relays {method} to the store as the token's caller (gateway.relay)."
    return handler


def operator_call(method: str, *, answer_field: str | None = None):
    """An AdminService handler relaying ``method`` once the call carries the operator credential."""
    relay = Relay(ADMIN_SERVICE, method, answer_field=answer_field)

    def handler(self, request, context):
        self.operator.check(context)
        return relay(self.store, request)

    handler.__name__ = handler.__qualname__ = method
    handler.__doc__ = f"Relays {method} to the store for the operator (gateway.relay)."
    return handler
