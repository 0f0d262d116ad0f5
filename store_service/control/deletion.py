"""Workspace deletion (AdminService.DeleteWorkspace; docs/operations.md, "Deleting a workspace").

In this order, each step safe to run again, so a deletion that stops half way is finished by the
next call:

1. the control plane marks the workspace deleted (``deleted_at``), in a transaction that locks its
   row: from its commit on, every token of the workspace fails (authentication reads only
   workspaces not being deleted), no member can be added to it, and it is no longer listed or
   found by id or name (except by this deletion's resumption);
2. this process closes its pool of the workspace database and never opens one again, and the
   database is dropped ``WITH (FORCE)``: sessions still in it, of any store process, are ended, so
   a call that authenticated before step 1 fails then (UNAVAILABLE: its connection ended; or
   NOT_FOUND: no pool to take one from), and nothing it was writing commits;
3. the workspace's rows in the control plane go: credentials, members, the workspace row.

Nothing of another workspace is touched: each workspace is its own database and the rows deleted
are found by the workspace's id. Another store process keeps a pool object for the dropped database
until its least-recently-used order closes it; that pool holds no connection (they were ended) and
never opens one, since every call first authenticates, which fails.
"""

from __future__ import annotations

import logging

from recallatron.store.v1 import store_pb2 as s

from store_service.control.plane import whole_workspace, workspace_ref
from store_service.database import Databases, named

log = logging.getLogger(__name__)


def delete(dbs: Databases, ref: str) -> tuple[s.DeleteWorkspaceResponse, str]:
    """Deletes the workspace ``ref`` names (module docstring) and returns the answer and the name of
    the database dropped; NOT_FOUND for an unknown one, FAILED_PRECONDITION while a move of it runs
    (store_service/control/moves.py)."""
    with dbs.control.connection() as lock:
        ws = workspace_ref(lock, ref, deleting=True)
        with whole_workspace(lock, ws, "delete it"):
            return _delete(dbs, str(ws))


def _delete(dbs: Databases, ref: str) -> tuple[s.DeleteWorkspaceResponse, str]:
    with dbs.control.connection() as conn, conn.transaction():
        ws = workspace_ref(conn, ref, lock=True, deleting=True)
        row = (
            named(conn)
            .execute(
                """SELECT name, db_name, server, moving_to, moved_from, deleted_at AS before
                     FROM workspace WHERE id = %s""",
                (ws,),
            )
            .fetchone()
        )
        conn.execute("UPDATE workspace SET deleted_at = coalesce(deleted_at, now()) WHERE id = %s", (ws,))
    log.info("deleting workspace %s (%s)%s", ws, row.name, ", resumed" if row.before else "")
    dbs.drop_workspace_db(row.db_name, row.server or "")
    # A move that stopped half way may have left a copy on the server it was copying to, or the old
    # copy on the server it left: they go too.
    for other in {row.moving_to, row.moved_from} - {None, dbs.server_name(row.server or "")}:
        if other in dbs.servers:
            dbs.drop_workspace_db(row.db_name, other)
    with dbs.control.connection() as conn, conn.transaction():
        conn.execute("DELETE FROM credential WHERE member_id IN (SELECT id FROM member WHERE workspace_id = %s)", (ws,))
        members = conn.execute("DELETE FROM member WHERE workspace_id = %s", (ws,)).rowcount
        conn.execute("DELETE FROM workspace WHERE id = %s", (ws,))
    response = s.DeleteWorkspaceResponse(
        workspace_id=str(ws), name=row.name, members_deleted=members, resumed=row.before is not None
    )
    return response, row.db_name
