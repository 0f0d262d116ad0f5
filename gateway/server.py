"""The gateway: the public MemoryService and AdminService, orchestrating the internal services.

It stays SERVING while the embed service or the re-ranker is down (recall degrades) and reports
their state through AdminService.GetStatus and the ``recallatron_dependency_up`` and
``recallatron_dependency_configured`` gauges (a re-ranker that is not configured is not down). Its
calls to the internal services carry deadlines and go through circuit breakers
(gateway.dependencies).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import grpc
from prometheus_client import Gauge
from recallatron.embed.v1 import embed_pb2
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.store.v1 import store_pb2 as s
from recallatron.store.v1 import store_pb2_grpc

from gateway import context as bundle
from gateway.auth import OperatorCredential, authenticate, presented
from gateway.curation import InputVersion
from gateway.dependencies import WATCH_SECONDS, Dependencies
from gateway.prompt_context import PromptContexter
from gateway.recall import RecallConfig, Recaller, window_fields
from gateway.relay import BY_ID, member_call, operator_call
from servicekit import clients
from servicekit.limits import INTERNAL_DEADLINE_SECONDS, MAX_MESSAGE_BYTES, SHUTDOWN_GRACE_SECONDS
from servicekit.server import Running, start_server

DEPENDENCY_UP = Gauge("recallatron_dependency_up", "1 when a dependency answers SERVING.", ["dependency"])
DEPENDENCY_CONFIGURED = Gauge(
    "recallatron_dependency_configured",
    "1 when a dependency is configured (0: the re-ranker without a cross-encoder; not an outage).",
    ["dependency"],
)


class MemoryServicer(gateway_pb2_grpc.MemoryServiceServicer):
    """Implements recallatron.gateway.v1.MemoryService: recall, the context bundle and prompt context
    are the gateway's own; every other call is relayed to the store as the token's caller
    (gateway.relay)."""

    def __init__(
        self, store: store_pb2_grpc.StoreServiceStub, recaller: Recaller, input_version: InputVersion | None = None
    ) -> None:
        self.store, self.recaller = store, recaller
        self.prompt_context = PromptContexter(store, recaller)
        # The embed service's stamp for duplicate proposals; none known without one (gateway.curation).
        self.input_version = input_version or InputVersion(None, lambda: True, 0.0)

    Remember = member_call("Remember")
    # Authenticated once; the store checks the batch size and each entry (as AppendHistory's turns).
    RememberBatch = member_call("RememberBatch")
    Read = member_call("Read", renames=BY_ID)
    ListMemories = member_call("ListMemories")
    # The store hides what the workspace's expiry gate hides; the gate is the workspace's, not the caller's.
    ListExpiringMemories = member_call("ListExpiringMemories", expiry_days=lambda _, auth: auth.settings.expiry_days)
    KeepMemory = member_call("KeepMemory", renames=BY_ID)
    Derive = member_call("Derive")
    Correct = member_call("Correct", renames=BY_ID)
    Supersede = member_call("Supersede", renames=BY_ID)
    Invalidate = member_call("Invalidate", renames=BY_ID)
    Forget = member_call("Forget", renames=BY_ID)
    FindEntities = member_call("FindEntities")
    GetEntity = member_call("GetEntity")
    # Entity review (store_service/curation/entity_review.py holds the rules).
    MergeEntity = member_call("MergeEntity")
    UnmergeEntity = member_call("UnmergeEntity")
    ListEntityDuplicates = member_call("ListEntityDuplicates")
    AppendHistory = member_call("AppendHistory")
    SearchHistory = member_call("SearchHistory")
    ForgetHistory = member_call("ForgetHistory")
    PinMemory = member_call("PinMemory", renames=BY_ID)
    UnpinMemory = member_call("UnpinMemory", renames=BY_ID)
    Capture = member_call("Capture")
    # Curation (issue 9; store_service/curation/review.py holds the rules); the embed service names
    # the input version whose stored vectors are compared (gateway.curation).
    ListDuplicateProposals = member_call(
        "ListDuplicateProposals", input_version=lambda servicer, _: servicer.input_version.current()
    )
    DecideDuplicateProposal = member_call("DecideDuplicateProposal")
    ListConflictFlags = member_call("ListConflictFlags")
    ResolveConflictFlag = member_call("ResolveConflictFlag")

    def Recall(self, request, context):
        return self.recaller.recall_presented(request, presented(context))

    def GetContext(self, request, context):
        auth = authenticate(self.store, context)
        budget = bundle.check_budget(request.token_budget)
        bundle.check_on(auth.settings)
        resp = self.store.GetContext(
            s.GetContextRequest(
                caller=auth.caller,
                purpose=request.purpose,
                expiry_days=auth.settings.expiry_days,
                **window_fields(request),
            )
        )
        return bundle.build(resp.entries, request.purpose, budget, window=bundle.window_text(request))

    def PromptContext(self, request, context):
        auth = authenticate(self.store, context)
        return self.prompt_context.answer(request, auth.caller, auth.settings)


class AdminServicer(gateway_pb2_grpc.AdminServiceServicer):
    """Implements recallatron.gateway.v1.AdminService, authorised by the operator credential: GetStatus
    is the gateway's own; every other call is relayed to the store, which checks every field
    (gateway.relay)."""

    def __init__(
        self, store: store_pb2_grpc.StoreServiceStub, operator: OperatorCredential, dependencies: DependencyWatch
    ) -> None:
        self.store, self.operator, self.dependencies = store, operator, dependencies

    CreateWorkspace = operator_call("CreateWorkspace")
    AddMember = operator_call("AddMember")
    RevokeMember = operator_call("RevokeMember")
    RemoveMember = operator_call("RemoveMember")
    # The settings now in force, answered flat (store_service/access/expiry.py: the gate's checks).
    UpdateWorkspaceSettings = operator_call("UpdateWorkspaceSettings", answer_field="settings")
    RebuildEmbeddings = operator_call("RebuildEmbeddings")
    ImportMemories = operator_call("ImportMemories")
    # The store checks the member and each turn, as AppendHistory.
    ImportHistory = operator_call("ImportHistory")
    # Everyday operation (docs/operations.md); a workspace may be named by id or name in each.
    ListWorkspaces = operator_call("ListWorkspaces")
    GetWorkspace = operator_call("GetWorkspace")
    RenameWorkspace = operator_call("RenameWorkspace")
    DeleteWorkspace = operator_call("DeleteWorkspace")
    MoveWorkspace = operator_call("MoveWorkspace")
    ListMembers = operator_call("ListMembers")
    IssueMemberToken = operator_call("IssueMemberToken")
    RenameMember = operator_call("RenameMember")

    def GetStatus(self, request, context):
        self.operator.check(context)
        try:
            store = self.store.GetStatus(s.GetStatusRequest(), timeout=10)
        except grpc.RpcError:
            store = s.GetStatusResponse(embedding_backlog=-1)
        return g.GetStatusResponse(
            embedding_backlog=store.embedding_backlog,
            dependencies=self.dependencies.snapshot(),
            database_servers=store.database_servers,
        )


class DependencyWatch:
    """Polls the internal services' health and the embed service's GetModelInfo every
    ``WATCH_SECONDS``; feeds GetStatus and the dependency gauges, and tells ``deps`` what the embed
    service reports of its re-ranker (gateway.dependencies: not configured, or its breaker opened
    while it is configured but unavailable)."""

    def __init__(self, deps: Dependencies, on_change=lambda state: None) -> None:
        self.deps, self.on_change = deps, on_change
        self._state: dict[str, g.DependencyStatus] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="dependency-watch")

    def start(self) -> None:
        """Checks once, then keeps polling in the background."""
        self.poll()
        self._thread.start()

    def stop(self) -> None:
        """Stops polling."""
        self._stop.set()

    def poll(self) -> None:
        """Checks every dependency now."""
        state = {}
        for name, ch in self.deps.channels.items():
            up = clients.is_serving(ch)
            state[name] = _status(name, g.DEPENDENCY_STATE_UP if up else g.DEPENDENCY_STATE_DOWN, "not SERVING")
        try:
            info = self.deps.embed.GetModelInfo(embed_pb2.GetModelInfoRequest(), timeout=1.0)
        except grpc.RpcError:
            info = None
        else:
            self.deps.reranker_reported(info)
        state["reranker"] = self._reranker(info)
        for name, st in state.items():
            DEPENDENCY_UP.labels(name).set(1 if st.serving else 0)
            DEPENDENCY_CONFIGURED.labels(name).set(0 if st.state == g.DEPENDENCY_STATE_NOT_CONFIGURED else 1)
        self._state = state
        self.on_change(state)

    def snapshot(self) -> list[g.DependencyStatus]:
        """The last observed state, one entry per dependency."""
        self.poll()
        return list(self._state.values())

    def _run(self) -> None:
        while not self._stop.wait(WATCH_SECONDS):
            self.poll()

    def _reranker(self, info: embed_pb2.GetModelInfoResponse | None) -> g.DependencyStatus:
        """The re-ranker's entry from GetModelInfo's answer (None: the embed service did not answer):
        not configured as last reported, else up or down as the embed service reports it now."""
        if not self.deps.reranker_configured:
            return _status("reranker", g.DEPENDENCY_STATE_NOT_CONFIGURED, "")
        if info is None:
            return _status("reranker", g.DEPENDENCY_STATE_DOWN, "embed service down")
        if info.reranker_available:
            return _status("reranker", g.DEPENDENCY_STATE_UP, "")
        return _status("reranker", g.DEPENDENCY_STATE_DOWN, info.reranker_error)


def _status(name: str, state: int, why_down: str) -> g.DependencyStatus:
    """A dependency's GetStatus entry: ``why_down`` is its detail only when it is down."""
    down = state == g.DEPENDENCY_STATE_DOWN
    return g.DependencyStatus(
        name=name, serving=state == g.DEPENDENCY_STATE_UP, detail=why_down if down else "", state=state
    )


