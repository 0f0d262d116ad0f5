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
from gateway.auth import OperatorCredential, authenticate
from gateway.curation import InputVersion
from gateway.dependencies import WATCH_SECONDS, Dependencies
from gateway.prompt_context import PromptContexter
from gateway.recall import RecallConfig, Recaller
from servicekit import clients
from servicekit.limits import INTERNAL_DEADLINE_SECONDS, SHUTDOWN_GRACE_SECONDS
from servicekit.server import Running, start_server

DEPENDENCY_UP = Gauge("recallatron_dependency_up", "1 when a dependency answers SERVING.", ["dependency"])
DEPENDENCY_CONFIGURED = Gauge(
    "recallatron_dependency_configured",
    "1 when a dependency is configured (0: the re-ranker without a cross-encoder; not an outage).",
    ["dependency"],
)


def same_fields(message, cls):
    """``message`` as a ``cls``: the gateway's history messages and the store's have the same fields
    and numbers (tests/test_history.py compares their descriptors), so the wire form is shared."""
    return cls.FromString(message.SerializeToString())


def fields_set(request) -> dict:
    """The fields ``request`` sets, by name: a gateway request whose store twin has the same field
    names (of the same types) plus the caller."""
    return {field.name: value for field, value in request.ListFields()}


class MemoryServicer(gateway_pb2_grpc.MemoryServiceServicer):
    """Implements recallatron.gateway.v1.MemoryService."""

    def __init__(
        self, store: store_pb2_grpc.StoreServiceStub, recaller: Recaller, input_version: InputVersion | None = None
    ) -> None:
        self.store, self.recaller = store, recaller
        self.prompt_context = PromptContexter(store, recaller)
        # The embed service's stamp for duplicate proposals; none known without one (gateway.curation).
        self.input_version = input_version or InputVersion(None, lambda: True, 0.0)

    def Remember(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.Remember(
            s.RememberRequest(
                caller=auth.caller,
                purpose=request.purpose,
                kind=request.kind,
                title=request.title,
                body=request.body,
                audience=request.audience,
                confidence=request.confidence if request.HasField("confidence") else None,
                occurred_at=request.occurred_at if request.HasField("occurred_at") else None,
                entities=request.entities,
                request_id=request.request_id,
            )
        )
        return g.RememberResponse(memory=resp.memory)

    def RememberBatch(self, request, context):
        auth = authenticate(self.store, context)  # once; the store checks the batch size and each entry
        resp = self.store.RememberBatch(
            s.RememberBatchRequest(
                caller=auth.caller,
                requests=[
                    s.RememberBatchEntry(
                        purpose=r.purpose,
                        kind=r.kind,
                        title=r.title,
                        body=r.body,
                        audience=r.audience,
                        confidence=r.confidence if r.HasField("confidence") else None,
                        occurred_at=r.occurred_at if r.HasField("occurred_at") else None,
                        entities=r.entities,
                        request_id=r.request_id,
                    )
                    for r in request.requests
                ],
            )
        )
        return g.RememberBatchResponse(
            results=[
                g.RememberBatchResult(memory=r.memory) if r.HasField("memory") else g.RememberBatchResult(error=r.error)
                for r in resp.results
            ]
        )

    def Read(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.Read(
            s.ReadRequest(caller=auth.caller, memory_id=request.id, include_history=request.include_history)
        )
        return g.ReadResponse(memory=resp.memory)

    def ListMemories(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.ListMemories(s.ListMemoriesRequest(caller=auth.caller, **fields_set(request)))
        return same_fields(resp, g.ListMemoriesResponse)

    def ListExpiringMemories(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.ListExpiringMemories(
            s.ListExpiringMemoriesRequest(
                caller=auth.caller, expiry_days=auth.settings.expiry_days, **fields_set(request)
            )
        )
        return same_fields(resp, g.ListExpiringMemoriesResponse)

    def KeepMemory(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.KeepMemory(
            s.KeepMemoryRequest(caller=auth.caller, memory_id=request.id, expected_revision=request.expected_revision)
        )
        return g.KeepMemoryResponse(memory=resp.memory)

    def Recall(self, request, context):
        auth = authenticate(self.store, context)
        return self.recaller.recall(request, auth.caller, auth.settings)

    def Derive(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.Derive(
            s.DeriveRequest(
                caller=auth.caller,
                source_ids=request.source_ids,
                kind=request.kind,
                title=request.title,
                body=request.body,
                confidence=request.confidence if request.HasField("confidence") else None,
                entities=request.entities,
                request_id=request.request_id,
            )
        )
        return g.DeriveResponse(memory=resp.memory)

    def Correct(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.Correct(
            s.CorrectRequest(
                caller=auth.caller,
                memory_id=request.id,
                expected_revision=request.expected_revision,
                title=request.title if request.HasField("title") else None,
                body=request.body if request.HasField("body") else None,
                confidence=request.confidence if request.HasField("confidence") else None,
            )
        )
        return g.CorrectResponse(memory=resp.memory)

    def Supersede(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.Supersede(
            s.SupersedeRequest(
                caller=auth.caller,
                memory_id=request.id,
                expected_revision=request.expected_revision,
                kind=request.kind,
                title=request.title,
                body=request.body,
                audience=request.audience,
                confidence=request.confidence if request.HasField("confidence") else None,
                request_id=request.request_id,
            )
        )
        return g.SupersedeResponse(memory=resp.memory)

    def Forget(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.Forget(s.ForgetRequest(caller=auth.caller, memory_id=request.id, reason=request.reason))
        return g.ForgetResponse(forgotten_ids=resp.forgotten_ids)

    def FindEntities(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.FindEntities(s.FindEntitiesRequest(caller=auth.caller, name=request.name))
        return g.FindEntitiesResponse(entities=[g.Entity(id=e.id, name=e.name) for e in resp.entities])

    def AppendHistory(self, request, context):
        auth = authenticate(self.store, context)  # once; the store checks the size and each turn
        resp = self.store.AppendHistory(
            s.AppendHistoryRequest(caller=auth.caller, turns=[same_fields(t, s.HistoryTurn) for t in request.turns])
        )
        return g.AppendHistoryResponse(results=[same_fields(r, g.AppendHistoryResult) for r in resp.results])

    def SearchHistory(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.SearchHistory(s.SearchHistoryRequest(caller=auth.caller, **fields_set(request)))
        return same_fields(resp, g.SearchHistoryResponse)

    def ForgetHistory(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.ForgetHistory(s.ForgetHistoryRequest(caller=auth.caller, **fields_set(request)))
        return g.ForgetHistoryResponse(forgotten_count=resp.forgotten_count)

    def PinMemory(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.PinMemory(s.PinMemoryRequest(caller=auth.caller, memory_id=request.id))
        return same_fields(resp, g.PinMemoryResponse)

    def UnpinMemory(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.UnpinMemory(s.UnpinMemoryRequest(caller=auth.caller, memory_id=request.id))
        return same_fields(resp, g.UnpinMemoryResponse)

    def GetContext(self, request, context):
        auth = authenticate(self.store, context)
        budget = bundle.check_budget(request.token_budget)
        bundle.check_on(auth.settings)
        resp = self.store.GetContext(
            s.GetContextRequest(caller=auth.caller, purpose=request.purpose, expiry_days=auth.settings.expiry_days)
        )
        return bundle.build(resp.entries, request.purpose, budget)

    def PromptContext(self, request, context):
        auth = authenticate(self.store, context)
        return self.prompt_context.answer(request, auth.caller, auth.settings)

    def Capture(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.Capture(s.CaptureRequest(caller=auth.caller, **fields_set(request)))
        return same_fields(resp, g.CaptureResponse)

    # Curation (issue 9; store_service/curation/review.py holds the rules).
    def ListDuplicateProposals(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.ListDuplicateProposals(
            s.ListDuplicateProposalsRequest(
                caller=auth.caller, input_version=self.input_version.current(), **fields_set(request)
            )
        )
        return same_fields(resp, g.ListDuplicateProposalsResponse)

    def DecideDuplicateProposal(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.DecideDuplicateProposal(
            s.DecideDuplicateProposalRequest(caller=auth.caller, **fields_set(request))
        )
        return same_fields(resp, g.DecideDuplicateProposalResponse)

    def ListConflictFlags(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.ListConflictFlags(s.ListConflictFlagsRequest(caller=auth.caller, **fields_set(request)))
        return same_fields(resp, g.ListConflictFlagsResponse)

    def ResolveConflictFlag(self, request, context):
        auth = authenticate(self.store, context)
        resp = self.store.ResolveConflictFlag(s.ResolveConflictFlagRequest(caller=auth.caller, **fields_set(request)))
        return same_fields(resp, g.ResolveConflictFlagResponse)


class AdminServicer(gateway_pb2_grpc.AdminServiceServicer):
    """Implements recallatron.gateway.v1.AdminService, authorised by the operator credential."""

    def __init__(
        self, store: store_pb2_grpc.StoreServiceStub, operator: OperatorCredential, dependencies: DependencyWatch
    ) -> None:
        self.store, self.operator, self.dependencies = store, operator, dependencies

    def CreateWorkspace(self, request, context):
        self.operator.check(context)
        resp = self.store.CreateWorkspace(s.CreateWorkspaceRequest(name=request.name))
        return g.CreateWorkspaceResponse(workspace_id=resp.workspace_id)

    def AddMember(self, request, context):
        self.operator.check(context)
        resp = self.store.AddMember(
            s.AddMemberRequest(
                workspace_id=request.workspace_id,
                role=request.role,
                purposes=request.purposes,
                display_name=request.display_name,
            )
        )
        return g.AddMemberResponse(member_id=resp.member_id, token=resp.token)

    def RevokeMember(self, request, context):
        self.operator.check(context)
        resp = self.store.RevokeMember(
            s.RevokeMemberRequest(workspace_id=request.workspace_id, member_id=request.member_id)
        )
        return g.RevokeMemberResponse(revoked=resp.revoked)

    def RemoveMember(self, request, context):
        self.operator.check(context)
        resp = self.store.RemoveMember(
            s.RemoveMemberRequest(workspace_id=request.workspace_id, member_id=request.member_id)
        )
        return same_fields(resp, g.RemoveMemberResponse)

    def UpdateWorkspaceSettings(self, request, context):
        self.operator.check(context)  # the store checks every field (store_service/access/expiry.py: the gate)
        resp = self.store.UpdateWorkspaceSettings(s.UpdateWorkspaceSettingsRequest(**fields_set(request)))
        return g.UpdateWorkspaceSettingsResponse(
            dense_floor=resp.settings.dense_floor,
            default_mode=resp.settings.default_mode,
            context_bundle=resp.settings.context_bundle,
            expiry_days=resp.settings.expiry_days,
            inject_gate=resp.settings.inject_gate,
            inject_min_cosine=resp.settings.inject_min_cosine,
        )

    def RebuildEmbeddings(self, request, context):
        self.operator.check(context)
        resp = self.store.RebuildEmbeddings(s.RebuildEmbeddingsRequest(all=request.all))
        return g.RebuildEmbeddingsResponse(queued=resp.queued, input_version=resp.input_version)

    def ImportMemories(self, request, context):
        self.operator.check(context)  # the store checks the sizes, the workspace and each item
        resp = self.store.ImportMemories(s.ImportMemoriesRequest(**fields_set(request)))
        return g.ImportMemoriesResponse(entities=resp.entities, memories=resp.memories)

    def ImportHistory(self, request, context):
        self.operator.check(context)  # the store checks the member and each turn, as AppendHistory
        resp = self.store.ImportHistory(
            s.ImportHistoryRequest(
                workspace_id=request.workspace_id,
                member_id=request.member_id,
                turns=[same_fields(t, s.HistoryTurn) for t in request.turns],
            )
        )
        return g.ImportHistoryResponse(results=[same_fields(r, g.AppendHistoryResult) for r in resp.results])

    def GetStatus(self, request, context):
        self.operator.check(context)
        try:
            backlog = self.store.GetStatus(s.GetStatusRequest(), timeout=10).embedding_backlog
        except grpc.RpcError:
            backlog = -1
        return g.GetStatusResponse(embedding_backlog=backlog, dependencies=self.dependencies.snapshot())


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
