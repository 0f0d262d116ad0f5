"""Recall orchestration across the store, embed and rank services (README.md, "How recall works").

1. candidates from the store's lexical and dense queries (readability applied in SQL), each row
   carrying the store's walk verdict (its whole derived_from chain readable), and the first rows
   whose chain is readable carrying their memory (as many as the answer's head: ``memories_top``);
2. RRF and the permission walk over those verdicts in the rank service, one call;
3. the memories of the head that passed: those the arms carried, and one store call for the rest
   only when some are missing (a row deeper than the head in every arm that returned it, which the
   dense arm did not carry for the keyword arm: lifted by precedence, or past the 200 it carries);
4. the cross-encoder over the rows that passed; 5. the response, with counts after the walk.

The internal round trips of a hybrid recall, in order: LexicalCandidates (in flight while)
EmbedQueries, then DenseCandidates once the keyword answer is in (it is told what that answer
carried and which of its rows came without a memory, ``_carried``); FuseAndWalk; GetMemories only for
a head the arms did not carry; Rerank when asked for and the re-ranker is up (gateway.dependencies).
The keyword call carries the caller's token and the store authenticates it there, when the store
accepted that token lately (``gateway.auth.AcceptedLately``: a hint, not a credential); else, and in
dense mode, an Authenticate call comes first (``Recaller.recall_presented``). Nothing about the
caller is cached: every recall is authenticated by the store, so a revoked token fails on its next
call. A memory an arm carried was read in the same store transaction as its verdict; one
forgotten after that call may still be in this answer, as one forgotten after a GetMemories call
always could.

Deadlines: every internal call is bounded by what is left of the caller's deadline
(servicekit.deadlines); the query embedding and the re-ranker, being optional, get at most their
own deadline (RecallConfig) and half of what is left, so a degraded answer still has time.

Degrade contract: an embed failure (down, past its deadline, breaker open, stamp mismatch) means
``dense_available=false``; a re-ranker failure or skip means ``reranked=false``. Neither is an
error. A re-ranker that is not configured also means ``reranked=false``, but nothing is missing:
it is not called and the recall does not count as degraded. A recall whose query embedding timed
out or found the embed service unavailable does not call the re-ranker (it runs in the same
service) and so waits for a frozen service once at most.
"""

from __future__ import annotations

import datetime
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

import grpc
from prometheus_client import Counter, Histogram
from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from recallatron.rank.v1 import rank_pb2, rank_pb2_grpc
from recallatron.store.v1 import store_pb2, store_pb2_grpc

from gateway import time_words
from gateway.auth import AcceptedLately, Presented, resolve
from servicekit import deadlines, limits, vocabulary
from servicekit.caller import check_purpose_granted, purpose_name
from servicekit.checks import check_timestamp, time_range
from servicekit.errors import DOWN_CODES, InvalidArgument
from servicekit.limits import DEFAULT_TOP_K, MAX_QUERY_CHARS, MAX_TOP_K, WALK_LIMIT

log = logging.getLogger(__name__)
# The request fields of a time window, the same in the public requests and the store's: when
# memories were said, and the instants of a read in time (docs/time.md).
SAID_FIELDS = ("occurred_after", "occurred_before")
WINDOW_FIELDS = (*SAID_FIELDS, "as_of", "known_at")


def in_time(req) -> bool:
    """Whether a request reads in time (``as_of`` or ``known_at``): retired memories, which have no
    vectors, are then candidates too, reached by keyword (docs/time.md)."""
    return req.HasField("as_of") or req.HasField("known_at")


def window_fields(req) -> dict:
    """The time window's bounds ``req`` sets, as keyword arguments of a store request (an unset
    bound stays unset: copying it would set it to 1970)."""
    return {name: getattr(req, name) for name in WINDOW_FIELDS if req.HasField(name)}


