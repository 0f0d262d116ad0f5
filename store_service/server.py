"""The store service: gRPC front of the control plane, the memory operations and the candidate queries."""

from __future__ import annotations

import logging
import threading
from collections import Counter

import grpc
import psycopg
from psycopg_pool import PoolTimeout
from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc

from servicekit import clients, deadlines
from servicekit.breaker import CircuitBreaker
from servicekit.caller import PURPOSE_NAMES, narrow
from servicekit.errors import (
    MOVING_MESSAGE,
    InvalidArgument,
    NotFound,
    Unavailable,
    WorkspaceMoving,
    WorkspaceUnavailable,
    status_proto_for,
)
from servicekit.limits import EMBED_BATCH_SIZE, SHUTDOWN_GRACE_SECONDS
from servicekit.server import Running, start_server
from store_service.access import expiry
from store_service.control import deletion, members, moves, names
from store_service.control.directory import Directory
from store_service.control.plane import ControlPlane, Workspace, inject_setting, settings_fields
from store_service.curation import entity_review, review
from store_service.database import Databases, DroppedDatabase, MissingDatabase, session_lost
from store_service.embedding.job import EMBED_TIMEOUT_SECONDS, EmbeddingWorker, requeue
from store_service.history import turn_search, turns
from store_service.intake import capture, imports
from store_service.records import (
    conflict_flags,
    context,
    entities,
    entity_groups,
    entity_pages,
    expiring,
    lifecycle,
    listing,
    memories,
    pins,
    prompt_sessions,
    validity,
    windows,
)
from store_service.search import answers
from store_service.vocabulary import parse_uuid

log = logging.getLogger(__name__)


def _settings(ws: Workspace) -> s.WorkspaceSettings:
    """A workspace's settings as the store's messages carry them."""
    return s.WorkspaceSettings(**settings_fields(ws))


