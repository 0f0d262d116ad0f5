"""A memory's page, and the three changes made from it: correct, supersede and forget.

The page is Read (with history), the readable memories derived from it and the timeline of the
successors it leads to. A person the gateway lets change the memory (Read's ``may_change``) also finds
three forms on it. Each change takes two POSTs: the form's shows a review page (the text now and after,
its differences marked, or what a forget takes with it) with a Confirm button, whose POST makes the
call. Both carry the revision the person read, so a change made meanwhile is refused with "changed
since you read it" rather than overwritten: Correct, Supersede and Forget take it as
``expected_revision`` (the gateway refuses a stale one, ABORTED, in the change's own transaction).
After a change the browser is sent (303) to its result: the corrected memory, the
successor, or a page saying what was forgotten. A refusal shows the memory page again, as it is now,
with the message and what the person typed.
"""

from __future__ import annotations

import functools
import secrets

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.memory.v1 import memory_pb2 as m
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from servicekit import checks, vocabulary
from servicekit.errors import ServiceError, error_info
from web.calls import describe
from web.inputs import FormError, choice, number, whole
from web.screen import AUDIENCES, KINDS, Screen, http_status, require_token

# Derivations shown on a memory's page; the rest are one click away in browse.
DERIVATIONS_SHOWN = 50
# Successors a memory page follows for its timeline (a Read each).
TIMELINE_SHOWN = 20
# What each change's form sends besides its token and revision.
FIELDS = {
    "correct": ("title", "body", "confidence"),
    "supersede": ("kind", "title", "body", "confidence", "audience"),
    "forget": ("reason",),
}
# The memory page's notice after a change sent the browser to it (``?done=``).
DONE = {
    "corrected": "Corrected: this is revision {revision}; the text before is kept in its revisions below.",
    "superseded": "Superseded: this is the new memory; the one you replaced stays, marked superseded, and links here.",
}


# Why the forms are not offered, and what a change posted anyway is told (the gateway would refuse it
# alike, PERMISSION_DENIED).
NOT_YOURS = (
    "PERMISSION_DENIED: you may read this memory but not change it: a workspace memory is changed by its "
    "creator or an admin, a member-only memory by its member"
)


async def _derivations(screen: Screen, request: Request, memory_id: str) -> g.ListMemoriesResponse:
    """The readable memories derived from it, superseded ones too (the first ``DERIVATIONS_SHOWN``)."""
    req = g.ListMemoriesRequest(
        derived_from_id=memory_id, superseded=m.SUPERSEDED_FILTER_ALL, page_size=DERIVATIONS_SHOWN
    )
    return await screen.call(request, "ListMemories", req)


async def _timeline(screen: Screen, request: Request, first: m.Memory) -> list[m.Memory]:
    """The memory and the successors it leads to (each Read in turn, at most ``TIMELINE_SHOWN``), in
    order: when each claim held, and how the last one ended (docs/time.md). A successor the caller
    cannot read ends the line (Read redacts its id, so it is never followed)."""
    line = [first]
    while line[-1].superseded_by_id and len(line) < TIMELINE_SHOWN:
        line.append((await screen.call(request, "Read", g.ReadRequest(id=line[-1].superseded_by_id))).memory)
    return line


def _drafts(mem: m.Memory, open_form: str, values: dict[str, str]) -> dict[str, dict[str, str]]:
    """What each change form shows: the memory as read, and in ``open_form`` what the person sent."""
    drafts = {
        "correct": {"title": mem.title, "body": mem.body, "confidence": str(mem.confidence)},
        "supersede": {
            "kind": vocabulary.name_of(m.Kind, mem.kind),
            "title": mem.title,
            "body": mem.body,
            "confidence": str(mem.confidence),
            "audience": "",
        },
        "forget": {"reason": ""},
    }
    if open_form:
        drafts[open_form].update(values)
    return drafts


