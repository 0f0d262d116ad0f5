"""Caller checks shared by the gateway (first) and the store (again, since it may be called directly)."""

from __future__ import annotations

from recallatron.memory.v1 import memory_pb2 as m

from servicekit import vocabulary
from servicekit.errors import InvalidArgument, PermissionDenied

PURPOSE_NAMES = vocabulary.names(m.Purpose)


def check_purpose_granted(caller: m.Caller, purpose: int) -> str:
    """The stored name of ``purpose``.

    INVALID_ARGUMENT when it is unspecified or unknown; PERMISSION_DENIED when the caller's token
    was not granted it.
    """
    name = PURPOSE_NAMES.get(purpose)
    if name is None:
        raise InvalidArgument("purpose must be one of: " + ", ".join(sorted(PURPOSE_NAMES.values())), field="purpose")
    if purpose not in caller.granted_purposes:
        raise PermissionDenied(f"purpose {name} is not granted to this token", field="purpose")
    return name