class StoreServicer(store_pb2_grpc.StoreServiceServicer):
    """Implements recallatron.store.v1.StoreService over PostgreSQL."""

    def __init__(self, dbs: Databases, worker: EmbeddingWorker | None = None) -> None:
        self.dbs = dbs
        self.control = ControlPlane(dbs)
        self.directory = Directory(dbs)
        self.worker = worker
        self._workspaces: dict[str, Workspace] = {}
        self._ws_lock = threading.Lock()

    def _workspace(self, caller: m.Caller) -> Workspace:
        """The caller's workspace row, cached by id (an operator's call may name the workspace, and a
        name can move to another workspace, so a name is looked up every time). A workspace moved to
        another server by another store process is found again when a call fails in its old
        database (``_rerouting``)."""
        key = caller.workspace_id
        with self._ws_lock:
            ws = self._workspaces.get(key)
        if ws is None:
            ws = self.control.workspace(key)
            if key == str(ws.id):
                with self._ws_lock:
                    self._workspaces[key] = ws
        return ws

    def _in_move(self, caller: m.Caller) -> bool:
        """Whether a move of the caller's workspace is running (``ControlPlane.in_move``); False when
        that cannot be known (the control plane failing too, or known down: no wait on its pool)."""
        if self.dbs.health.down:
            return False
        try:
            return self.control.in_move(self._workspace(caller).db_name, timeout=MOVE_CHECK_WAIT_SECONDS)
        except (psycopg.Error, PoolTimeout, NotFound):
            return False

    def _conn(self, caller: m.Caller):
        """A pooled connection to the caller's workspace database."""
        ws = self._workspace(caller)
        return self.dbs.workspace(ws.db_name, ws.server).connection()

    # Control plane.
    def ListWorkspaces(self, request, context):
        found, token = self.directory.list_workspaces(request.page_size, request.page_token)
        return s.ListWorkspacesResponse(workspaces=found, next_page_token=token)

    def GetWorkspace(self, request, context):
        return s.GetWorkspaceResponse(workspace=self.directory.get_workspace(request.workspace_id))

    def RenameWorkspace(self, request, context):
        return s.RenameWorkspaceResponse(workspace=self.directory.rename_workspace(request.workspace_id, request.name))

    def DeleteWorkspace(self, request, context):
        response, db_name = deletion.delete(self.dbs, request.workspace_id)
        with self._ws_lock:
            self._workspaces.pop(response.workspace_id, None)
        if self.worker is not None:
            self.worker.forget_db(db_name)
        return response

    def MoveWorkspace(self, request, context):
        response = moves.move(self.dbs, request.workspace_id, request.server, self.forget_workspace)
        if self.worker is not None:
            ws = self.control.workspace(response.workspace_id)
            self.worker.wake(ws.db_name, ws.server)  # its jobs moved with it
        return response

    def forget_workspace(self, workspace_id: str) -> None:
        """Drops the cached row of a workspace, so the next call reads where it is now."""
        with self._ws_lock:
            self._workspaces.pop(workspace_id, None)

    def ListMembers(self, request, context):
        found, token = self.directory.list_members(request.workspace_id, request.page_size, request.page_token)
        return s.ListMembersResponse(members=found, next_page_token=token)

    def IssueMemberToken(self, request, context):
        token, member, revoked = self.directory.issue_token(
            request.workspace_id, request.member_id, list(request.purposes), request.revoke_others
        )
        return s.IssueMemberTokenResponse(token=token, member_id=str(member), revoked=revoked)

    def RenameMember(self, request, context):
        return s.RenameMemberResponse(
            member=self.directory.rename_member(request.workspace_id, request.member_id, request.display_name)
        )

    def CreateWorkspace(self, request, context):
        ws, server = self.control.create_workspace(request.name, request.server, wanted=context.is_active)
        return s.CreateWorkspaceResponse(workspace_id=str(ws), server=server)

    def AddMember(self, request, context):
        member_id, token = self.control.add_member(
            request.workspace_id, request.role, list(request.purposes), request.display_name
        )
        return s.AddMemberResponse(member_id=str(member_id), token=token)

    def RevokeMember(self, request, context):
        revoked = self.control.revoke_member(request.workspace_id, request.member_id, request.token)
        return s.RevokeMemberResponse(revoked=revoked)

    def RemoveMember(self, request, context):
        response = members.remove(self.control, self.dbs, request.workspace_id, request.member_id)
        if response.forgotten_ids:  # what they superseded may be current again, to embed
            self._wake(m.Caller(workspace_id=request.workspace_id))
        return response

    def Authenticate(self, request, context):
        caller, ws = self.control.authenticate(request.token)
        return s.AuthenticateResponse(caller=caller, settings=_settings(ws))

    # Memory operations.
    def Remember(self, request, context):
        with self._conn(request.caller) as conn:
            memory = memories.remember(conn, request)
        self._wake(request.caller)
        return s.RememberResponse(memory=memory)

    def RememberBatch(self, request, context):
        memories.check_batch_size(len(request.requests))  # before taking a connection
        with self._conn(request.caller) as conn:
            results = memories.remember_batch(conn, request.caller, request.requests)
        self._wake(request.caller)
        return s.RememberBatchResponse(
            results=[
                s.RememberBatchResult(error=status_proto_for(r))
                if isinstance(r, Exception)
                else s.RememberBatchResult(memory=r)
                for r in results
            ]
        )

    def Read(self, request, context):
        with self._conn(request.caller) as conn:
            memory = memories.read(conn, request)
        return s.ReadResponse(memory=memory, may_change=lifecycle.may_change_memory(request.caller, memory))

    def GetMemories(self, request, context):
        with self._conn(request.caller) as conn:
            found = memories.get_memories(conn, request.caller, request.memory_ids)
            validity.then(conn, found, windows.instant(request, "known_at"))
            return s.GetMemoriesResponse(memories=found)

    def ListMemories(self, request, context):
        with self._conn(request.caller) as conn:
            return listing.list_memories(conn, request.caller, request)

    def ListExpiringMemories(self, request, context):
        with self._conn(request.caller) as conn:
            return expiring.list_expiring(conn, request.caller, request)

    def KeepMemory(self, request, context):
        with self._conn(request.caller) as conn:
            return s.KeepMemoryResponse(memory=lifecycle.keep(conn, request))

    def LexicalCandidates(self, request, context):
        if not (request.token or request.narrowed_purposes):
            return self._lexical_candidates(request, context)
        resolved, auth = self._authenticated(request)
        response = self._lexical_candidates(resolved, context)
        response.caller.CopyFrom(auth.caller)
        response.settings.CopyFrom(auth.settings)
        return response

    def _lexical_candidates(self, request, context):
        """LexicalCandidates for the request's caller (rerouted as every call, ``_rerouting``)."""
        answer = answers.lexical(request)  # the request checked before a connection is taken
        with self._conn(request.caller) as conn:
            return answer(conn)

    def _authenticated(self, request: s.LexicalCandidatesRequest):
        """A keyword request that carries its token (a recall's authentication folded into its first
        store call): the same request for the caller the token resolves to, narrowed as it asks, under
        its workspace's expiry gate, and that AuthenticateResponse. UNAUTHENTICATED first, as
        Authenticate; INVALID_ARGUMENT for a caller or gate sent beside the token, or a narrowing
        without one."""
        if not request.token:
            raise InvalidArgument("narrowed_purposes needs a token", field="narrowed_purposes")
        caller, ws = self.control.authenticate(request.token)
        if request.HasField("caller") or request.expiry_days:
            field = "caller" if request.HasField("caller") else "expiry_days"
            raise InvalidArgument(f"{field} must be unset when the request carries a token", field=field)
        if request.narrowed_purposes:
            if len(request.narrowed_purposes) > len(PURPOSE_NAMES) or any(
                p not in PURPOSE_NAMES for p in request.narrowed_purposes
            ):
                raise InvalidArgument(
                    f"narrowed_purposes must name purposes ({', '.join(sorted(PURPOSE_NAMES.values()))}), "
                    f"at most {len(PURPOSE_NAMES)}",
                    field="narrowed_purposes",
                )
            narrow(caller, request.narrowed_purposes)
        resolved = s.LexicalCandidatesRequest()
        resolved.CopyFrom(request)
        resolved.ClearField("token")
        resolved.ClearField("narrowed_purposes")
        resolved.caller.CopyFrom(caller)
        resolved.expiry_days = ws.expiry_days
        return resolved, s.AuthenticateResponse(caller=caller, settings=_settings(ws))

    def DenseCandidates(self, request, context):
        answer = answers.dense(request)
        with self._conn(request.caller) as conn:
            return answer(conn)

    def Derive(self, request, context):
        with self._conn(request.caller) as conn:
            memory = lifecycle.derive(conn, request)
        self._wake(request.caller)
        return s.DeriveResponse(memory=memory)

    def Correct(self, request, context):
        with self._conn(request.caller) as conn:
            memory = lifecycle.correct(conn, request)
        self._wake(request.caller)
        return s.CorrectResponse(memory=memory)

    def Supersede(self, request, context):
        with self._conn(request.caller) as conn:
            memory = lifecycle.supersede(conn, request)
            flag = conflict_flags.of_pair(conn, request.memory_id, memory.id)
        self._wake(request.caller)
        return s.SupersedeResponse(memory=memory, conflict_flag_id=flag)

    def Invalidate(self, request, context):
        with self._conn(request.caller) as conn:
            return s.InvalidateResponse(memory=lifecycle.invalidate(conn, request))

    def Forget(self, request, context):
        with self._conn(request.caller) as conn:
            forgotten = lifecycle.forget(conn, request)
        self._wake(request.caller)  # what it superseded may be current again, to embed
        return s.ForgetResponse(forgotten_ids=forgotten)

    def FindEntities(self, request, context):
        with self._conn(request.caller) as conn:
            found = entities.find(conn, request.caller, request.name)
        return s.FindEntitiesResponse(entities=[entity_groups.to_entity(view, s.Entity) for view in found])

    def GetEntity(self, request, context):
        with self._conn(request.caller) as conn:
            return entity_pages.get_entity(conn, request)

    def MergeEntity(self, request, context):
        with self._conn(request.caller) as conn:
            return s.MergeEntityResponse(merge=entity_review.merge(conn, request))

    def UnmergeEntity(self, request, context):
        with self._conn(request.caller) as conn:
            first, *rest = entity_review.unmerge(conn, request)
        return s.UnmergeEntityResponse(merge=first, also_undone=rest)

    def ListEntityDuplicates(self, request, context):
        with self._conn(request.caller) as conn:
            return entity_review.list_duplicates(conn, request)

    # History evidence (owner-only; never a memory).
    def AppendHistory(self, request, context):
        turns.check_batch_size(len(request.turns))  # before taking a connection
        with self._conn(request.caller) as conn:
            results = turns.append(conn, request.caller, request.turns)
        return s.AppendHistoryResponse(
            results=[
                s.AppendHistoryResult(error=status_proto_for(r))
                if isinstance(r, Exception)
                else s.AppendHistoryResult(turn_id=str(r.turn_id), replayed=r.replayed)
                for r in results
            ]
        )

    def SearchHistory(self, request, context):
        with self._conn(request.caller) as conn:
            return turn_search.search(conn, request.caller, request)

    def ForgetHistory(self, request, context):
        with self._conn(request.caller) as conn:
            return s.ForgetHistoryResponse(forgotten_count=turns.forget(conn, request.caller, request))

    # Imports (operator-side, through AdminService).
    def ImportMemories(self, request, context):
        imports.check_sizes(len(request.entities), len(request.memories))  # before taking a connection
        ws = self.control.workspace(request.workspace_id)  # by id or name
        authors = self.control.members(str(ws.id), imports.author_ids(request.memories))
        some = m.Caller(workspace_id=str(ws.id))
        with self._conn(some) as conn:
            ents, mems = imports.import_items(conn, authors, request.entities, request.memories, request.validate_only)
        if not request.validate_only:
            self._wake(some)

        def result(key: str, out: imports.Outcome) -> m.ImportResult:
            return m.ImportResult(
                import_key=key,
                id=str(out.id) if out.id else "",
                status=out.status,
                error=status_proto_for(out.error) if out.error else None,
            )

        return s.ImportMemoriesResponse(
            entities=[result(e.import_key, o) for e, o in zip(request.entities, ents, strict=True)],
            memories=[result(x.import_key, o) for x, o in zip(request.memories, mems, strict=True)],
        )

    def ImportHistory(self, request, context):
        turns.check_batch_size(len(request.turns))  # before taking a connection
        member = parse_uuid(request.member_id, "member_id", missing_is_not_found=True)
        caller = self.control.members(str(self.control.workspace(request.workspace_id).id), {member}).get(member)
        if caller is None:
            raise NotFound(f"member {request.member_id} is not a member of this workspace", field="member_id")
        resp = self.AppendHistory(s.AppendHistoryRequest(caller=caller, turns=request.turns), context)
        return s.ImportHistoryResponse(results=resp.results)

    # The context bundle and capture (issue 11).
    def PinMemory(self, request, context):
        with self._conn(request.caller) as conn:
            return pins.pin(conn, request.caller, request.memory_id)

    def UnpinMemory(self, request, context):
        with self._conn(request.caller) as conn:
            return pins.unpin(conn, request.caller, request.memory_id)

    def GetContext(self, request, context_):
        with self._conn(request.caller) as conn:
            return s.GetContextResponse(
                entries=context.bundle(conn, request.caller, request.purpose, request.expiry_days, windows.of(request))
            )

    def Capture(self, request, context):
        with self._conn(request.caller) as conn:
            response = capture.capture(conn, request)
        if any(r.HasField("memory") for r in response.results) and not response.replayed:
            self._wake(request.caller)
        return response

    # PromptContext's session memory (store_service/records/prompt_sessions.py).
    def ShownInSession(self, request, context):
        with self._conn(request.caller) as conn:
            return prompt_sessions.shown(conn, request)

    def RecordShown(self, request, context):
        with self._conn(request.caller) as conn:
            return prompt_sessions.record(conn, request)

    # Curation: duplicate proposals and conflict flags (issue 9; store_service/curation/review.py).
    def ListDuplicateProposals(self, request, context):
        with self._conn(request.caller) as conn:
            return review.list_duplicates(conn, request)

    def DecideDuplicateProposal(self, request, context):
        with self._conn(request.caller) as conn:
            return review.decide(conn, request)

    def ListConflictFlags(self, request, context):
        with self._conn(request.caller) as conn:
            return review.list_flags(conn, request)

    def ResolveConflictFlag(self, request, context):
        with self._conn(request.caller) as conn:
            response = review.resolve(conn, request)
        if response.HasField("restored"):
            self._wake(request.caller)
        return response

    def _wake(self, caller: m.Caller | None) -> None:
        """Tells the embedding worker that the caller's workspace (None: any) has new jobs."""
        if self.worker:
            if caller is None:
                self.worker.wake(None)
            else:
                ws = self._workspace(caller)
                self.worker.wake(ws.db_name, ws.server)

    def UpdateWorkspaceSettings(self, request, context):
        ws = self.control.update_settings(
            request.workspace_id,
            request.dense_floor if request.HasField("dense_floor") else None,
            request.default_mode,
            request.context_bundle if request.HasField("context_bundle") else None,
            expiry.gate_setting(request),
            inject_setting(request),
        )
        return s.UpdateWorkspaceSettingsResponse(settings=_settings(ws))

    def RebuildEmbeddings(self, request, context):
        if self.worker is None:
            raise Unavailable("no embedding worker in this store")
        try:
            version = self.worker.current_version()
        except grpc.RpcError as exc:
            raise Unavailable("the embed service is unavailable, so the current input version is unknown") from exc
        queued = 0
        for ws in self.control.workspaces():
            try:
                with self.dbs.workspace(ws.db_name, ws.server).connection() as conn:
                    queued += requeue(conn, version, request.all)
            except NotFound:  # deleted since it was listed
                continue
        self._wake(None)
        return s.RebuildEmbeddingsResponse(queued=queued, input_version=version)

    def GetStatus(self, request, context):
        try:
            total = self.worker.backlog() if self.worker else 0
            placed = self.control.workspaces()
        except psycopg.Error as exc:
            raise Unavailable("database unavailable") from exc
        counts = Counter(self.dbs.server_name(ws.server) for ws in placed)
        servers = [
            m.DatabaseServerStatus(
                name=name, serving=serving, workspaces=counts[name], control_plane=name == self.dbs.control_server
            )
            for name, serving in self.dbs.server_status()
        ]
        return s.GetStatusResponse(
            database_ok=True, embedding_backlog=total, workspaces=len(placed), database_servers=servers
        )