DEGRADED = Counter("recallatron_recall_degraded", "Recalls answered without an arm or stage.", ["stage"])
MODES = (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID)
# Answered recalls by mode and by whether each arm and the re-ranker contributed ("true"/"false": an
# arm contributed when a row it found passed the walk); at most 3 x 2 x 2 x 2 series.
RECALLS = Counter(
    "recallatron_recalls",
    "Recalls answered, by mode and by what contributed.",
    ["mode", "lexical", "dense", "reranked"],
)
# Rows per answered recall: each arm's candidates (stage lexical, dense; an arm the mode does not ask
# is not observed) and those that passed the walk (walked); the buckets reach MAX_CANDIDATE_LIMIT.
CANDIDATES = Histogram(
    "recallatron_recall_candidates",
    "Rows per recall: each arm's candidates and the rows that passed the walk.",
    ["stage"],
    buckets=(0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000),
)


@dataclass
class RecallConfig:
    """Deadlines and sizes of a recall (from settings)."""

    candidate_limit: int = limits.CANDIDATE_LIMIT
    embed_deadline: float = limits.EMBED_DEADLINE_SECONDS
    rerank_deadline: float = limits.RERANK_DEADLINE_SECONDS
    rerank_top_n: int = limits.RERANK_TOP_N


class Recaller:
    """Runs one recall for an authenticated caller.

    ``reranker_state`` answers whether the re-ranker may be called (gateway.dependencies:
    ``DEPENDENCY_STATE_UP``, ``_DOWN`` while its breaker or the embed service's is open, or
    ``_NOT_CONFIGURED``); unless it is up, recall skips the Rerank call and answers
    ``reranked=false`` at once, counted as degraded only when the re-ranker is down.
    """

    def __init__(
        self,
        store: store_pb2_grpc.StoreServiceStub,
        embed: embed_pb2_grpc.EmbedServiceStub,
        rank: rank_pb2_grpc.RankServiceStub,
        config: RecallConfig,
        reranker_state: Callable[[], int] = lambda: g.DEPENDENCY_STATE_UP,
        accepted: AcceptedLately | None = None,
    ) -> None:
        self.store, self.embed, self.rank, self.config = store, embed, rank, config
        self.reranker_state = reranker_state
        self.accepted = accepted if accepted is not None else AcceptedLately()

    def recall(self, req: g.RecallRequest, caller: m.Caller, settings: store_pb2.WorkspaceSettings) -> g.RecallResponse:
        """Answers a RecallRequest for an authenticated caller. INVALID_ARGUMENT for bad input,
        PERMISSION_DENIED for an ungranted purpose."""
        ask = _validate(req, caller, settings.default_mode, self.config.candidate_limit)
        return self._recall(ask, _Known(caller, settings))

    def recall_presented(self, req: g.RecallRequest, who: Presented) -> g.RecallResponse:
        """Authenticates ``who`` and answers ``req``: INVALID_ARGUMENT for bad input first, then
        UNAUTHENTICATED for a token the store refuses, PERMISSION_DENIED for a purpose not granted or
        narrowed away. When the store accepted this sign-in lately (``AcceptedLately``) for the
        purpose asked, and the recall asks the keyword arm, the token travels in the keyword calls
        (``_Folded``): one sequential call fewer, and the question is embedded while the store
        authenticates. Else, or when the workspace's default mode changed since (the hint was stale:
        the recall is asked again in the mode in force), Authenticate comes first, as for every other
        call. Either way the store authenticates the token on this recall."""
        ask = _validate(req, None, 0, self.config.candidate_limit)
        seen = self.accepted.get(who)
        if seen is not None and req.purpose in seen.purposes:
            folded = replace(ask, mode=_mode(req, seen.default_mode))
            if folded.mode != m.RECALL_MODE_DENSE:
                try:
                    return self._recall(folded, _Folded(who))
                except grpc.RpcError as exc:
                    if exc.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                        self.accepted.refused(who)
                    raise
                except _StaleHint as stale:
                    return self._recall_known(ask, stale.known)
        auth = resolve(self.store, who)
        self.accepted.accepted(who, auth.caller, auth.settings)
        check_purpose_granted(auth.caller, req.purpose)
        return self._recall_known(ask, _Known(auth.caller, auth.settings))

    def _recall_known(self, ask: _Ask, known: _Known) -> g.RecallResponse:
        """``ask`` answered for ``known``, in the mode its workspace's default gives (``ask`` was
        checked before the caller was known)."""
        return self._recall(replace(ask, mode=_mode(ask.req, known.settings.default_mode)), known)

    def _recall(self, ask: _Ask, who: _Known | _Folded) -> g.RecallResponse:
        req = ask.req
        # The head the answer can need: the top k, or the re-ranker's input when it may run; at most
        # MAX_TOP_K, the most the store carries (RECALLATRON_RERANK_TOP_N may be up to 256): deeper
        # head rows are fetched with GetMemories.
        reranker_up = self.reranker_state() == g.DEPENDENCY_STATE_UP
        head = max(ask.top_k, self.config.rerank_top_n) if reranker_up and not req.skip_rerank else ask.top_k
        head = min(head, MAX_TOP_K)
        lexical_rows, dense_rows, dense_available, embed_down, caller = self._candidates(ask, who, head)
        passed = self._fuse_and_walk(lexical_rows, dense_rows, in_time(req) and ask.mode == m.RECALL_MODE_HYBRID)
        rerank = self._will_rerank(ask, passed, embed_down)
        memories = self._fetch(
            caller,
            passed[: max(ask.top_k, self.config.rerank_top_n if rerank else 0)],
            {c.memory_id: c.memory for c in dense_rows + lexical_rows if c.HasField("memory")},
            {"known_at": req.known_at} if req.HasField("known_at") else {},
        )
        rerank_scores = {}
        if rerank and passed:
            rerank_scores = self._rerank(
                ask.req.query, [c for c in passed[: self.config.rerank_top_n] if c.memory_id in memories], memories
            )
        order = self._reranked_order(passed, rerank_scores)
        items = _items(order[: ask.top_k], memories, {c.memory_id: c.score for c in dense_rows}, rerank_scores)
        counts = g.RecallCounts(
            lexical=sum(1 for c in passed if c.lexical_rank),
            dense=sum(1 for c in passed if c.dense_rank),
            fused=len(passed),
            returned=len(items),
        )
        _count(ask.mode, lexical_rows, dense_rows, counts, bool(rerank_scores))
        return g.RecallResponse(
            items=items,
            mode=ask.mode,
            dense_available=dense_available,
            reranked=bool(rerank_scores),
            counts=counts,
            time_window=ask.understood,
        )

    def _candidates(self, ask: _Ask, who: _Known | _Folded, head: int):
        """The two arms' candidate rows, ``(lexical, dense, dense_available, embed_down, caller)``: the
        keyword query is in flight on the channel (no thread of ours) while the question is embedded;
        the dense arm is queried once both are in (``_dense``). Superseded memories have no vectors,
        so a history recall is lexical only.
        Both arms get the workspace's dense floor and expiry gate as the store's authentication read
        them, and carry the memories of their first ``head`` readable rows. ``caller`` is whom the
        recall answers for: ``who``'s, or the one the keyword answer resolved its token to
        (``_StaleHint`` when that workspace's default mode no longer gives ``ask.mode``).
        ``embed_down`` is true when the embed call failed for want of the service (see ``_dense``)."""
        req = ask.req
        lexical_calls = []
        if ask.mode in (m.RECALL_MODE_LEXICAL, m.RECALL_MODE_HYBRID):
            lexical_calls = [
                self.store.LexicalCandidates.future(
                    store_pb2.LexicalCandidatesRequest(
                        purpose=req.purpose,
                        query=req.query,
                        limit=ask.limit,
                        include_superseded=req.include_superseded,
                        entity_ids=req.entity_ids,
                        memories_top=head,
                        **who.keyword_fields(),
                        **window,
                    )
                )
                for window in _windows(ask)
            ]

        @functools.cache
        def keyword_answers() -> list:
            """The keyword arm's answers (waited for, once), in ``_windows``' order."""
            return [call.result() for call in lexical_calls]

        def keyword_rows() -> list:
            """The keyword arm's rows: its answers in ``_said_first``'s order."""
            return _said_first([list(answer.candidates) for answer in keyword_answers()], ask.limit)

        @functools.cache
        def known() -> _Known:
            """Whom the recall answers for, with the workspace's settings."""
            if isinstance(who, _Known):
                return who
            return self._resolved(ask, who, keyword_answers()[0])

        dense_rows, dense_available, embed_down = [], True, False
        try:
            if ask.mode in (m.RECALL_MODE_DENSE, m.RECALL_MODE_HYBRID):
                dense_rows, dense_available, embed_down = self._dense(
                    ask, known, head, keyword_rows if lexical_calls else None
                )
            lexical_rows = keyword_rows() if lexical_calls else []
            caller = known().caller
        finally:
            for call in lexical_calls:
                call.cancel()  # a no-op once it has completed
        return lexical_rows, dense_rows, dense_available, embed_down, caller

    def _resolved(self, ask: _Ask, who: _Folded, answer: store_pb2.LexicalCandidatesResponse) -> _Known:
        """The caller and settings a keyword answer resolved ``who``'s token to, noted as accepted;
        ``_StaleHint`` when its workspace's default mode gives another mode than ``ask``'s."""
        self.accepted.accepted(who.presented, answer.caller, answer.settings)
        known = _Known(answer.caller, answer.settings)
        if _mode(ask.req, answer.settings.default_mode) != ask.mode:
            raise _StaleHint(known)
        return known

    def _will_rerank(self, ask: _Ask, passed, embed_down: bool) -> bool:
        """Whether to call the re-ranker: asked for, configured, up, and the embed service answered
        this recall's query embedding (else skipped, as if the call had failed, and counted as a
        degraded recall when there was something to re-rank; a re-ranker not configured is skipped
        without counting: nothing is missing)."""
        state = self.reranker_state()
        if ask.req.skip_rerank or state == g.DEPENDENCY_STATE_NOT_CONFIGURED:
            return False
        if embed_down or state != g.DEPENDENCY_STATE_UP:
            if passed:
                DEGRADED.labels("rerank").inc()
            return False
        return True

    def _fetch(self, caller: m.Caller, head, carried: dict[str, m.Memory], known_at: dict) -> dict[str, m.Memory]:
        """The memories of the head rows by id: those the arms ``carried``, and the rest in one store
        call (which checks readability again, and shows them as they stood at the request's
        ``known_at``, as the arms did) only when some are missing; a row forgotten before its memory
        was read is absent."""
        found = {c.memory_id: carried[c.memory_id] for c in head if c.memory_id in carried}
        missing = [c.memory_id for c in head if c.memory_id not in found]
        if missing:
            fetched = self.store.GetMemories(
                store_pb2.GetMemoriesRequest(caller=caller, memory_ids=missing, **known_at)
            )
            found.update((mem.id, mem) for mem in fetched.memories)
        return found

    def _reranked_order(self, passed, rerank_scores: dict[str, float]):
        """The passed rows in answer order: the first ``rerank_top_n`` by cross-encoder score (a row
        without one last among them, the sort being stable), the rest in fused order."""
        if not rerank_scores:
            return passed
        n = self.config.rerank_top_n
        return sorted(passed[:n], key=lambda c: -rerank_scores.get(c.memory_id, float("-inf"))) + passed[n:]

    def _fuse_and_walk(self, lexical_rows, dense_rows, timed: bool = False) -> list[rank_pb2.FusedCandidate]:
        """RRF and the walk over the store's verdicts, in one rank call (none when no arm found a row).

        A row both arms returned passes only when both verdicts say readable (they come from two
        queries, and a forget may land between them)."""
        if not lexical_rows and not dense_rows:
            return []
        rows = lexical_rows + dense_rows
        hidden = {c.memory_id for c in rows if not c.chain_readable}
        readable = [c.memory_id for c in rows if c.chain_readable and c.memory_id not in hidden]
        arms = [
            rank_pb2.ArmRanking(arm=rank_pb2.ARM_LEXICAL, memory_ids=[c.memory_id for c in lexical_rows]),
            rank_pb2.ArmRanking(arm=rank_pb2.ARM_DENSE, memory_ids=[c.memory_id for c in dense_rows]),
        ]
        # Identifier precedence whenever the keyword arm answered (BM25's length normalisation can put
        # a short near miss above a long memory holding the exact key); all-terms precedence only
        # against the dense arm's votes, so lexical mode is otherwise plain BM25.
        # A hybrid read in time counts as both arms answering: its meaning arm compares only memories
        # current today (retired ones have no vectors), so its silence says nothing of the others.
        both = bool(lexical_rows and (dense_rows or timed))
        precedence = {
            c.memory_id: rank_pb2.Precedence(identifier_matches=c.identifier_matches, all_terms=both and c.all_terms)
            for c in lexical_rows
            if c.identifier_matches or (both and c.all_terms)
        }
        return list(
            self.rank.FuseAndWalk(
                rank_pb2.FuseAndWalkRequest(
                    arms=arms, readable_ids=list(dict.fromkeys(readable)), limit=WALK_LIMIT, precedence=precedence
                )
            ).candidates
        )

    def _dense(
        self,
        ask: _Ask,
        known: Callable[[], _Known],
        head: int,
        keyword_rows: Callable[[], list] | None = None,
    ):
        """``(rows, dense_available, embed_down)``: the dense candidates, whether the arm could
        contribute, and whether the embed service was missing (past the deadline, unavailable or its
        breaker open). Embed failures degrade, never raise.

        In hybrid mode the dense arm is told which memories the keyword arm's answer carried, so it
        does not carry them again, and which of that answer's readable rows came without one, so it
        carries those it finds too: a memory both arms found can reach the fused head from deep in
        each, and would otherwise cost a GetMemories call after fusion (74% of hybrid recalls of
        the bench's questions at 10,000 memories did). So the dense query waits for the keyword
        answer, which has mostly come while the question was embedded; when it is slower, the
        recall ends at most one dense query later than it would have, and needs that answer anyway."""
        try:
            resp = self.embed.EmbedQueries(
                embed_pb2.EmbedQueriesRequest(queries=[ask.req.query]),
                timeout=deadlines.optional_stage(self.config.embed_deadline),
            )
        except grpc.RpcError as exc:
            DEGRADED.labels("dense").inc()
            log.warning("dense arm unavailable: %s", exc.code())
            return [], False, exc.code() in DOWN_CODES
        # The keyword arm's failure (a refused token too) fails the recall here, before the dense
        # query is asked.
        carried = _carried(keyword_rows()) if keyword_rows is not None else {}
        caller, settings = known()
        calls = [
            self.store.DenseCandidates.future(
                store_pb2.DenseCandidatesRequest(
                    caller=caller,
                    purpose=ask.req.purpose,
                    vector=resp.vectors[0].values,
                    input_version=resp.input_version,
                    floor=settings.dense_floor,
                    limit=ask.limit,
                    entity_ids=ask.req.entity_ids,
                    expiry_days=settings.expiry_days,
                    memories_top=head,
                    **carried,
                    **window,
                )
            )
            for window in _windows(ask)
        ]
        try:
            answers = [call.result() for call in calls]
        finally:
            for call in calls:
                call.cancel()
        if not answers[0].stamp_current:
            DEGRADED.labels("dense").inc()
            return [], False, False
        return _said_first([list(out.candidates) for out in answers], ask.limit), True, False

    def _rerank(self, query: str, head, memories) -> dict[str, float]:
        """Cross-encoder scores of the head rows; empty when the re-ranker is unavailable or late."""
        if not head:
            return {}
        documents = [
            embed_pb2.Document(title=memories[c.memory_id].title, body=memories[c.memory_id].body) for c in head
        ]
        try:
            resp = self.embed.Rerank(
                embed_pb2.RerankRequest(query=query, documents=documents),
                timeout=deadlines.optional_stage(self.config.rerank_deadline),
            )
        except grpc.RpcError:
            DEGRADED.labels("rerank").inc()
            return {}
        return {c.memory_id: float(s) for c, s in zip(head, resp.scores, strict=True)}


