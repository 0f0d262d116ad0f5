"""Control plane: workspaces, members, credentials and authentication."""

from __future__ import annotations

import hashlib
import logging
import secrets
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
from recallatron.memory.v1 import memory_pb2 as m

from servicekit import relevance_gate, vocabulary
from servicekit.checks import spelled_uuid
from servicekit.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    Unauthenticated,
    WorkspaceUnavailable,
)
from store_service.database import Databases, named, new_db_name, one_statement
from store_service.vocabulary import MODE_OF, MODES, PURPOSE_OF, PURPOSES, ROLE_OF, ROLES, enum_value

log = logging.getLogger(__name__)


class NameTaken(AlreadyExists):
    """A workspace name another workspace has."""

    reason = "NAME_TAKEN"

    def __init__(self, name: str, deleting: bool = False) -> None:
        if deleting:
            super().__init__(
                f"workspace {name!r} is being deleted; finish it (`recallatron workspace delete` with its name "
                "and --yes) before reusing the name"
            )
        else:
            super().__init__(f"a workspace named {name!r} exists already (names are unique, case-insensitively)")


TOKEN_PREFIX = "rct_"
MAX_DISPLAY_NAME = 200
MAX_TOKEN_CHARS = 512


@dataclass(frozen=True)
class Workspace:
    """A workspace row: where its database is and its retrieval settings."""

    id: uuid.UUID
    db_name: str
    dense_floor: float
    default_mode: int
    context_bundle: bool = False
    # The expiry gate (store_service/access/expiry.py): days without an update that hide a memory from
    # recall; 0 when off (stored as NULL).
    expiry_days: int = 0
    # The relevance gate of per-turn recall (servicekit/relevance_gate.py): the preset's short name
    # ("" when the workspace set a number), and the minimum cosine in force.
    inject_gate: str = relevance_gate.DEFAULT
    inject_min_cosine: float = relevance_gate.PRESETS[relevance_gate.DEFAULT]
    # The database server its database is on, by its configured name ("": the control plane's).
    server: str = ""


# The columns of a workspace row, as ``workspace_of`` reads them.
WORKSPACE_COLUMNS = (
    "id, db_name, dense_floor, default_mode, context_bundle, expiry_days, inject_gate, inject_min_cosine, server"
)


def workspace_of(row) -> Workspace:
    """A Workspace of a named row selected with ``WORKSPACE_COLUMNS``."""
    # Both NULL is the default preset; a preset is kept by name, so a refitted one applies at once.
    preset = "" if row.inject_min_cosine is not None else row.inject_gate or relevance_gate.DEFAULT
    return Workspace(
        row.id,
        row.db_name,
        row.dense_floor,
        MODE_OF[row.default_mode],
        row.context_bundle,
        row.expiry_days or 0,
        preset,
        relevance_gate.PRESETS[preset] if preset else row.inject_min_cosine,
        row.server or "",
    )


def settings_fields(ws: Workspace) -> dict:
    """A workspace's retrieval settings as the fields of the messages that carry them
    (``WorkspaceSettings``, ``WorkspaceSummary``)."""
    return {
        "dense_floor": ws.dense_floor,
        "default_mode": ws.default_mode,
        "context_bundle": ws.context_bundle,
        "expiry_days": ws.expiry_days,
        "inject_gate": vocabulary.values(m.InjectGate).get(ws.inject_gate, 0),
        "inject_min_cosine": ws.inject_min_cosine,
    }


@dataclass(frozen=True)
class Removal:
    """What ``ControlPlane.remove_member`` did: the member as a Caller (its role, every purpose: the
    identity its memories are forgotten as), its workspace's database, the tokens revoked now, and
    whether an earlier call had removed it already."""

    caller: m.Caller
    db_name: str
    server: str
    revoked: int
    already_removed: bool


def as_uuid(text: str) -> uuid.UUID | None:
    """The UUID ``text`` spells (``servicekit.checks.spelled_uuid``: either case, hyphens or not,
    braces), also after ``urn:uuid:``, else None. A name must not be one, or it could pass for an
    id; a reference that is one is looked up as that id (the parsed value, never the text, goes to
    SQL). Python's own parser would take more, and some of it as another id ("+", "_", spaces or
    other scripts' digits among the hex)."""
    if text[:9].lower() == "urn:uuid:":
        text = text[9:]
    return spelled_uuid(text)