class GatewayService:
    """A running gateway: the internal services' channels and breakers, and the public gRPC server.

    ``internal_deadline`` is the deadline of an internal call whose caller set none (seconds);
    ``interceptors`` are extra client interceptors on the internal channels, inside the breakers.
    """

    def __init__(
        self,
        bind: str,
        store_addr: str,
        embed_addr: str,
        rank_addr: str,
        operator_token_path: Path,
        config: RecallConfig | None = None,
        *,
        internal_deadline: float = INTERNAL_DEADLINE_SECONDS,
        interceptors: Sequence[grpc.UnaryUnaryClientInterceptor] = (),
    ) -> None:
        config = config or RecallConfig()
        self.deps = Dependencies(store_addr, embed_addr, rank_addr, config, internal_deadline, interceptors)
        self.channels, self.breakers = self.deps.channels, self.deps.breakers
        store = self.deps.store
        self.watch = DependencyWatch(self.deps, self._follow)
        # Before the first call: a re-ranker reported unavailable or not configured is never called.
        self.watch.poll()
        recaller = Recaller(store, self.deps.embed, self.deps.rank, config, reranker_state=self.deps.reranker_state)
        self.running: Running = start_server(
            bind,
            [
                (
                    gateway_pb2_grpc.add_MemoryServiceServicer_to_server,
                    MemoryServicer(
                        store,
                        recaller,
                        InputVersion(self.deps.embed, lambda: self.breakers["embed"].is_open, config.embed_deadline),
                    ),
                    g.DESCRIPTOR.services_by_name["MemoryService"].full_name,
                ),
                (
                    gateway_pb2_grpc.add_AdminServiceServicer_to_server,
                    AdminServicer(store, OperatorCredential(operator_token_path), self.watch),
                    g.DESCRIPTOR.services_by_name["AdminService"].full_name,
                ),
            ],
            serving=False,
            max_receive=MAX_MESSAGE_BYTES,  # the public edge: what it accepts fits every internal hop
        )
        self.watch.start()

    def _follow(self, state: dict[str, g.DependencyStatus]) -> None:
        """SERVING needs the store and the rank service; the embed service and re-ranker only degrade recall."""
        if hasattr(self, "running"):
            self.running.set_serving(state["store"].serving and state["rank"].serving)

    @property
    def port(self) -> int:
        """The bound gRPC port."""
        return self.running.port

    def stop(self, grace: float = SHUTDOWN_GRACE_SECONDS) -> None:
        """NOT_SERVING, then lets calls in flight finish (``grace`` seconds at most; servicekit.server),
        then stops polling and closes the channels."""
        self.running.stop(grace)
        self.watch.stop()
        self.deps.close()
