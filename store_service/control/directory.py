"""The operator's everyday view and changes of workspaces and members (docs/operations.md): listing,
renaming, new tokens for existing members, and the display names every read shows beside member ids.

Workspace deletion is ``deletion.py``; creating workspaces and members, revoking and authenticating
are ``plane.py``.
"""

from __future__ import annotations

import secrets
import threading
import time
import uuid

import psycopg
from recallatron.memory.v1 import memory_pb2 as m

from servicekit.errors import FailedPrecondition, NotFound
from store_service import page_tokens
from store_service.control.plane import (
    TOKEN_PREFIX,
    WORKSPACE_COLUMNS,
    check_display_name,
    check_workspace_name,
    looks_like_uuid,
    member_ref,
    name_free,
    settings_fields,
    token_digest,
    whole_lock_running,
    workspace_of,
    workspace_ref,
)
from store_service.database import Databases, named
from store_service.records.memories import timestamp
from store_service.vocabulary import PURPOSE_OF, PURPOSES, ROLE_OF, enum_value

DEFAULT_PAGE, MOST_PAGE = 50, 200
# How long a member's display name is kept by a store process, and how many are kept at most.
NAME_TTL, MOST_NAMES_KEPT = 5.0, 100_000

_SUMMARY = f"""SELECT {WORKSPACE_COLUMNS}, w.name, w.created_at, w.moving_to, w.moved_from,
                     (SELECT count(*) FROM member mb WHERE mb.workspace_id = w.id AND mb.removed_at IS NULL)
                         AS members,
                     (SELECT count(*) FROM member mb WHERE mb.workspace_id = w.id AND mb.removed_at IS NOT NULL)
                         AS removed,
                     (SELECT r.old_name FROM workspace_renamed r WHERE r.workspace_id = w.id) AS renamed_from,
                     {whole_lock_running("w.id::text")} AS move_running
                FROM workspace w"""

_MEMBER = """SELECT mb.id, mb.display_name, mb.role, mb.created_at, mb.removed_at,
                    coalesce((SELECT array_agg(DISTINCT p ORDER BY p) FROM credential c, unnest(c.purposes) p
                               WHERE c.member_id = mb.id AND c.revoked_at IS NULL), '{}') AS purposes,
                    (SELECT count(*) FROM credential c WHERE c.member_id = mb.id AND c.revoked_at IS NULL) AS tokens
               FROM member mb"""


def _summary(row, control_server: str) -> m.WorkspaceSummary:
    ws = workspace_of(row)
    return m.WorkspaceSummary(
        id=str(row.id),
        name=row.name,
        created_at=timestamp(row.created_at),
        member_count=row.members,
        removed_member_count=row.removed,
        renamed_from=row.renamed_from or "",
        server=ws.server or control_server,
        moving_to=row.moving_to or "",
        moved_from=row.moved_from or "",
        move_running=row.move_running,
        **settings_fields(ws),
    )


def _member(row) -> m.MemberSummary:
    out = m.MemberSummary(
        id=str(row.id),
        display_name=row.display_name,
        role=ROLE_OF[row.role],
        purposes=sorted(PURPOSE_OF[p] for p in row.purposes),
        token_count=row.tokens,
        removed=row.removed_at is not None,
        created_at=timestamp(row.created_at),
    )
    if row.removed_at is not None:
        out.removed_at.CopyFrom(timestamp(row.removed_at))
    return out


