"""Structured logs: one JSON object per line, and the request id that ties a call's lines together.

``configure`` (called once by ``recallatron serve``, the process of one service) puts structlog's
``ProcessorFormatter`` on the root logger's one handler, so records of the standard library's
``logging`` (this project's modules, gRPC, psycopg_pool, yoyo, the model libraries) and of structlog
loggers come out the same: one JSON object per line on stderr, which ``recallatron up`` writes to
``<home>/logs/<service>.log``. Every line has ``timestamp`` (ISO 8601, UTC), ``level``, ``logger``
and ``event`` (the message); a line written while a call is handled also has ``request_id`` and
``rpc`` (the full method name); ``exception`` holds a traceback when there is one.

A request id follows a call through every service in the gRPC metadata key ``x-request-id``:
``RequestContextInterceptor`` (every server, outermost) takes the caller's id when it is well formed
(``REQUEST_ID_PATTERN``) or makes one (32 hex digits), binds it into structlog's context variables
for the call's thread, and returns it to the caller in the response's trailing metadata;
``RequestIdClientInterceptor`` (on every channel of ``servicekit.clients``) adds the bound id to
each internal call made while handling it. It is not the ``request_id`` field of the write requests,
which makes a write idempotent.

What is never logged (by this project's code at any level; tests/test_logs.py checks every line at the
default level, info): tokens, memory titles and bodies, recall questions, entity names, forget
reasons. The access line of each call (``rpc handled``) holds the method, status code and duration.
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import uuid
from collections import namedtuple

import grpc
import structlog

from servicekit.interceptor import OutcomeInterceptor

REQUEST_ID_KEY = "x-request-id"
# Accepted from a client as is: 1..64 letters, digits, '.', '_' or '-' (a UUID in any usual spelling
# fits); anything else is replaced by a generated id, so a log line never carries arbitrary text.
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
# Polled every few seconds by the gateway's dependency watch and the store's embedding worker: their
# access lines go out at DEBUG, or they would drown the calls people make.
QUIET_METHODS = frozenset({"/grpc.health.v1.Health/Check", "/recallatron.embed.v1.EmbedService/GetModelInfo"})


def _leading_keys(_logger, _name, event: dict) -> dict:
    """Puts timestamp, level, logger and event first in each line, for people reading the file."""
    head = {k: event.pop(k) for k in ("timestamp", "level", "logger", "event") if k in event}
    return {**head, **event}


_SHARED = (
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_logger_name,
    structlog.stdlib.add_log_level,
    structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp"),
)

# structlog's loggers hand their events to the standard library's logging, so the one handler that
# ``configure`` installs writes them; without it (a library user, the in-process tests) they go
# wherever that program's logging goes.
structlog.configure(
    processors=[
        structlog.stdlib.filter_by_level,
        *_SHARED,
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
    ],
    logger_factory=structlog.stdlib.LoggerFactory(),
    wrapper_class=structlog.stdlib.BoundLogger,
    cache_logger_on_first_use=True,
)
log = structlog.stdlib.get_logger(__name__)


def configure(level: str = "info", stream=None) -> None:
    """Makes every log record of this process a JSON line on ``stream`` (default stderr) at ``level``
    and above (debug, info, warning or error: ``Settings.log_level``). Calling it again replaces the
    handler: the root logger keeps exactly one. Python warnings and exceptions that end a thread go
    through logging too, so they are JSON lines as well."""
    root = logging.getLogger()
    root.handlers[:] = [json_handler(stream or sys.stderr)]
    root.setLevel(level.upper())
    logging.captureWarnings(True)
    threading.excepthook = _log_thread_exception


def json_handler(stream) -> logging.Handler:
    """A handler writing each record to ``stream`` as one JSON line (the one ``configure`` installs)."""
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=list(_SHARED),
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            _leading_keys,
            structlog.processors.JSONRenderer(),
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    return handler


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is not SystemExit:
        logging.getLogger("thread").error(
            "exception ended thread %s",
            args.thread.name if args.thread else "?",
            exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        )


def well_formed(request_id: str) -> bool:
    """Whether a client's ``x-request-id`` is used as is (``REQUEST_ID_PATTERN``)."""
    return REQUEST_ID_PATTERN.fullmatch(request_id) is not None