@dataclass(frozen=True)
class _Ask:
    """A validated recall request, the mode in effect, how many results and how many candidate rows
    each arm is asked for."""

    req: g.RecallRequest
    mode: int
    top_k: int
    limit: int
    # The request's time window, as fields of the store's candidate requests: it filters.
    window: dict
    # The window of the time words read in the question, the same way, when it applies: it orders
    # (each arm's rows said in it first, then the arm's other rows), never filters.
    first: dict
    # The time words read in the question, for the response (None when none were read).
    understood: g.TimeWindow | None = None


def _validate(req: g.RecallRequest, caller: m.Caller | None, default_mode: int, candidate_limit: int) -> _Ask:
    """Checks a request before any call: INVALID_ARGUMENT for an empty or over-long question, an
    unknown mode or purpose, ``top_k`` outside 0..MAX_TOP_K, dense mode with ``include_superseded``,
    a bad time window;
    PERMISSION_DENIED for an ungranted purpose (checked by the store's keyword answer when ``caller``
    is None: the token is authenticated there). The mode is ``_mode``'s; ``top_k`` 0 means
    DEFAULT_TOP_K."""
    if not req.query.strip():
        raise InvalidArgument("query must not be empty", field="query")
    if len(req.query) > MAX_QUERY_CHARS:
        raise InvalidArgument(f"query is longer than {MAX_QUERY_CHARS} characters", field="query")
    if caller is None:
        purpose_name(req.purpose)
    else:
        check_purpose_granted(caller, req.purpose)
    mode = _mode(req, default_mode)
    if req.top_k < 0 or req.top_k > MAX_TOP_K:
        raise InvalidArgument(f"top_k must be 0..{MAX_TOP_K} (0 means {DEFAULT_TOP_K})", field="top_k")
    top_k = req.top_k or DEFAULT_TOP_K
    time_range(req, "occurred_after", "occurred_before")  # refused before the question is embedded
    window = window_fields(req)
    understood = _time_words(req, applied=not any(name in window for name in SAID_FIELDS))
    first = {}
    if understood is not None and understood.applied:
        sides = zip(SAID_FIELDS, ("start", "end"), strict=True)
        first = {**window, **{name: getattr(understood, side) for name, side in sides if understood.HasField(side)}}
    return _Ask(req, mode, top_k, max(candidate_limit, top_k), window, first, understood)