def looks_like_uuid(text: str) -> bool:
    """Whether ``text`` spells a UUID (``as_uuid``)."""
    return as_uuid(text) is not None


def _check_name(name: str, field: str, most: int, least: int) -> str:
    """``name`` trimmed; INVALID_ARGUMENT unless ``least``..``most`` characters that each print as
    themselves (no control, format, bidi or separator character, no space but the plain one): a
    name is shown in every rendering, log line and page, and must stay one plain line."""
    name = name.strip()
    if not least <= len(name) <= most or not name.isprintable():
        raise InvalidArgument(
            f"{field} must be {least}..{most} characters on one line, each printing as itself (no control, "
            "format or bidi characters)",
            field=field,
        )
    return name


def check_workspace_name(name: str) -> str:
    """A workspace name as stored (``_check_name``, 1..200 characters), not a UUID: a name stands
    wherever an id does, so it must not pass for another's id."""
    name = _check_name(name, "name", 200, 1)
    if looks_like_uuid(name):
        raise InvalidArgument("workspace name must not be a UUID (names stand where ids do)", field="name")
    return name


def check_display_name(name: str) -> str:
    """A display name as stored (``_check_name``, 0..200 characters)."""
    return _check_name(name, "display_name", MAX_DISPLAY_NAME, 0)


def workspace_ref(conn: psycopg.Connection, ref: str, *, lock: bool = False, deleting: bool = False) -> uuid.UUID:
    """The id of the workspace ``ref`` names: its id, or else its name (case-insensitively: names are
    unique so); NOT_FOUND when none does, or when it is being deleted (unless ``deleting``, the
    deletion's own resumption). ``lock`` takes its row lock to the end of the transaction."""
    ref = (ref or "").strip()
    if not ref or len(ref) > 200 or "\x00" in ref:
        raise NotFound("workspace not found")
    by_id = as_uuid(ref)
    row = conn.execute(
        "SELECT id, deleted_at FROM workspace WHERE "
        + ("id = %s" if by_id else "lower(name) = lower(%s)")
        + (" FOR UPDATE" if lock else ""),
        (by_id or ref,),
    ).fetchone()
    if row is None or (row[1] is not None and not deleting):
        raise NotFound("workspace not found" if by_id else f"no workspace named {ref!r}")
    return row[0]


def name_free(conn: psycopg.Connection, name: str, but: uuid.UUID | None = None) -> None:
    """ALREADY_EXISTS when a workspace other than ``but`` has ``name`` (case-insensitively), naming
    it as it is stored, and saying so when it is being deleted."""
    row = conn.execute("SELECT id, name, deleted_at FROM workspace WHERE lower(name) = lower(%s)", (name,)).fetchone()
    if row is not None and row[0] != but:
        raise NameTaken(row[1], deleting=row[2] is not None)


def member_ref(conn: psycopg.Connection, ws: uuid.UUID, ref: str) -> uuid.UUID:
    """The id of the member of workspace ``ws`` that ``ref`` names: its id, or else its display name
    (case-insensitively, as workspace names) when exactly one member (removed ones too) has it.
    NOT_FOUND when none does (another workspace's member included); FAILED_PRECONDITION listing the
    ids when several do."""
    ref = (ref or "").strip()
    if not ref or len(ref) > 200 or "\x00" in ref:
        raise NotFound("member not found")
    by_id = as_uuid(ref)
    if by_id:
        rows = conn.execute("SELECT id FROM member WHERE id = %s AND workspace_id = %s", (by_id, ws)).fetchall()
    else:
        rows = conn.execute(
            "SELECT id FROM member WHERE workspace_id = %s AND lower(display_name) = lower(%s) ORDER BY created_at, id",
            (ws, ref),
        ).fetchall()
    if not rows:
        raise NotFound("member not found" if by_id else f"no member named {ref!r} in this workspace")
    if len(rows) > 1:
        raise FailedPrecondition(
            f"{len(rows)} members are named {ref!r}: give one of their ids ({', '.join(str(r[0]) for r in rows)})",
            field="member_id",
        )
    return rows[0][0]


