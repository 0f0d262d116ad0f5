"""The entity pages: look up, an entity's page, its merges and their undo, and the entity review.

Each page is the gateway's answer for the signed-in person (FindEntities, GetEntity,
ListEntityDuplicates), and each decision is one gateway call (MergeEntity, UnmergeEntity), after
which the page is shown again with the call's result or its error as the gateway put it. Who may
merge what, and what a reader sees of a merge, are the gateway's rules (docs/entities.md).
"""

from __future__ import annotations

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from web.calls import describe
from web.inputs import FormError, timestamp, whole
from web.screen import Screen, decide, http_status, link, require_token


async def lookup(request: Request) -> Response:
    """GET /entities: the entities of a name or alias (FindEntities), each linking to its page."""
    require_token(request)
    screen: Screen = request.app.state.screen
    looked_up = request.query_params.get("name", "").strip()
    context = {"looked_up": looked_up, "found": None}
    if not looked_up:
        return await screen.render(request, "entities.html", **context)
    try:
        req = g.FindEntitiesRequest(name=looked_up)
        context["found"] = (await screen.call(request, "FindEntities", req)).entities
    except grpc.RpcError as exc:
        return await screen.render(request, "entities.html", status=http_status(exc), error=describe(exc), **context)
    return await screen.render(request, "entities.html", **context)


async def _page(request: Request, entity: str, params: dict, outcome: dict) -> Response:
    """The page of ``entity`` (an id or a name) for ``params`` (as_of, page_size, page_token), with a
    decision's ``outcome`` (notice, or error and status)."""
    screen: Screen = request.app.state.screen
    status = outcome.pop("status", 200)
    context = {"entity": entity, "params": params, "result": None, "next_link": "", "first_link": ""}
    try:
        req = g.GetEntityRequest(
            entity=entity,
            as_of=timestamp("as_of", params.get("as_of")),
            page_size=whole("page_size", params.get("page_size")),
            page_token=params.get("page_token", ""),
        )
    except FormError as exc:
        return await screen.render(request, "entity.html", status=400, error=str(exc), **context)
    try:
        resp = await screen.call(request, "GetEntity", req)
    except grpc.RpcError as exc:
        error = "; ".join(x for x in (outcome.get("error"), describe(exc)) if x)
        return await screen.render(
            request, "entity.html", status=max(status, http_status(exc)), **context, **{**outcome, "error": error}
        )
    path = f"/entities/{resp.entity.id}"
    kept = {k: v for k, v in params.items() if k != "page_token"}
    context["result"] = resp
    if resp.next_page_token:
        context["next_link"] = link(path, kept, page_token=resp.next_page_token)
    if params.get("page_token"):
        context["first_link"] = link(path, kept)
    return await screen.render(request, "entity.html", status=status, **context, **outcome)


def _params(values) -> dict:
    return {name: str(values.get(name, "")) for name in ("as_of", "page_size", "page_token")}


async def entity_page(request: Request) -> Response:
    """GET /entities/{entity}: the entity page (GetEntity), by id or by name."""
    require_token(request)
    return await _page(request, request.path_params["entity"], _params(request.query_params), {})


async def merge(request: Request) -> Response:
    """POST /entities/merge: merge ``entity_id`` into ``into_id`` with a reason; then the page of
    ``back`` (the review, or an entity's page)."""
    require_token(request)
    data = await request.form()
    req = g.MergeEntityRequest(
        entity_id=str(data.get("entity_id", "")),
        into_id=str(data.get("into_id", "")),
        reason=str(data.get("reason", "")),
    )
    outcome = await decide(
        request,
        "MergeEntity",
        req,
        lambda resp: f"Merged {resp.merge.entity_id} into {resp.merge.into_id}. Undo it from the entity's page.",
    )
    if str(data.get("back", "")) == "review":
        return await _review(request, _review_form(data), outcome)
    return await _page(request, req.into_id or req.entity_id, {}, outcome)


async def unmerge(request: Request) -> Response:
    """POST /entities/unmerge: undo the merges of ``entity_id``; then the page of ``back``."""
    require_token(request)
    data = await request.form()
    req = g.UnmergeEntityRequest(entity_id=str(data.get("entity_id", "")))
    outcome = await decide(
        request,
        "UnmergeEntity",
        req,
        lambda resp: (
            f"Undid the merge of {resp.merge.entity_id} into {resp.merge.into_id}"
            + (f" and {len(resp.also_undone)} more" if resp.also_undone else "")
            + "."
        ),
    )
    return await _page(request, str(data.get("back", "")) or req.entity_id, {}, outcome)


def _review_form(values) -> dict:
    return {"page_size": str(values.get("page_size", "")), "page_token": str(values.get("page_token", ""))}


async def _review(request: Request, form: dict, outcome: dict) -> Response:
    screen: Screen = request.app.state.screen
    status = outcome.pop("status", 200)
    context = {"form": form, "result": None, "next_link": "", "first_link": ""}
    try:
        req = g.ListEntityDuplicatesRequest(
            page_size=whole("page_size", form["page_size"]), page_token=form["page_token"]
        )
        resp = await screen.call(request, "ListEntityDuplicates", req)
    except FormError as exc:
        return await screen.render(request, "entity_review.html", status=400, error=str(exc), **context)
    except grpc.RpcError as exc:
        error = "; ".join(x for x in (outcome.get("error"), describe(exc)) if x)
        return await screen.render(
            request,
            "entity_review.html",
            status=max(status, http_status(exc)),
            **context,
            **{**outcome, "error": error},
        )
    context["result"] = resp
    params = {k: v for k, v in form.items() if k != "page_token"}
    if resp.next_page_token:
        context["next_link"] = link("/entities/review", params, page_token=resp.next_page_token)
    if form["page_token"]:
        context["first_link"] = link("/entities/review", params)
    return await screen.render(request, "entity_review.html", status=status, **context, **outcome)


async def review(request: Request) -> Response:
    """GET /entities/review: entity duplicate proposals, best first, each with its merge buttons."""
    require_token(request)
    return await _review(request, _review_form(request.query_params), {})


# /entities/review before /entities/{entity}: "review" is a page, not an entity's name.
ROUTES = [
    Route("/entities", lookup, methods=["GET"]),
    Route("/entities/review", review, methods=["GET"]),
    Route("/entities/merge", merge, methods=["POST"]),
    Route("/entities/unmerge", unmerge, methods=["POST"]),
    Route("/entities/{entity}", entity_page, methods=["GET"]),
]