class Directory:
    """Listing and renaming workspaces and members, new tokens, and display names."""

    def __init__(self, dbs: Databases) -> None:
        self.dbs = dbs
        # (workspace, member) -> (monotonic time it is kept until, display name or "" for none)
        self._names: dict[tuple[uuid.UUID, uuid.UUID], tuple[float, str]] = {}
        self._lock = threading.Lock()

    def list_workspaces(self, page_size: int, page_token: str) -> tuple[list[m.WorkspaceSummary], str]:
        """Workspaces not being deleted, oldest first, one page (keyset on created_at, id)."""
        size = page_tokens.page_size(page_size, DEFAULT_PAGE, MOST_PAGE)
        fp = page_tokens.fingerprint(["workspaces"])
        after = page_tokens.decode_position(
            page_token, fp, "workspace listing", page_tokens.instant, page_tokens.identifier
        )
        with self.dbs.control.connection() as conn:
            rows = (
                named(conn)
                .execute(
                    _SUMMARY
                    + """ WHERE w.deleted_at IS NULL
                            AND (%(at)s::timestamptz IS NULL OR (w.created_at, w.id) > (%(at)s, %(id)s))
                          ORDER BY w.created_at, w.id LIMIT %(n)s""",
                    {"at": after[0] if after else None, "id": after[1] if after else None, "n": size + 1},
                )
                .fetchall()
            )
        more = len(rows) > size
        rows = rows[:size]
        token = page_tokens.encode(fp, [rows[-1].created_at.isoformat(), str(rows[-1].id)]) if more else ""
        return [_summary(r, self.dbs.control_server) for r in rows], token

    def get_workspace(self, ref: str) -> m.WorkspaceSummary:
        """One workspace by id or name; NOT_FOUND otherwise."""
        with self.dbs.control.connection() as conn:
            ws = workspace_ref(conn, ref)
            return _summary(
                named(conn).execute(_SUMMARY + " WHERE w.id = %s", (ws,)).fetchone(), self.dbs.control_server
            )

    def rename_workspace(self, ref: str, name: str) -> m.WorkspaceSummary:
        """Renames a workspace; INVALID_ARGUMENT for a bad name, ALREADY_EXISTS for a taken one."""
        name = check_workspace_name(name)
        with self.dbs.control.connection() as conn, conn.transaction():
            ws = workspace_ref(conn, ref, lock=True)
            name_free(conn, name, but=ws)
            try:
                with conn.transaction():
                    conn.execute("UPDATE workspace SET name = %s WHERE id = %s", (name, ws))
            except psycopg.errors.UniqueViolation:  # taken by a rename or create racing this one
                name_free(conn, name, but=ws)
                raise
            return _summary(
                named(conn).execute(_SUMMARY + " WHERE w.id = %s", (ws,)).fetchone(), self.dbs.control_server
            )

    def _one(self, conn, ws: uuid.UUID) -> m.WorkspaceSummary:
        return _summary(named(conn).execute(_SUMMARY + " WHERE w.id = %s", (ws,)).fetchone(), self.dbs.control_server)

    def list_members(self, ref: str, page_size: int, page_token: str) -> tuple[list[m.MemberSummary], str]:
        """A workspace's members, removed ones too, oldest first, one page."""
        size = page_tokens.page_size(page_size, DEFAULT_PAGE, MOST_PAGE)
        with self.dbs.control.connection() as conn:
            ws = workspace_ref(conn, ref)
            fp = page_tokens.fingerprint(["members", str(ws)])
            after = page_tokens.decode_position(
                page_token, fp, "member listing", page_tokens.instant, page_tokens.identifier
            )
            rows = (
                named(conn)
                .execute(
                    _MEMBER
                    + """ WHERE mb.workspace_id = %(ws)s
                            AND (%(at)s::timestamptz IS NULL OR (mb.created_at, mb.id) > (%(at)s, %(id)s))
                          ORDER BY mb.created_at, mb.id LIMIT %(n)s""",
                    {"ws": ws, "at": after[0] if after else None, "id": after[1] if after else None, "n": size + 1},
                )
                .fetchall()
            )
        more = len(rows) > size
        rows = rows[:size]
        token = page_tokens.encode(fp, [rows[-1].created_at.isoformat(), str(rows[-1].id)]) if more else ""
        return [_member(r) for r in rows], token

    def issue_token(
        self, ref: str, member: str, purposes: list[int], revoke_others: bool
    ) -> tuple[str, uuid.UUID, int]:
        """A new token for an existing member, granted ``purposes`` (all four when empty), and how
        many others were revoked (``revoke_others``), in one transaction. FAILED_PRECONDITION for a
        removed member (its memories were forgotten: a token would open an empty, broken identity)."""
        granted = sorted({enum_value(PURPOSES, p, "purposes") for p in purposes}) or sorted(PURPOSES.values())
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.dbs.control.connection() as conn, conn.transaction():
            ws = workspace_ref(conn, ref, lock=True)
            mem = member_ref(conn, ws, member)
            removed = conn.execute("SELECT removed_at FROM member WHERE id = %s FOR UPDATE", (mem,)).fetchone()[0]
            if removed is not None:
                raise FailedPrecondition("this member was removed from the workspace: add a new member instead")
            revoked = 0
            if revoke_others:
                revoked = conn.execute(
                    "UPDATE credential SET revoked_at = now() WHERE member_id = %s AND revoked_at IS NULL", (mem,)
                ).rowcount
            conn.execute(
                "INSERT INTO credential (id, member_id, token_sha256, purposes) VALUES (%s, %s, %s, %s)",
                (uuid.uuid4(), mem, token_digest(token), granted),
            )
        return token, mem, revoked

    def rename_member(self, ref: str, member: str, display_name: str) -> m.MemberSummary:
        """Changes a member's display name (removed members' too: their workspace memories still
        name them)."""
        display_name = check_display_name(display_name)
        with self.dbs.control.connection() as conn, conn.transaction():
            ws = workspace_ref(conn, ref)
            mem = member_ref(conn, ws, member)
            conn.execute("UPDATE member SET display_name = %s WHERE id = %s", (display_name, mem))
            out = _member(named(conn).execute(_MEMBER + " WHERE mb.id = %s", (mem,)).fetchone())
        self._forget_name(ws, mem)
        return out

    def names(self, workspace_id: str, ids: set[str]) -> dict[str, str]:
        """Display names of the members of ``ids`` that belong to the workspace (an id of another
        workspace, or none, gets no name: names never cross workspaces). At most one query: every
        answer that carries memories is named, so names are kept for ``NAME_TTL`` seconds per
        (workspace, member); a rename through this process shows at once, through another store
        process within ``NAME_TTL`` (docs/operations.md, "Names")."""
        wanted = set()
        for value in ids:
            try:
                wanted.add(uuid.UUID(value))
            except ValueError:
                continue
        if not wanted:
            return {}
        now = time.monotonic()
        if looks_like_uuid(workspace_id):
            ws = uuid.UUID(workspace_id)
        else:  # an operator's call may name its workspace
            with self.dbs.control.connection() as conn:
                try:
                    ws = workspace_ref(conn, workspace_id)
                except NotFound:
                    return {}
        out: dict[str, str] = {}
        missing = []
        with self._lock:
            for mem in wanted:
                kept = self._names.get((ws, mem))
                if kept is not None and kept[0] > now:
                    if kept[1]:
                        out[str(mem)] = kept[1]
                else:
                    missing.append(mem)
        if not missing:
            return out
        with self.dbs.control.connection() as conn:
            rows = conn.execute(
                "SELECT id, display_name FROM member WHERE workspace_id = %s AND id = ANY(%s)", (ws, missing)
            ).fetchall()
        found = {r[0]: r[1] for r in rows}
        with self._lock:
            if len(self._names) > MOST_NAMES_KEPT:
                self._names.clear()
            for mem in missing:  # an id that is no member of the workspace is kept as nameless too
                self._names[(ws, mem)] = (now + NAME_TTL, found.get(mem, ""))
        out.update((str(mem), name) for mem, name in found.items())
        return out

    def _forget_name(self, ws: uuid.UUID, mem: uuid.UUID) -> None:
        with self._lock:
            self._names.pop((ws, mem), None)
