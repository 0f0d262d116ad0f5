"""Member removal (AdminService.RemoveMember, issue 9, item 5).

In this order, each step safe to run again, so a run that stops half way is finished by the next:

1. the control plane marks the member removed and revokes every token of it in one transaction
   (``ControlPlane.remove_member``): its next call with any token is UNAUTHENTICATED, since every
   call authenticates and nothing about a caller is cached;
2. every member-only memory of the member is forgotten exactly as its member's own Forget would
   (``lifecycle.forget_member``: tombstones, everything derived from them with them), and the ids
   are listed in the response;
3. all of the member's history evidence is forgotten (``history.forget_all``). It is owner-only:
   nobody else may ever read it, so keeping it would keep words nobody can use or review, and
   forgetting it is what the member's own ForgetHistory would do.

Workspace memories the member wrote stay, readable as before and still naming it as ``created_by``;
from now on an admin changes them (their creator no longer can). Admins can be removed, the last one
too: the operator, not an admin, administers members, and can add another admin at any time.

Cost: one Forget per member-only memory that is not a derivation of another (each its own short
transaction, so other calls are never held for long). A member with many thousands of them can take
longer than the gateway's internal deadline (30 s): the caller then sees UNAVAILABLE while the store
finishes the sweep, and running the call again completes what is left and reports it.
"""

from __future__ import annotations

import uuid

from recallatron.store.v1 import store_pb2 as s

from store_service import history, lifecycle
from store_service.control import ControlPlane
from store_service.database import Databases


def remove(control: ControlPlane, dbs: Databases, workspace_id: str, member_id: str) -> s.RemoveMemberResponse:
    """Removes a member (module docstring) and says what this call did. NOT_FOUND for an unknown
    workspace or a member not in it (malformed ids too)."""
    removal = control.remove_member(workspace_id, member_id)
    with dbs.workspace(removal.db_name).connection() as conn:
        forgotten = lifecycle.forget_member(conn, removal.caller)
        turns = history.forget_all(conn, uuid.UUID(removal.caller.member_id))
    return s.RemoveMemberResponse(
        revoked=removal.revoked,
        forgotten_ids=forgotten,
        history_forgotten=turns,
        already_removed=removal.already_removed,
    )
