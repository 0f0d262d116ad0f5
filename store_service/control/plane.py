"""Control plane: workspaces, members, credentials and authentication."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass

from recallatron.memory.v1 import memory_pb2 as m

from servicekit import relevance_gate, vocabulary
from servicekit.errors import InvalidArgument, NotFound, Unauthenticated
from store_service.database import Databases, named, new_db_name
from store_service.vocabulary import MODE_OF, MODES, PURPOSE_OF, PURPOSES, ROLE_OF, ROLES, enum_value, parse_uuid

TOKEN_PREFIX = "rct_"
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


# The columns of a workspace row, as ``_workspace`` reads them.
WORKSPACE_COLUMNS = (
    "id, db_name, dense_floor, default_mode, context_bundle, expiry_days, inject_gate, inject_min_cosine"
)


def _workspace(row) -> Workspace:
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
    )


@dataclass(frozen=True)
class Removal:
    """What ``ControlPlane.remove_member`` did: the member as a Caller (its role, every purpose: the
    identity its memories are forgotten as), its workspace's database, the tokens revoked now, and
    whether an earlier call had removed it already."""

    caller: m.Caller
    db_name: str
    revoked: int
    already_removed: bool


def token_digest(token: str) -> bytes:
    """SHA-256 of a token: the only form in which a token is stored."""
    return hashlib.sha256(token.encode("utf-8")).digest()


class ControlPlane:
    """Workspace and member administration over the control-plane database."""

    def __init__(self, dbs: Databases) -> None:
        self.dbs = dbs

    def create_workspace(self, name: str) -> uuid.UUID:
        """Creates the workspace row and its database. INVALID_ARGUMENT for a bad name."""
        name = name.strip()
        if not 1 <= len(name) <= 200 or "\x00" in name:
            raise InvalidArgument("workspace name must be 1..200 characters", field="name")
        ws_id = uuid.uuid4()
        db_name = new_db_name(ws_id)
        self.dbs.create_workspace_db(db_name)
        with self.dbs.control.connection() as conn:
            conn.execute("INSERT INTO workspace (id, name, db_name) VALUES (%s, %s, %s)", (ws_id, name, db_name))
        return ws_id

    def add_member(self, workspace_id: str, role: int, purposes: list[int], display_name: str) -> tuple[uuid.UUID, str]:
        """Adds a member and issues a token granted ``purposes`` (all four when empty)."""
        ws = parse_uuid(workspace_id, "workspace_id", missing_is_not_found=True)
        role_name = "member" if role == m.ROLE_UNSPECIFIED else enum_value(ROLES, role, "role")
        granted = sorted({enum_value(PURPOSES, p, "purposes") for p in purposes}) or sorted(PURPOSES.values())
        if len(display_name) > 200 or "\x00" in display_name:
            raise InvalidArgument("display_name must be at most 200 characters", field="display_name")
        member_id, cred_id = uuid.uuid4(), uuid.uuid4()
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        with self.dbs.control.connection() as conn, conn.transaction():
            if conn.execute("SELECT 1 FROM workspace WHERE id = %s", (ws,)).fetchone() is None:
                raise NotFound("workspace not found")
            conn.execute(
                "INSERT INTO member (id, workspace_id, role, display_name) VALUES (%s, %s, %s, %s)",
                (member_id, ws, role_name, display_name),
            )
            conn.execute(
                "INSERT INTO credential (id, member_id, token_sha256, purposes) VALUES (%s, %s, %s, %s)",
                (cred_id, member_id, token_digest(token), granted),
            )
        return member_id, token

    def revoke_member(self, workspace_id: str, member_id: str) -> int:
        """Revokes every live credential of a member; NOT_FOUND for an unknown member."""
        ws = parse_uuid(workspace_id, "workspace_id", missing_is_not_found=True)
        mem = parse_uuid(member_id, "member_id", missing_is_not_found=True)
        with self.dbs.control.connection() as conn, conn.transaction():
            if conn.execute("SELECT 1 FROM member WHERE id = %s AND workspace_id = %s", (mem, ws)).fetchone() is None:
                raise NotFound("member not found")
            cur = conn.execute(
                "UPDATE credential SET revoked_at = now() WHERE member_id = %s AND revoked_at IS NULL", (mem,)
            )
            return cur.rowcount

    def remove_member(self, workspace_id: str, member_id: str) -> Removal:
        """Marks a member removed and revokes every live credential of it, in one transaction, so its
        next call with any token is UNAUTHENTICATED. Running it again revokes nothing more and says
        ``already_removed``. NOT_FOUND for an unknown workspace or a member not in it (malformed ids
        too, as ``revoke_member``). Forgetting the member's memories and history is the caller's
        next step (store_service/control/members.py)."""
        ws = parse_uuid(workspace_id, "workspace_id", missing_is_not_found=True)
        mem = parse_uuid(member_id, "member_id", missing_is_not_found=True)
        with self.dbs.control.connection() as conn, conn.transaction():
            row = (
                named(conn)
                .execute(
                    """SELECT mb.role, mb.removed_at, w.db_name
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
        return Removal(caller, row.db_name, revoked, row.removed_at is not None)

    def authenticate(self, token: str) -> tuple[m.Caller, Workspace]:
        """Resolves a bearer token; UNAUTHENTICATED for an unknown, revoked or malformed one."""
        if not token or len(token) > MAX_TOKEN_CHARS:
            raise Unauthenticated("missing or invalid token")
        with self.dbs.control.connection() as conn:
            row = (
                named(conn)
                .execute(
                    """SELECT w.id, w.db_name, w.dense_floor, w.default_mode, w.context_bundle, w.expiry_days,
                            w.inject_gate, w.inject_min_cosine, mb.id AS member_id, mb.role, c.purposes
                     FROM credential c JOIN member mb ON mb.id = c.member_id JOIN workspace w ON w.id = mb.workspace_id
                    WHERE c.token_sha256 = %s AND c.revoked_at IS NULL AND mb.removed_at IS NULL""",
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
        return caller, _workspace(row)

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
        ws = parse_uuid(workspace_id, "workspace_id", missing_is_not_found=True)
        if dense_floor is not None and not 0.0 <= dense_floor <= 1.0:
            raise InvalidArgument("dense_floor must be between 0 and 1", field="dense_floor")
        mode = None if default_mode == m.RECALL_MODE_UNSPECIFIED else enum_value(MODES, default_mode, "default_mode")
        with self.dbs.control.connection() as conn:
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
        return _workspace(row)

    def workspace(self, workspace_id: str) -> Workspace:
        """Looks a workspace up by id; NOT_FOUND when unknown."""
        ws = parse_uuid(workspace_id, "workspace_id", missing_is_not_found=True)
        with self.dbs.control.connection() as conn:
            row = named(conn).execute(f"SELECT {WORKSPACE_COLUMNS} FROM workspace WHERE id = %s", (ws,)).fetchone()
        if row is None:
            raise NotFound("workspace not found")
        return _workspace(row)

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

    def workspaces(self) -> list[Workspace]:
        """Every workspace."""
        with self.dbs.control.connection() as conn:
            rows = named(conn).execute(f"SELECT {WORKSPACE_COLUMNS} FROM workspace ORDER BY created_at").fetchall()
        return [_workspace(r) for r in rows]


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