def incoming_request_id(metadata) -> str:
    """The caller's request id from invocation metadata when well formed, else a new one (uuid4 hex)."""
    for key, value in metadata or ():
        if key == REQUEST_ID_KEY and isinstance(value, str) and well_formed(value):
            return value
    return uuid.uuid4().hex


def current_request_id() -> str | None:
    """The request id of the call this thread is handling, if any."""
    return structlog.contextvars.get_contextvars().get("request_id")


class RequestContextInterceptor(OutcomeInterceptor):
    """Binds the call's request id (and method) for the logs, returns the id to the caller in the
    trailing metadata (of a failed call too), and writes one access line per call: ``rpc handled``
    with ``code`` (status name) and ``duration_ms``, at INFO (DEBUG for QUIET_METHODS).

    Trailing, not initial, metadata: sending the initial metadata early cost about 60 us more per
    call than setting the trailing metadata (medians of 3,000 calls each, interleaved, on this
    development machine), and a recall makes seven calls."""

    def around(self, method, inner, request, context):
        request_id = incoming_request_id(context.invocation_metadata())
        # Pool threads are reused: start from an empty context, and leave one behind.
        structlog.contextvars.clear_contextvars()
        with structlog.contextvars.bound_contextvars(request_id=request_id, rpc=method):
            context = _RequestIdContext(context, (REQUEST_ID_KEY, request_id))
            context.set_trailing_metadata(())
            return super().around(method, inner, request, context)

    def finished(self, method: str, code: grpc.StatusCode, seconds: float) -> None:
        level = logging.DEBUG if method in QUIET_METHODS else logging.INFO
        log.log(level, "rpc handled", code=code.name, duration_ms=round(seconds * 1e3, 3))


class _Status(namedtuple("_Status", ("code", "details", "trailing_metadata")), grpc.Status):
    """A ``grpc.Status`` with other trailing metadata."""


class _RequestIdContext:
    """A handler's ``grpc.ServicerContext`` whose trailing metadata, whatever the call ends with (a
    response, ``abort`` or ``abort_with_status``), also holds the request id; the rest is the
    context's own."""

    def __init__(self, context: grpc.ServicerContext, pair: tuple[str, str]) -> None:
        self._context, self._pair = context, pair

    def __getattr__(self, name):
        return getattr(self._context, name)

    def set_trailing_metadata(self, trailing_metadata) -> None:
        self._context.set_trailing_metadata((*trailing_metadata, self._pair))

    def abort_with_status(self, status: grpc.Status):
        trailing = (*(status.trailing_metadata or ()), self._pair)
        self._context.abort_with_status(_Status(status.code, status.details, trailing))


class _CallDetails(
    namedtuple("_CallDetails", ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")),
    grpc.ClientCallDetails,
):
    """A ``grpc.ClientCallDetails`` with other metadata (the pattern of grpc/grpc examples/python/interceptors)."""


class RequestIdClientInterceptor(grpc.UnaryUnaryClientInterceptor):
    """Adds the request id of the call being handled to every unary call made on the channel (unless
    the call sets ``x-request-id`` itself); outside a call it adds nothing."""

    def intercept_unary_unary(self, continuation, client_call_details, request):
        request_id = current_request_id()
        metadata = list(client_call_details.metadata or ())
        if request_id is None or any(key == REQUEST_ID_KEY for key, _ in metadata):
            return continuation(client_call_details, request)
        details = _CallDetails(
            client_call_details.method,
            client_call_details.timeout,
            [*metadata, (REQUEST_ID_KEY, request_id)],
            client_call_details.credentials,
            client_call_details.wait_for_ready,
            client_call_details.compression,
        )
        return continuation(details, request)
