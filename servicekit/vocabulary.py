"""The one vocabulary of proto enum names, derived from the generated descriptors.

A value's *short name* is its proto name without the enum's prefix, in lower case: ``KIND_NOTE`` is
``note``, ``LINK_TYPE_DERIVED_FROM`` is ``derived_from``, ``RECALL_MODE_HYBRID`` is ``hybrid``. The
same short names are what the CLI accepts and prints and what the store writes to PostgreSQL (whose
CHECK constraints stay the database's own guard on them). The prefix is read from the zero value,
which buf's STANDARD lint (ENUM_ZERO_VALUE_SUFFIX, ENUM_VALUE_PREFIX) requires to be
``<PREFIX>UNSPECIFIED`` with every other value starting with ``<PREFIX>``.
"""

from __future__ import annotations

import functools

from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper
from recallatron.memory.v1 import memory_pb2

_ZERO_SUFFIX = "UNSPECIFIED"


@functools.cache
def _short_names(descriptor: EnumDescriptor) -> dict[int, str]:
    """Every value of the enum (the zero value included) -> its short name.

    ValueError when the enum does not follow the naming rule above (a proto change buf lint would
    also refuse)."""
    zero = descriptor.values_by_number.get(0)
    if zero is None or not zero.name.endswith(_ZERO_SUFFIX):
        raise ValueError(f"enum {descriptor.full_name} has no zero value named <PREFIX>{_ZERO_SUFFIX}")
    prefix = zero.name[: -len(_ZERO_SUFFIX)]
    out = {}
    for value in descriptor.values:
        if not value.name.startswith(prefix):
            raise ValueError(f"enum value {value.name} of {descriptor.full_name} lacks the prefix {prefix}")
        out[value.number] = value.name[len(prefix) :].lower()
    return out


def names(enum: EnumTypeWrapper) -> dict[int, str]:
    """Value -> short name of every value except the zero (unspecified) one, in declaration order.

    ``enum`` is a generated enum wrapper such as ``memory_pb2.Kind``."""
    return {number: name for number, name in _short_names(enum.DESCRIPTOR).items() if number != 0}


def values(enum: EnumTypeWrapper) -> dict[str, int]:
    """Short name -> value of every value except the zero one, in declaration order (the inverse of ``names``)."""
    return {name: number for number, name in names(enum).items()}


def name_of(enum: EnumTypeWrapper, value: int) -> str:
    """The short name of ``value`` for display: ``unspecified`` for zero, and ``unknown (N)`` for a
    number this build does not know (a newer server's value), never an exception."""
    return _short_names(enum.DESCRIPTOR).get(value, f"unknown ({value})")


# How people read why two entities are proposed as one (docs/entities.md, "Duplicate proposals").
ENTITY_DUPLICATE_REASONS = {
    memory_pb2.ENTITY_DUPLICATE_REASON_SAME_NAME: "same name",
    memory_pb2.ENTITY_DUPLICATE_REASON_ACCENTS: "same name but for accents",
    memory_pb2.ENTITY_DUPLICATE_REASON_INITIALS: "initials",
}