def _mode(req: g.RecallRequest, default_mode: int) -> int:
    """The mode a request recalls in: its own, else the workspace's ``default_mode``, else hybrid;
    lexical with ``include_superseded``, hybrid for a read in time that would be dense.
    INVALID_ARGUMENT for an unknown mode, or dense mode asked with either."""
    mode = req.mode or default_mode or m.RECALL_MODE_HYBRID
    if mode not in MODES:
        raise InvalidArgument("mode must be lexical, dense or hybrid", field="mode")
    if req.include_superseded:
        # Superseded memories have no vectors: a history recall is a keyword recall, and says so in
        # its mode (not as dense_available=false, which tells that the embedder could not answer).
        if req.mode == m.RECALL_MODE_DENSE:
            raise InvalidArgument(
                "include_superseded searches by keyword only (superseded memories have no vectors): "
                "use lexical or hybrid mode",
                field="include_superseded",
            )
        mode = m.RECALL_MODE_LEXICAL
    if in_time(req) and mode == m.RECALL_MODE_DENSE:
        # Superseded and invalidated memories have no vectors: the meaning arm alone would leave
        # them out of a read in time without saying so.
        if req.mode == m.RECALL_MODE_DENSE:
            raise InvalidArgument(
                "as_of and known_at reach superseded and invalidated memories by keyword only (they have no "
                "vectors): use lexical or hybrid mode",
                field="mode",
            )
        mode = m.RECALL_MODE_HYBRID
    return mode