def _naming(method):
    """``method`` answering with the display names of the members its answer names
    (store_service/control/names.py), looked up in the workspace of the call."""

    def handler(self, request, context):
        response = method(self, request, context)
        if "caller" in request.DESCRIPTOR.fields_by_name:
            workspace = request.caller.workspace_id
            if not workspace and "caller" in response.DESCRIPTOR.fields_by_name:
                workspace = response.caller.workspace_id  # the caller a request's token resolved to
        else:
            workspace = getattr(request, "workspace_id", "")
        if workspace:
            names.fill(response, lambda ids: self.directory.names(workspace, ids))
        return response

    handler.__name__ = handler.__qualname__ = method.__name__
    handler.__doc__ = method.__doc__
    return handler


# Calls that only read, so that a session of theirs lost (``session_lost``) while their workspace
# is being moved leaves nothing half done: they are made once more. A move ends every session of the
# source (``moves._end_sessions``), and one lent to a read a moment before would fail the read
# although the source still answers reads. A write is not made again: its session may have ended at
# its COMMIT. Outside a move a lost session is a server's trouble, said at once (no wait on a pool).
READS = frozenset(
    {
        "Read",
        "GetMemories",
        "ListMemories",
        "ListExpiringMemories",
        "_lexical_candidates",
        "DenseCandidates",
        "FindEntities",
        "GetEntity",
        "ListEntityDuplicates",
        "SearchHistory",
        "GetContext",
        "ShownInSession",
        "ListDuplicateProposals",
        "ListConflictFlags",
    }
)