async def _page(
    request: Request,
    memory_id: str,
    *,
    status: int = 200,
    error: str = "",
    notice: str = "",
    open_form: str = "",
    values: dict[str, str] | None = None,
) -> Response:
    """The memory page, with a change's outcome (``error`` and its ``status``, or ``notice``) and, after
    a refusal, the form ``open_form`` holding what was sent (``values``)."""
    screen: Screen = request.app.state.screen
    context = {"memory": None, "derivations": None, "memory_id": memory_id, "timeline": [], "refusal": None}
    try:
        read = await screen.call(request, "Read", g.ReadRequest(id=memory_id, include_history=True))
        mem = read.memory
        context["memory"] = mem
        context["derivations"] = await _derivations(screen, request, memory_id)
        context["timeline"] = await _timeline(screen, request, mem)
        context["refusal"] = None if read.may_change else NOT_YOURS
    except grpc.RpcError as exc:
        # A change refused as NOT_FOUND finds the page NOT_FOUND too: said once.
        error = "; ".join(dict.fromkeys(x for x in (error, describe(exc)) if x))
        return await screen.render(
            request, "memory.html", status=max(status, http_status(exc)), error=error, notice=notice, **context
        )
    context["drafts"] = _drafts(mem, open_form, values or {})
    context["open_form"] = open_form
    notice = notice or DONE.get(request.query_params.get("done", ""), "").format(revision=mem.revision)
    return await screen.render(request, "memory.html", status=status, error=error, notice=notice, **context)


async def memory(request: Request) -> Response:
    """GET /memories/{id}: Read with history, the readable memories derived from it, its timeline and,
    for a person who may change it, the change forms."""
    return await _page(request, request.path_params["memory_id"])


def stale(read: int, current: int | str) -> str:
    """The refusal of a change made under revision ``read`` when the memory is at ``current``."""
    return (
        f"Changed since you read it: you read revision {read}, and it is now at revision {current} (shown "
        "below). Nothing was changed: read it again, and make your change again if it still applies."
    )


def _refused(exc: grpc.RpcError, read: int) -> str:
    """A failed change call for people: a stale revision as ``stale``, anything else as ``describe``."""
    info = error_info(exc)
    if exc.code() == grpc.StatusCode.ABORTED and info and "current_revision" in info.metadata:
        return f"{stale(read, info.metadata['current_revision'])} ({describe(exc)})"
    return describe(exc)


def _text(value) -> str:
    """A text field as sent, with a textarea's line breaks (CR LF on the wire, HTML's rule) back to LF."""
    return str(value).replace("\r\n", "\n")


def _values(data: FormData, change: str) -> dict[str, str]:
    """The fields of ``change`` the form sent (a review page sends only what it changes)."""
    return {name: _text(data[name]) for name in FIELDS[change] if name in data}


# --- what each change reviews and calls ------------------------------------------------------------


def _review_correct(mem: m.Memory, values: dict[str, str]) -> dict:
    """What a correction changes: the fields that differ from the memory as read (only those are
    sent on), checked as the store checks them (servicekit.checks)."""
    changed = {
        name: values[name] for name in ("title", "body") if name in values and values[name] != getattr(mem, name)
    }
    confidence = number("confidence", values.get("confidence"))
    if confidence is not None and confidence != mem.confidence:
        changed["confidence"] = values["confidence"]
        checks.check_confidence(confidence)
    if not changed:
        raise FormError("Nothing to correct: the title, body and confidence you sent are the memory's own.")
    after = {"title": changed.get("title", mem.title), "body": changed.get("body", mem.body)}
    checks.check_text(after["title"], after["body"])
    after["confidence"] = mem.confidence if "confidence" not in changed else confidence
    return {"carry": changed, "after": after}


def _successor(values: dict[str, str]) -> dict:
    """Supersede's fields of the successor the form describes (FormError for a value of the wrong shape)."""
    fields = {
        "kind": choice(KINDS, "kind", values.get("kind")),
        "title": values.get("title", ""),
        "body": values.get("body", ""),
        "audience": choice(AUDIENCES, "audience", values.get("audience")),
    }
    confidence = number("confidence", values.get("confidence"))
    if confidence is not None:
        fields["confidence"] = confidence
    return fields


def _review_supersede(mem: m.Memory, values: dict[str, str]) -> dict:
    successor = _successor(values)
    checks.check_text(successor["title"], successor["body"])
    if "confidence" in successor:
        checks.check_confidence(successor["confidence"])
    after = {
        "title": successor["title"],
        "body": successor["body"],
        "confidence": successor.get("confidence", 1.0),  # Supersede's default
        "kind": values.get("kind") or vocabulary.name_of(m.Kind, mem.kind),
        "narrowed": successor["audience"] == m.AUDIENCE_MEMBER and mem.audience != m.AUDIENCE_MEMBER,
    }
    return {"carry": values, "after": after}