# pg_advisory_lock(class, key) class of an operator's change of a whole workspace: a move or a
# deletion (one at a time per workspace; the key is hashtext of its id).
WHOLE_CLASS = 0x6D76


@contextmanager
def whole_workspace(conn: psycopg.Connection, ws: uuid.UUID, doing: str) -> Iterator[None]:
    """Holds the workspace's move-or-deletion lock on ``conn`` (a session lock) for the block;
    FAILED_PRECONDITION naming ``doing`` while another holds it."""
    if not conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (WHOLE_CLASS, str(ws))).fetchone()[0]:
        raise FailedPrecondition(
            f"a move, deletion or recovery of this workspace is running; {doing} once it ends (seconds for a recovery)"
        )
    try:
        yield
    finally:
        try:
            conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (WHOLE_CLASS, str(ws)))
        except psycopg.Error:  # the session ended, and its lock with it: the block's own outcome stands
            log.warning("the lock of workspace %s had gone with its session", ws)


def whole_lock_held(workspace_id: str) -> str:
    """An SQL condition on a ``pg_locks l`` row: it is the granted move-or-deletion lock of the
    workspace whose id the SQL expression ``workspace_id`` gives (``pg_advisory_lock(int4, int4)``
    keeps its keys in classid and objid, unsigned, with objsubid 2)."""
    return (
        f"l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid::bigint = {WHOLE_CLASS} "
        f"AND l.objid::bigint = hashtext({workspace_id})::bigint & 4294967295"
    )


def whole_lock_running(workspace_id: str) -> str:
    """An SQL expression: whether any session holds the move-or-deletion lock of the workspace whose
    id the SQL expression ``workspace_id`` gives, on the control plane's database (advisory locks
    are per database, and pg_locks lists every database's)."""
    return (
        f"EXISTS (SELECT 1 FROM pg_locks l WHERE {whole_lock_held(workspace_id)}"
        " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))"
    )


def holds_whole(conn: psycopg.Connection, ws: uuid.UUID) -> bool:
    """Whether ``conn``'s session (alive) still holds the workspace's move-or-deletion lock."""
    held = whole_lock_held("%s")
    try:
        return bool(
            conn.execute(
                f"SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE {held} AND l.pid = pg_backend_pid())", (str(ws),)
            ).fetchone()[0]
        )
    except psycopg.Error:
        return False


def token_digest(token: str) -> bytes:
    """SHA-256 of a token: the only form in which a token is stored."""
    return hashlib.sha256(token.encode("utf-8")).digest()