class _Known(NamedTuple):
    """An authenticated caller and its workspace's settings (as AuthenticateResponse holds them)."""

    caller: m.Caller
    settings: store_pb2.WorkspaceSettings

    def keyword_fields(self) -> dict:
        """Who asks, in a keyword request: the caller, under the workspace's expiry gate."""
        return {"caller": self.caller, "expiry_days": self.settings.expiry_days}


@dataclass(frozen=True)
class _Folded:
    """A caller not authenticated yet: the store authenticates its token in the keyword calls."""

    presented: Presented

    def keyword_fields(self) -> dict:
        """Who asks, in a keyword request: the token and its narrowing (the store resolves both)."""
        narrowed = sorted(self.presented.narrowed) if self.presented.narrowed is not None else []
        return {"token": self.presented.token, "narrowed_purposes": narrowed}


class _StaleHint(Exception):
    """The workspace's default mode changed since the token was last accepted: the recall is asked
    again for ``known`` in the mode now in force."""

    def __init__(self, known: _Known) -> None:
        super().__init__("the workspace's default recall mode changed")
        self.known = known


def _windows(ask: _Ask) -> list[dict]:
    """The windows each arm is asked within: the request's own (or none), and, when the question's
    time words apply, the request's narrowed to theirs (an arm is then asked twice)."""
    return [ask.window, ask.first] if ask.first else [ask.window]


