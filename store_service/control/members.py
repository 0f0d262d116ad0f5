"""Member removal (AdminService.RemoveMember, issue 9, item 5).

In this order, each step safe to run again, so a run that stops half way is finished by the next:

1. the control plane marks the member removed and revokes every token of it in one transaction
   (``ControlPlane.remove_member``): its next call with any token is UNAUTHENTICATED, since every
   call authenticates and nothing about a caller is cached;
2. the workspace database records the member removed (``membership.mark_removed``), after every
   write of the member still in flight (authenticated before step 1) has committed: from then on
   such a write fails UNAUTHENTICATED, and what the ones before wrote is found by the next steps;
3. every member-only memory of the member is forgotten exactly as its member's own Forget would
   (``lifecycle.forget_member``: tombstones, everything derived from them with them), and the ids
   are listed in the response;
4. all of the member's history evidence is forgotten (``turns.forget_all``). It is owner-only:
   nobody else may ever read it, so keeping it would keep words nobody can use or review, and
   forgetting it is what the member's own ForgetHistory would do.
5. which memories PromptContext showed the member in its sessions is dropped
   (``prompt_sessions.forget_member``).

So once RemoveMember answers, no live member-only memory or history turn of the member exists and
none can appear.

Workspace memories the member wrote stay, readable as before and still naming it as ``created_by``;
from now on an admin changes them (their creator no longer can). Admins can be removed, the last one
too: the operator, not an admin, administers members, and can add another admin at any time.

Removals take turns: in one store process, the removals of one workspace run one at a time on one
connection of its pool (``_turn``), so however many run at once, the other members' calls keep the
rest of the pool; across store processes, a session advisory lock on the member makes a second
removal of the same member wait for the first. A removal that waited answers what it did itself:
``already_removed``, nothing more revoked or forgotten (the first removal's answer lists those).
Steps 3 and 4 are short transactions, one read of a batch or one Forget each, so a long sweep never
holds what other calls wait for.

Cost: one Forget per member-only memory that is not a derivation of another. A member with many
thousands of them can take longer than the gateway's internal deadline (30 s): the caller then sees
UNAVAILABLE while the store finishes the sweep, and running the call again completes what is left
and reports it.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from recallatron.store.v1 import store_pb2 as s

from store_service.access import membership
from store_service.control.plane import ControlPlane
from store_service.database import Databases, WorkspaceHandle
from store_service.history import turns
from store_service.records import lifecycle, prompt_sessions

# pg_advisory_lock(class, key) class of a member's removal ("rm"); the key is hashtext(member).
_REMOVAL_CLASS = 0x726D
_turns: dict[str, threading.Lock] = {}
_turns_lock = threading.Lock()


@contextmanager
def _turn(db_name: str) -> Iterator[None]:
    """This process's removals in one workspace database, one at a time."""
    with _turns_lock:
        lock = _turns.setdefault(db_name, threading.Lock())
    with lock:
        yield


@contextmanager
def _sole_removal(conn: psycopg.Connection, member: uuid.UUID) -> Iterator[None]:
    """Holds the member's removal lock (a session lock, taken and given back in transactions of
    their own so none stays open around the sweep)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_REMOVAL_CLASS, str(member)))
    try:
        yield
    finally:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_REMOVAL_CLASS, str(member)))


def remove(control: ControlPlane, dbs: Databases, workspace_id: str, member_id: str) -> s.RemoveMemberResponse:
    """Removes a member (module docstring) and says what this call did. NOT_FOUND for an unknown
    workspace or a member not in it (malformed ids too)."""
    removal = control.remove_member(workspace_id, member_id)
    member = uuid.UUID(removal.caller.member_id)
    database = WorkspaceHandle(dbs, removal.db_name, removal.server)
    with _turn(removal.db_name), database.connection() as conn, _sole_removal(conn, member):
        membership.mark_removed(conn, member)
        forgotten = lifecycle.forget_member(conn, removal.caller)
        turns_forgotten = turns.forget_all(conn, member)
        prompt_sessions.forget_member(conn, member)
    return s.RemoveMemberResponse(
        revoked=removal.revoked,
        forgotten_ids=forgotten,
        history_forgotten=turns_forgotten,
        already_removed=removal.already_removed,
    )