def _review_forget(mem: m.Memory, values: dict[str, str]) -> dict:
    checks.check_reason(values.get("reason", ""))
    return {"carry": values, "after": None}


REVIEWS = {"correct": _review_correct, "supersede": _review_supersede, "forget": _review_forget}


async def _call(request: Request, change: str, memory_id: str, expected: int, data: FormData) -> str:
    """Makes the confirmed change; the URL of its result. grpc.RpcError when refused, FormError for a
    value of the wrong shape (each change carries the revision read: ABORTED when it is stale)."""
    screen: Screen = request.app.state.screen
    values = _values(data, change)
    if change == "correct":
        fields = {name: values[name] for name in ("title", "body") if name in values}
        confidence = number("confidence", values.get("confidence"))
        if confidence is not None:
            fields["confidence"] = confidence
        await screen.call(request, "Correct", g.CorrectRequest(id=memory_id, expected_revision=expected, **fields))
        return f"/memories/{memory_id}?done=corrected"
    if change == "supersede":
        req = g.SupersedeRequest(
            id=memory_id,
            expected_revision=expected,
            request_id=str(data.get("request_id", "")),
            **_successor(values),
        )
        successor = (await screen.call(request, "Supersede", req)).memory
        return f"/memories/{successor.id}?done=superseded"
    resp = await screen.call(
        request, "Forget", g.ForgetRequest(id=memory_id, reason=values.get("reason", ""), expected_revision=expected)
    )
    return f"/memories/{memory_id}/forgotten?count={len(resp.forgotten_ids)}"


async def change(request: Request, name: str) -> Response:
    """POST /memories/{id}/``name`` (correct, supersede or forget): without ``confirmed``, the review
    page of the change; with it (the review page's Confirm), the change, then its result (303)."""
    require_token(request)
    screen: Screen = request.app.state.screen
    memory_id = request.path_params["memory_id"]
    data = await request.form()
    values = _values(data, name)

    async def refused(status: int, error: str) -> Response:
        return await _page(request, memory_id, status=status, error=error, open_form=name, values=values)

    try:
        expected = whole("expected_revision", str(data.get("expected_revision", "")))
        if data.get("confirmed"):
            return RedirectResponse(await _call(request, name, memory_id, expected, data), status_code=303)
        read = await screen.call(request, "Read", g.ReadRequest(id=memory_id))
        mem = read.memory
        if not read.may_change:
            return await refused(403, NOT_YOURS)
        if mem.revision != expected:
            return await refused(409, stale(expected, mem.revision))
        review = REVIEWS[name](mem, values)
        derivations = await _derivations(screen, request, memory_id) if name == "forget" else None
    except FormError as exc:
        return await refused(400, str(exc))
    except ServiceError as exc:  # a check of servicekit.checks: what the gateway would answer
        return await refused(400, f"{exc.code.name}: {exc.message}")
    except grpc.RpcError as exc:
        return await refused(http_status(exc), _refused(exc, expected))
    return await screen.render(
        request,
        "change_review.html",
        change=name,
        memory=mem,
        derivations=derivations,
        request_id=f"web:{secrets.token_urlsafe(18)}",
        **review,
    )


async def forgotten(request: Request) -> Response:
    """GET /memories/{id}/forgotten: where a forget sends the browser. Says the memory is forgotten
    only when it can no longer be read; a memory still readable is shown instead."""
    require_token(request)
    screen: Screen = request.app.state.screen
    memory_id = request.path_params["memory_id"]
    try:
        await screen.call(request, "Read", g.ReadRequest(id=memory_id))
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.NOT_FOUND:
            return await screen.render(request, "error.html", status=http_status(exc), error=describe(exc))
        count = request.query_params.get("count", "")
        return await screen.render(
            request,
            "forgotten.html",
            memory_id=memory_id,
            count=int(count) if count.isdigit() and len(count) <= 6 else 1,
        )
    return RedirectResponse(f"/memories/{memory_id}", status_code=303)


ROUTES = [
    Route("/memories/{memory_id}", memory, methods=["GET"]),
    Route("/memories/{memory_id}/forgotten", forgotten, methods=["GET"]),
    *(
        Route(f"/memories/{{memory_id}}/{name}", functools.partial(change, name=name), methods=["POST"])
        for name in FIELDS
    ),
]