# How long a read whose session was lost waits for a control-plane connection to ask whether a move
# runs: the answer only decides a second attempt, and a control plane that cannot lend one soon is
# trouble of its own.
MOVE_CHECK_WAIT_SECONDS = 0.5


def _rerouting(method):
    """``method`` forgetting the cached row of the call's workspace when it fails in the database
    (the workspace may have been moved, store_service/control/moves.py), made once more when its
    database is not there (before anything ran in it) or, for a read (``READS``), its session was
    lost during a move of its workspace, so the call finds where the workspace is now, and saying
    what failed: the workspace's database, read-only while it is
    moved (WorkspaceMoving) or on a server that does not answer while the control plane's does
    (WorkspaceUnavailable), so the gateway's circuit breaker does not count one workspace's trouble
    against the whole store."""

    read = method.__name__ in READS

    def again(self, request, exc: BaseException) -> bool:
        if isinstance(exc, (MissingDatabase, DroppedDatabase)):
            return True
        left = deadlines.remaining()
        return read and session_lost(exc) and (left is None or left > 0) and self._in_move(request.caller)

    def handler(self, request, context):
        for attempt in (1, 2):
            try:
                return method(self, request, context)
            except (psycopg.Error, PoolTimeout, NotFound) as exc:
                # No workspace named (a request that carried its token fails before it has one): the
                # failure is the control plane's, reported as it is.
                if "caller" not in request.DESCRIPTOR.fields_by_name or not request.caller.workspace_id:
                    raise
                retry = attempt == 1 and again(self, request, exc)  # asked of the cached row, no lookup
                self.forget_workspace(request.caller.workspace_id)
                if retry:
                    continue
                if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
                    raise WorkspaceMoving(MOVING_MESSAGE) from exc
                if isinstance(exc, (psycopg.OperationalError, PoolTimeout)) and not self.dbs.health.down:
                    log.warning("workspace database unavailable: %s", exc)
                    raise WorkspaceUnavailable("the workspace's database is unavailable; retry later") from exc
                raise

    handler.__name__ = handler.__qualname__ = method.__name__
    handler.__doc__ = method.__doc__
    return handler


