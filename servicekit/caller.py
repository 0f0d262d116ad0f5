"""Caller checks shared by the gateway (first) and the store (again, since it may be called directly)."""

from __future__ import annotations

from recallatron.memory.v1 import memory_pb2 as m

from servicekit import vocabulary
from servicekit.errors import InvalidArgument, PermissionDenied

PURPOSE_NAMES = vocabulary.names(m.Purpose)


def purpose_name(purpose: int) -> str:
    """The stored name of ``purpose``: INVALID_ARGUMENT when it is unspecified or unknown."""
    name = PURPOSE_NAMES.get(purpose)
    if name is None:
        raise InvalidArgument("purpose must be one of: " + ", ".join(sorted(PURPOSE_NAMES.values())), field="purpose")
    return name


def check_purpose_granted(caller: m.Caller, purpose: int) -> str:
    """The stored name of ``purpose``.

    INVALID_ARGUMENT when it is unspecified or unknown; PERMISSION_DENIED when the caller's token
    was not granted it.
    """
    name = purpose_name(purpose)
    if purpose not in caller.granted_purposes:
        raise PermissionDenied(f"purpose {name} is not granted to this token", field="purpose")
    return name


def narrow(caller: m.Caller, purposes) -> None:
    """Narrows ``caller`` in place to ``purposes`` (a narrowed sign-in acts with fewer purposes than
    its token grants): PERMISSION_DENIED naming the purposes the token does not grant, never widened."""
    wanted = set(purposes)
    missing = sorted(vocabulary.name_of(m.Purpose, p) for p in wanted - set(caller.granted_purposes))
    if missing:
        raise PermissionDenied(f"purpose not granted to this token: {', '.join(missing)}")
    granted = [p for p in caller.granted_purposes if p in wanted]
    del caller.granted_purposes[:]
    caller.granted_purposes.extend(granted)
