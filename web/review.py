"""The review pages: duplicate proposals, conflict flags and expiring memories, and their decisions.

Each list is the gateway's (ListDuplicateProposals, ListConflictFlags, ListExpiringMemories) for the
signed-in person, a page at a time; each decision is one gateway call (DecideDuplicateProposal,
ResolveConflictFlag, KeepMemory, Forget) with the revision the page showed, after which the page is
shown again, listed anew, with the call's result or its error as the gateway put it (a stale
revision names the current one). Nothing is judged here: which pairs are proposed, who may decide,
what a decision does are the gateway's rules.
"""

from __future__ import annotations

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from servicekit import vocabulary
from web.calls import describe
from web.inputs import FormError, choice, whole
from web.screen import PURPOSES, SUPERSEDED, Screen, decide, http_status, link, require_token

DECISIONS = vocabulary.values(m.DuplicateDecision)
RESOLUTIONS = vocabulary.values(m.ConflictResolution)


def title_of(mem: m.Memory) -> str:
    """How a notice names a memory: its title (or the start of its body) and its id."""
    name = mem.title or (mem.body[:60] + ("…" if len(mem.body) > 60 else ""))
    return f"“{name}” ({mem.id})"


async def _listed(request: Request, template: str, method: str, req, form: dict, outcome: dict, path: str):
    """Lists ``method(req)`` and renders ``template`` with the page, its next and first links, and
    ``outcome`` (a decision's notice or error, and its HTTP status); a failed list shows its error."""
    screen: Screen = request.app.state.screen
    params = {k: v for k, v in form.items() if k != "page_token"}
    context = {"form": form, "result": None, "next_link": "", "first_link": ""}
    status = outcome.pop("status", 200)
    try:
        resp = await screen.call(request, method, req)
    except grpc.RpcError as exc:
        error = "; ".join(x for x in (outcome.get("error"), describe(exc)) if x)
        return await screen.render(
            request, template, status=max(status, http_status(exc)), **context, **{**outcome, "error": error}
        )
    context["result"] = resp
    if resp.next_page_token:
        context["next_link"] = link(path, params, page_token=resp.next_page_token)
    if form.get("page_token"):
        context["first_link"] = link(path, params)
    return await screen.render(request, template, status=status, **context, **outcome)


# --- duplicate proposals -------------------------------------------------------------------------


def _duplicates_form(values) -> dict:
    return {
        "purpose": values.get("purpose") or "conversation",
        "page_size": values.get("page_size", ""),
        "page_token": values.get("page_token", ""),
    }


def _duplicates_request(form: dict) -> g.ListDuplicateProposalsRequest:
    return g.ListDuplicateProposalsRequest(
        purpose=choice(PURPOSES, "purpose", form["purpose"]),
        page_size=whole("page_size", form["page_size"]),
        page_token=form["page_token"],
    )


async def _duplicates_page(request: Request, form: dict, outcome: dict) -> Response:
    try:
        req = _duplicates_request(form)
    except FormError as exc:
        screen: Screen = request.app.state.screen
        return await screen.render(request, "duplicates.html", status=400, form=form, result=None, error=str(exc))
    return await _listed(request, "duplicates.html", "ListDuplicateProposals", req, form, outcome, "/duplicates")


async def duplicates(request: Request) -> Response:
    """GET /duplicates: the proposals of one purpose, best first, with the three decisions each."""
    require_token(request)
    return await _duplicates_page(request, _duplicates_form(request.query_params), {})


def _decision_notice(resp: g.DecideDuplicateProposalResponse) -> str:
    if resp.decision == m.DUPLICATE_DECISION_KEEP_BOTH:
        return "Kept both: this pair will not be proposed again."
    if resp.decision == m.DUPLICATE_DECISION_SUPERSEDE:
        text = f"Superseded {title_of(resp.superseded)} by {title_of(resp.kept)}."
        if resp.conflict_flag_id:
            text += " Both had confidence 0.8 or more, so the pair is flagged on the Conflicts page."
        return text
    return f"Forgot {len(resp.forgotten_ids)} memory(ies): {', '.join(resp.forgotten_ids)}."


async def decide_duplicate(request: Request) -> Response:
    """POST /duplicates/decide: keep both, supersede one by the other, or forget one."""
    require_token(request)
    data = await request.form()
    form = _duplicates_form(data)
    try:
        decision = choice(DECISIONS, "decision", str(data.get("decision", "")))
        req = g.DecideDuplicateProposalRequest(
            memory_a_id=str(data.get("memory_a_id", "")),
            memory_b_id=str(data.get("memory_b_id", "")),
            decision=decision,
            keep_id=str(data.get("keep_id", "")),
            expected_revision=whole("expected_revision", str(data.get("expected_revision", ""))),
            forget_id=str(data.get("forget_id", "")),
            reason=str(data.get("reason", "")),
        )
    except FormError as exc:
        outcome = {"error": str(exc), "status": 400}
    else:
        outcome = await decide(request, "DecideDuplicateProposal", req, _decision_notice)
    return await _duplicates_page(request, form, outcome)


# --- conflict flags ------------------------------------------------------------------------------