def _checking_caller(method):
    """``method`` refusing, before anything else, a caller whose member id is not a UUID, and taking
    one in its canonical spelling: the store's peers send the caller a token resolved to, so this is
    a peer's bug, said plainly (INVALID_ARGUMENT on ``caller.member_id``) rather than met deep in a
    query as INTERNAL or as a mismatch of spellings."""

    def handler(self, request, context):
        # A call that carries a token is checked by the token first (it refuses a caller beside one).
        if request.HasField("caller") and not getattr(request, "token", ""):
            # In the one spelling the queries compare as text (pins' lock keys, page tokens, merges).
            request.caller.member_id = str(parse_uuid(request.caller.member_id, "caller.member_id"))
        return method(self, request, context)

    handler.__name__ = handler.__qualname__ = method.__name__
    handler.__doc__ = method.__doc__
    return handler


# LexicalCandidates is rerouted inside, once its caller is known (a request that carried its token
# names its workspace only after authentication); wrapping it again would retry a missing database twice.
for _name, _rpc in s.DESCRIPTOR.services_by_name["StoreService"].methods_by_name.items():
    _method = getattr(StoreServicer, _name)
    _method = _method if _name == "LexicalCandidates" else _rerouting(_method)
    if "caller" in _rpc.input_type.fields_by_name:
        _method = _checking_caller(_method)
    setattr(StoreServicer, _name, _naming(_method))