class ControlPlane:
    """Workspace and member administration over the control-plane database."""

    def __init__(self, dbs: Databases) -> None:
        self.dbs = dbs

    def create_workspace(
        self, name: str, server: str = "", wanted: Callable[[], bool] = lambda: True
    ) -> tuple[uuid.UUID, str]:
        """Creates the workspace row and its database, on ``server`` or else where ``place`` puts it;
        returns its id and the server's configured name.
        INVALID_ARGUMENT for a bad name or an unknown server, UNAVAILABLE for a server that is not
        serving, ALREADY_EXISTS for a name another workspace has (case-insensitively), checked
        before and enforced after the database is made (a race that loses drops the database it
        made). When ``wanted()`` turns false while the database is made (the caller gave up: a
        server that hung, say), the database is dropped and no workspace appears later."""
        name = check_workspace_name(name)
        with self.dbs.control.connection() as conn:
            name_free(conn, name)
            chosen = self._check_server(server) if server else self.place(conn)
        if not self.dbs.serving(chosen):
            raise WorkspaceUnavailable(f"database server {chosen} is not serving now; retry later, or choose another")
        ws_id = uuid.uuid4()
        db_name = new_db_name(ws_id)
        stored = None if chosen == self.dbs.control_server else chosen
        try:
            self.dbs.create_workspace_db(db_name, stored or "")
        except psycopg.OperationalError as exc:
            log.warning("workspace database %s not created on server %r: %s", db_name, chosen, exc)
            self._drop_unused(db_name, stored)
            raise WorkspaceUnavailable(f"database server {chosen} did not create the database; retry later") from None
        if not wanted():
            self._drop_unused(db_name, stored)
            raise WorkspaceUnavailable("the workspace was not created: the call ended while its database was made")
        try:
            with self.dbs.control.connection() as conn:
                conn.execute(
                    "INSERT INTO workspace (id, name, db_name, server) VALUES (%s, %s, %s, %s)",
                    (ws_id, name, db_name, stored),
                )
        except psycopg.errors.UniqueViolation:
            self.dbs.drop_workspace_db(db_name, stored or "")
            raise NameTaken(name) from None
        return ws_id, chosen

    def _drop_unused(self, db_name: str, server: str | None) -> None:
        """Drops a database made for a workspace that was not created; one the server does not let
        go of now is logged by name for the operator (no row names it, so nothing uses it)."""
        try:
            self.dbs.drop_workspace_db(db_name, server or "")
        except psycopg.Error as exc:
            log.warning(
                "workspace database %s may be left on server %r (if it exists, no workspace uses it: drop it): %s",
                db_name,
                server,
                exc,
            )

    def _check_server(self, server: str) -> str:
        if server not in self.dbs.servers:
            raise InvalidArgument(
                f"no database server named {server!r}; configured: {', '.join(self.dbs.servers)}", field="server"
            )
        return server

    def place(self, conn: psycopg.Connection) -> str:
        """Where a new workspace goes when none is asked for (docs/scaling.md): of the servers that
        serve now, the one with the fewest workspaces, the first configured on a tie (the control
        plane's server first); the control plane's server when none other serves."""
        counts = dict(
            conn.execute(
                "SELECT coalesce(server, %s), count(*) FROM workspace WHERE deleted_at IS NULL GROUP BY 1",
                (self.dbs.control_server,),
            ).fetchall()
        )
        serving = [name for name, ok in self.dbs.server_status() if ok] or [self.dbs.control_server]
        return min(serving, key=lambda name: (counts.get(name, 0), list(self.dbs.servers).index(name)))

    def add_member(self, workspace_id: str, role: int, purposes: list[int], display_name: str) -> tuple[uuid.UUID, str]:
        """Adds a member and issues a token granted ``purposes`` (all four when empty)."""
        role_name = "member" if role == m.ROLE_UNSPECIFIED else enum_value(ROLES, role, "role")
        granted = sorted({enum_value(PURPOSES, p, "purposes") for p in purposes}) or sorted(PURPOSES.values())
        member_id, cred_id = uuid.uuid4(), uuid.uuid4()
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        display_name = check_display_name(display_name)
        with self.dbs.control.connection() as conn, conn.transaction():
            ws = workspace_ref(conn, workspace_id, lock=True)  # a deletion waits, or is seen
            conn.execute(
                "INSERT INTO member (id, workspace_id, role, display_name) VALUES (%s, %s, %s, %s)",
                (member_id, ws, role_name, display_name),
            )
            conn.execute(
                "INSERT INTO credential (id, member_id, token_sha256, purposes) VALUES (%s, %s, %s, %s)",
                (cred_id, member_id, token_digest(token), granted),
            )
        return member_id, token

    def revoke_member(self, workspace_id: str, member_id: str, token: str = "") -> int:
        """Revokes every live credential of a member, or only ``token`` when given; NOT_FOUND for an
        unknown member, or a token that is not the member's."""
        with self.dbs.control.connection() as conn, conn.transaction():
            mem = member_ref(conn, workspace_ref(conn, workspace_id), member_id)
            if not token:
                cur = conn.execute(
                    "UPDATE credential SET revoked_at = now() WHERE member_id = %s AND revoked_at IS NULL", (mem,)
                )
                return cur.rowcount
            if len(token) > MAX_TOKEN_CHARS:
                raise NotFound("no such token of this member")
            row = conn.execute(
                """UPDATE credential SET revoked_at = coalesce(revoked_at, now())
                    WHERE member_id = %s AND token_sha256 = %s RETURNING revoked_at = now()""",
                (mem, token_digest(token)),
            ).fetchone()
            if row is None:
                raise NotFound("no such token of this member")
            return 1 if row[0] else 0

    def remove_member(self, workspace_id: str, member_id: str) -> Removal:
        """Marks a member removed and revokes every live credential of it, in one transaction, so its
        next call with any token is UNAUTHENTICATED. Running it again revokes nothing more and says
        ``already_removed``. NOT_FOUND for an unknown workspace or a member not in it (malformed ids
        too, as ``revoke_member``). Forgetting the member's memories and history is the caller's
        next step (store_service/control/members.py)."""
        with self.dbs.control.connection() as conn, conn.transaction():
            ws = workspace_ref(conn, workspace_id)
            mem = member_ref(conn, ws, member_id)
            row = (
                named(conn)
                .execute(
                    """SELECT mb.role, mb.removed_at, w.db_name, w.server
                         FROM member mb JOIN workspace w ON w.id = mb.workspace_id
                        WHERE mb.id = %s AND mb.workspace_id = %s FOR UPDATE OF mb""",
                    (mem, ws),
                )
                .fetchone()
            )
            if row is None:
                raise NotFound("member not found")
            conn.execute("UPDATE member SET removed_at = coalesce(removed_at, now()) WHERE id = %s", (mem,))
            revoked = conn.execute(
                "UPDATE credential SET revoked_at = now() WHERE member_id = %s AND revoked_at IS NULL", (mem,)
            ).rowcount
        caller = m.Caller(
            workspace_id=str(ws),
            member_id=str(mem),
            role=ROLE_OF[row.role],
            granted_purposes=sorted(PURPOSE_OF.values()),
        )
        return Removal(caller, row.db_name, row.server or "", revoked, row.removed_at is not None)

    def authenticate(self, token: str) -> tuple[m.Caller, Workspace]:
        """Resolves a bearer token; UNAUTHENTICATED for an unknown, revoked or malformed one."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            raise Unauthenticated("missing or invalid token")
        with self.dbs.control.connection() as conn, one_statement(conn):  # every call asks this
            row = (
                named(conn)
                .execute(
                    """SELECT w.id, w.db_name, w.dense_floor, w.default_mode, w.context_bundle, w.expiry_days,
                            w.inject_gate, w.inject_min_cosine, w.server, mb.id AS member_id, mb.role, c.purposes
                     FROM credential c JOIN member mb ON mb.id = c.member_id JOIN workspace w ON w.id = mb.workspace_id
                    WHERE c.token_sha256 = %s AND c.revoked_at IS NULL AND mb.removed_at IS NULL
                      AND w.deleted_at IS NULL""",
                    (token_digest(token),),
                )
                .fetchone()
            )
        if row is None:
            raise Unauthenticated("missing or invalid token")
        caller = m.Caller(
            workspace_id=str(row.id),
            member_id=str(row.member_id),
            role=ROLE_OF[row.role],
            granted_purposes=[PURPOSE_OF[p] for p in row.purposes],
        )
        return caller, workspace_of(row)

    def update_settings(
        self,
        workspace_id: str,
        dense_floor: float | None,
        default_mode: int,
        context_bundle: bool | None = None,
        expiry_days: int | None = None,
        inject: tuple[str | None, float | None] | None = None,
    ) -> Workspace:
        """Changes a workspace's floor, default mode, context bundle switch, expiry gate and/or
        relevance gate (None and unspecified keep them; ``expiry_days`` 0 turns the gate off, 1..3650
        on, as ``expiry.gate_setting`` checked it; ``inject`` is a preset's short name or a minimum
        cosine, as ``inject_setting`` checked it); NOT_FOUND or INVALID_ARGUMENT as fits."""
        if dense_floor is not None and not 0.0 <= dense_floor <= 1.0:
            raise InvalidArgument("dense_floor must be between 0 and 1", field="dense_floor")
        mode = None if default_mode == m.RECALL_MODE_UNSPECIFIED else enum_value(MODES, default_mode, "default_mode")
        with self.dbs.control.connection() as conn:
            ws = workspace_ref(conn, workspace_id)
            row = (
                named(conn)
                .execute(
                    f"""UPDATE workspace
                       SET dense_floor = coalesce(%(floor)s, dense_floor),
                           default_mode = coalesce(%(mode)s, default_mode),
                           context_bundle = coalesce(%(bundle)s, context_bundle),
                           expiry_days = CASE WHEN %(expiry)s::int IS NULL THEN expiry_days
                                              ELSE nullif(%(expiry)s::int, 0) END,
                           inject_gate = CASE WHEN %(inject)s THEN %(preset)s::text ELSE inject_gate END,
                           inject_min_cosine = CASE WHEN %(inject)s THEN %(cosine)s::float8 ELSE inject_min_cosine END
                     WHERE id = %(ws)s RETURNING {WORKSPACE_COLUMNS}""",
                    {
                        "floor": dense_floor,
                        "mode": mode,
                        "bundle": context_bundle,
                        "expiry": expiry_days,
                        "inject": inject is not None,
                        "preset": inject[0] if inject else None,
                        "cosine": inject[1] if inject else None,
                        "ws": ws,
                    },
                )
                .fetchone()
            )
        if row is None:
            raise NotFound("workspace not found")
        return workspace_of(row)

    def workspace(self, workspace_id: str) -> Workspace:
        """Looks a workspace up by id or name; NOT_FOUND when unknown or being deleted."""
        with self.dbs.control.connection() as conn:
            ws = workspace_ref(conn, workspace_id)
            row = named(conn).execute(f"SELECT {WORKSPACE_COLUMNS} FROM workspace WHERE id = %s", (ws,)).fetchone()
        if row is None:
            raise NotFound("workspace not found")
        return workspace_of(row)

    def members(self, workspace_id: str, member_ids: set[uuid.UUID]) -> dict[uuid.UUID, m.Caller]:
        """Of ``member_ids``, the members of the workspace, each as a Caller (its role, every
        purpose): the identity an operator's import writes as. One query; NOT_FOUND for an unknown
        workspace. Revoked members are still members: their memories stay theirs."""
        ws = self.workspace(workspace_id)
        if not member_ids:
            return {}
        with self.dbs.control.connection() as conn:
            rows = (
                named(conn)
                .execute(
                    "SELECT id, role FROM member WHERE workspace_id = %s AND id = ANY(%s)", (ws.id, list(member_ids))
                )
                .fetchall()
            )
        return {
            r.id: m.Caller(
                workspace_id=str(ws.id),
                member_id=str(r.id),
                role=ROLE_OF[r.role],
                granted_purposes=sorted(PURPOSE_OF.values()),
            )
            for r in rows
        }

    def in_move(self, db_name: str, timeout: float | None = None) -> bool:
        """Whether a move of the workspace whose database is ``db_name`` is running now: recorded
        (``moving_to`` or ``moved_from``) and its move-or-deletion lock held (a recovery undoing it
        counts). It then ends the source's sessions on purpose (store_service/control/moves.py). A
        record a stopped move left, with no lock held, is not a move running. ``timeout``: the wait
        for a connection (the pool's own by default)."""
        with self.dbs.control.connection(timeout=timeout) as conn:
            row = conn.execute(
                f"""SELECT {whole_lock_running("w.id::text")} FROM workspace w
                     WHERE w.db_name = %s AND (w.moving_to IS NOT NULL OR w.moved_from IS NOT NULL)""",
                (db_name,),
            ).fetchone()
        return bool(row and row[0])

    def workspaces(self) -> list[Workspace]:
        """Every workspace not being deleted."""
        with self.dbs.control.connection() as conn:
            rows = (
                named(conn)
                .execute(f"SELECT {WORKSPACE_COLUMNS} FROM workspace WHERE deleted_at IS NULL ORDER BY created_at")
                .fetchall()
            )
        return [workspace_of(r) for r in rows]


def inject_setting(req) -> tuple[str | None, float | None] | None:
    """The relevance gate an UpdateWorkspaceSettingsRequest asks for: None to keep it, else
    ``(preset, None)`` or ``(None, min_cosine)``. INVALID_ARGUMENT for an unspecified or unknown
    preset, or a cosine outside 0..1 (NaN included)."""
    which = req.WhichOneof("inject")
    if which is None:
        return None
    if which == "inject_gate":
        presets = vocabulary.names(m.InjectGate)
        if req.inject_gate not in presets:
            raise InvalidArgument(
                f"inject_gate must be one of {', '.join(presets.values())} (or set inject_min_cosine, 0..1)",
                field="inject_gate",
            )
        return presets[req.inject_gate], None
    if not 0.0 <= req.inject_min_cosine <= 1.0:
        raise InvalidArgument("inject_min_cosine must be between 0 and 1", field="inject_min_cosine")
    return None, req.inject_min_cosine