def _carried(keyword_rows: list) -> dict:
    """The dense request's ``held_memory_ids`` and ``wanted_memory_ids`` from the keyword arm's
    rows, as the recall uses them (``_said_first``: at most its limit, so within the store's bound):
    the memories they carried, and their readable rows that came without one."""
    held = {c.memory_id for c in keyword_rows if c.HasField("memory")}
    wanted = {c.memory_id for c in keyword_rows if c.chain_readable} - held
    return {"held_memory_ids": sorted(held), "wanted_memory_ids": sorted(wanted)}


def _said_first(answers: list[list], limit: int) -> list:
    """One arm's rows from its ``answers`` (``_windows``' order): the rows said in the time words'
    window first, in their order, then the arm's other rows in theirs, at most ``limit``. With one
    answer, that answer; with none (the arm was not asked), no rows."""
    if len(answers) < 2:
        return answers[0] if answers else []
    plain, first = answers
    seen = {c.memory_id for c in first}
    return (first + [c for c in plain if c.memory_id not in seen])[:limit]


def _time_words(req: g.RecallRequest, applied: bool) -> g.TimeWindow | None:
    """The time expression of the question (``gateway.time_words``) resolved against the request's
    reference time (default now), as the response reports it; None when it holds none or
    ``skip_time_words`` is set. INVALID_ARGUMENT for a bad ``reference_time``."""
    reference = datetime.datetime.now(datetime.UTC)
    if req.HasField("reference_time"):
        reference = check_timestamp(req.reference_time, "reference_time")
    if req.skip_time_words:
        return None
    read = time_words.understand(req.query, reference)
    if read is None:
        return None
    out = g.TimeWindow(words=read.words, applied=applied)
    if read.start is not None:
        out.start.FromDatetime(read.start)
    if read.end is not None:
        out.end.FromDatetime(read.end)
    return out