StoreServicer._lexical_candidates = _rerouting(StoreServicer._lexical_candidates)


class StoreService:
    """A running store: database pools, the gRPC server, the embedding worker and a health watcher."""

    def __init__(
        self,
        database_url: str,
        bind: str,
        embed_addr: str,
        *,
        batch_size: int = EMBED_BATCH_SIZE,
        pool_max: int = 4,
        servers: dict[str, str] | None = None,
        control_server: str = "main",
    ) -> None:
        self.dbs = Databases(database_url, pool_max=pool_max, servers=servers, control_server=control_server)
        self.dbs.open()
        # The embedding job's calls skip a frozen or failing embed service (servicekit.breaker).
        self.embed_breaker = CircuitBreaker("embed", EMBED_TIMEOUT_SECONDS)
        embed_service = embed_pb2.DESCRIPTOR.services_by_name["EmbedService"].full_name
        self.embed_channel = clients.guarded_channel(embed_addr, embed_service, self.embed_breaker)
        control = ControlPlane(self.dbs)
        self.worker = EmbeddingWorker(
            self.dbs, control, embed_pb2_grpc.EmbedServiceStub(self.embed_channel), batch_size=batch_size
        )
        servicer = StoreServicer(self.dbs, self.worker)
        self.running: Running = start_server(
            bind,
            [
                (
                    store_pb2_grpc.add_StoreServiceServicer_to_server,
                    servicer,
                    s.DESCRIPTOR.services_by_name["StoreService"].full_name,
                )
            ],
        )
        self.worker.start()
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._watch_database, daemon=True, name="db-health")
        self._watch.start()
        self._recovery = threading.Thread(target=self._recover_moves, daemon=True, name="move-recovery")
        self._recovery.start()

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.running.port

    def _watch_database(self) -> None:
        """Health follows the control-plane database: NOT_SERVING while it does not accept a new
        connection (the probe also keeps the pools' view of the server current)."""
        while not self._stop.wait(2.0):
            try:
                self.dbs.probe()
                self.running.set_serving(True)
            except Exception:  # noqa: BLE001 - any failure means the database cannot serve
                self.running.set_serving(False)

    def _recover_moves(self) -> None:
        """Undoes moves that stopped half way (store_service/control/moves.py ``recover``) every 2 s,
        in a thread of its own: a server that hangs in one of its statements holds only this."""
        while not self._stop.wait(2.0):
            try:
                moves.recover(self.dbs)
            except Exception:  # noqa: BLE001 - tried again in 2 s; the store serves meanwhile
                log.exception("undoing interrupted moves failed; trying again")

    def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """NOT_SERVING, lets calls in flight finish (``grace`` seconds at most), then stops the
        worker (closing its channel first cancels an embed call in flight) and closes the pools."""
        self._stop.set()
        self.running.stop(grace)
        self.embed_breaker.stop()
        self.embed_channel.close()
        self.worker.stop()
        self.dbs.close()
