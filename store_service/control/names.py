"""Display names beside member ids in every answer of the store (docs/operations.md, "Names").

Answers carry members as ids (``created_by``, ``revised_by``, ``merged_by``, ``resolved_by`` ...).
Wherever a message declares a string field ``X`` and beside it ``X_name``, the answer is given the
display name of member ``X``, looked up in the control plane among the members of the caller's
workspace only: an id of another workspace gets no name, so names never cross workspaces. The
fields are found from the descriptors, once per message type, so every read path (present and
future) that returns such a message names its members without code of its own; a message type
that cannot hold such a field costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

# Per message type: (pairs of (id field, name field), message fields that may hold a pair below).
_plans: dict[str, tuple[tuple[tuple[str, str], ...], tuple[FieldDescriptor, ...]]] = {}


def _plan(desc: Descriptor, seen: frozenset[str] = frozenset()):
    plan = _plans.get(desc.full_name)
    if plan is not None:
        return plan
    pairs = tuple(
        (f.name, f.name + "_name")
        for f in desc.fields
        if f.type == FieldDescriptor.TYPE_STRING and not f.is_repeated and f.name + "_name" in desc.fields_by_name
    )
    children = []
    for f in desc.fields:
        sub = f.message_type
        if sub is None or sub.GetOptions().map_entry:
            continue
        if sub.full_name in seen or sub.full_name == desc.full_name:  # recursive types: walk what is there
            children.append(f)
            continue
        sub_pairs, sub_children = _plan(sub, seen | {desc.full_name})
        if sub_pairs or sub_children:
            children.append(f)
    plan = (pairs, tuple(children))
    if not seen:  # a plan made inside a cycle may have counted on its ancestor: only top levels are final
        _plans[desc.full_name] = plan
    return plan


def _collect(msg: Message, out: list) -> None:
    pairs, children = _plan(msg.DESCRIPTOR)
    for id_field, name_field in pairs:
        value = getattr(msg, id_field)
        if value:
            out.append((msg, name_field, value))
    for f in children:
        if f.is_repeated:
            for item in getattr(msg, f.name):
                _collect(item, out)
        elif msg.HasField(f.name):
            _collect(getattr(msg, f.name), out)


def fill(response: Message, names_of: Callable[[set[str]], dict[str, str]]) -> None:
    """Sets every ``X_name`` beside a member id ``X`` in ``response`` (at any depth) to the name
    ``names_of`` gives that id ("" for none); one call of ``names_of``, none when no id is there."""
    found: list = []
    _collect(response, found)
    if not found:
        return
    names = names_of({value for _, _, value in found})
    for msg, name_field, value in found:
        setattr(msg, name_field, names.get(value, ""))