def _count(mode: int, lexical_rows, dense_rows, counts: g.RecallCounts, reranked: bool) -> None:
    """Counts one answered recall into RECALLS and CANDIDATES (labels hold only the fixed words above)."""
    flag = {True: "true", False: "false"}
    RECALLS.labels(
        vocabulary.name_of(m.RecallMode, mode), flag[counts.lexical > 0], flag[counts.dense > 0], flag[reranked]
    ).inc()
    if mode != m.RECALL_MODE_DENSE:
        CANDIDATES.labels("lexical").observe(len(lexical_rows))
    if mode != m.RECALL_MODE_LEXICAL:
        CANDIDATES.labels("dense").observe(len(dense_rows))
    CANDIDATES.labels("walked").observe(counts.fused)


def _items(
    order, memories: dict[str, m.Memory], cosine: dict[str, float], rerank_scores: dict[str, float]
) -> list[g.RecallItem]:
    """The response items of the rows in answer order, ranked 1.. over the rows still fetched (a
    row forgotten between the walk and the fetch is left out), with each stage's figures."""
    items = []
    for c in order:
        mem = memories.get(c.memory_id)
        if mem is None:
            continue
        items.append(
            g.RecallItem(
                memory=mem,
                rank=len(items) + 1,
                lexical_rank=c.lexical_rank,
                dense_rank=c.dense_rank,
                cosine=cosine.get(c.memory_id, 0.0),
                fused_score=c.fused_score,
                rerank_score=rerank_scores.get(c.memory_id, 0.0),
                identifier_matches=c.identifier_matches,
                all_terms=c.all_terms,
            )
        )
    return items