def _conflicts_form(values) -> dict:
    return {
        "include_resolved": values.get("include_resolved", ""),
        "page_size": values.get("page_size", ""),
        "page_token": values.get("page_token", ""),
    }


async def _conflicts_page(request: Request, form: dict, outcome: dict) -> Response:
    try:
        req = g.ListConflictFlagsRequest(
            include_resolved=bool(form["include_resolved"]),
            page_size=whole("page_size", form["page_size"]),
            page_token=form["page_token"],
        )
    except FormError as exc:
        screen: Screen = request.app.state.screen
        return await screen.render(request, "conflicts.html", status=400, form=form, result=None, error=str(exc))
    return await _listed(request, "conflicts.html", "ListConflictFlags", req, form, outcome, "/conflicts")


async def conflicts(request: Request) -> Response:
    """GET /conflicts: the conflict flags, newest first (open ones; resolved too on request)."""
    require_token(request)
    return await _conflicts_page(request, _conflicts_form(request.query_params), {})


def _resolution_notice(resp: g.ResolveConflictFlagResponse) -> str:
    if resp.flag.state == m.CONFLICT_FLAG_STATE_UNDONE:
        return (
            f"Undone: {title_of(resp.restored)} now carries the older memory's text; "
            f"{title_of(resp.flag.newer)} is superseded by it."
        )
    return f"Acknowledged: {title_of(resp.flag.newer)} stays the successor of {title_of(resp.flag.older)}."


async def resolve_conflict(request: Request) -> Response:
    """POST /conflicts/resolve: acknowledge a flag, or undo it (supersede back)."""
    require_token(request)
    data = await request.form()
    form = _conflicts_form(data)
    try:
        req = g.ResolveConflictFlagRequest(
            flag_id=str(data.get("flag_id", "")),
            resolution=choice(RESOLUTIONS, "resolution", str(data.get("resolution", ""))),
            expected_revision=whole("expected_revision", str(data.get("expected_revision", ""))),
        )
    except FormError as exc:
        outcome = {"error": str(exc), "status": 400}
    else:
        outcome = await decide(request, "ResolveConflictFlag", req, _resolution_notice)
    return await _conflicts_page(request, form, outcome)


# --- expiring memories ---------------------------------------------------------------------------


def _expiring_form(values) -> dict:
    return {
        "purpose": values.get("purpose", ""),
        "superseded": values.get("superseded", ""),
        "page_size": values.get("page_size", ""),
        "page_token": values.get("page_token", ""),
    }


async def _expiring_page(request: Request, form: dict, outcome: dict) -> Response:
    try:
        req = g.ListExpiringMemoriesRequest(
            purpose=choice(PURPOSES, "purpose", form["purpose"]),
            superseded=choice(SUPERSEDED, "superseded", form["superseded"]),
            page_size=whole("page_size", form["page_size"]),
            page_token=form["page_token"],
        )
    except FormError as exc:
        screen: Screen = request.app.state.screen
        return await screen.render(request, "expiring.html", status=400, form=form, result=None, error=str(exc))
    return await _listed(request, "expiring.html", "ListExpiringMemories", req, form, outcome, "/expiring")


async def expiring(request: Request) -> Response:
    """GET /expiring: the memories the expiry gate hides from recall, oldest first, to keep or forget."""
    require_token(request)
    return await _expiring_page(request, _expiring_form(request.query_params), {})


async def keep_memory(request: Request) -> Response:
    """POST /expiring/keep: KeepMemory under the revision shown (counts as an update)."""
    require_token(request)
    data = await request.form()
    try:
        req = g.KeepMemoryRequest(
            id=str(data.get("id", "")),
            expected_revision=whole("expected_revision", str(data.get("expected_revision", ""))),
        )
    except FormError as exc:
        outcome = {"error": str(exc), "status": 400}
    else:
        outcome = await decide(
            request,
            "KeepMemory",
            req,
            lambda resp: f"Kept {title_of(resp.memory)}: it is back in recall (changed now).",
        )
    return await _expiring_page(request, _expiring_form(data), outcome)


async def forget_memory(request: Request) -> Response:
    """POST /expiring/forget: Forget (and everything derived from it), with the reason given."""
    require_token(request)
    data = await request.form()
    req = g.ForgetRequest(id=str(data.get("id", "")), reason=str(data.get("reason", "")))
    outcome = await decide(
        request,
        "Forget",
        req,
        lambda resp: f"Forgot {len(resp.forgotten_ids)} memory(ies): {', '.join(resp.forgotten_ids)}.",
    )
    return await _expiring_page(request, _expiring_form(data), outcome)


ROUTES = [
    Route("/duplicates", duplicates, methods=["GET"]),
    Route("/duplicates/decide", decide_duplicate, methods=["POST"]),
    Route("/conflicts", conflicts, methods=["GET"]),
    Route("/conflicts/resolve", resolve_conflict, methods=["POST"]),
    Route("/expiring", expiring, methods=["GET"]),
    Route("/expiring/keep", keep_memory, methods=["POST"]),
    Route("/expiring/forget", forget_memory, methods=["POST"]),
]
