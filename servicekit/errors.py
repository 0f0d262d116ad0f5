"""Domain errors and their one mapping to gRPC status codes (the table below is the only one).

Handlers raise a ``ServiceError`` subclass; ``ErrorInterceptor`` turns it into a status carrying a
``google.rpc.ErrorInfo`` detail (AIP-193). Errors from a downstream service keep their code when a
caller could have caused them, become UNAVAILABLE when the dependency is down, and anything else
becomes INTERNAL with a generic message while the trace goes only to the log. Database trouble is
UNAVAILABLE (connection lost, pool exhausted) or ABORTED (deadlock, serialization failure).
"""

from __future__ import annotations

import logging

import grpc
import psycopg
import psycopg_pool
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

DOMAIN = "recallatron"
log = logging.getLogger(__name__)


class ServiceError(Exception):
    """Base of every error a caller can cause; ``code`` is the gRPC status it maps to, and
    ``retry_after`` (seconds), when set, a RetryInfo detail saying when to try again."""

    code = grpc.StatusCode.INTERNAL
    reason = "INTERNAL"
    retry_after: float | None = None

    def __init__(self, message: str, **metadata: object) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = {k: str(v) for k, v in metadata.items()}


class InvalidArgument(ServiceError):
    """Malformed or out-of-range input."""

    code, reason = grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT"


class NotFound(ServiceError):
    """Missing, or not readable by the caller: the two are indistinguishable (AIP-211)."""

    code, reason = grpc.StatusCode.NOT_FOUND, "NOT_FOUND"


class PermissionDenied(ServiceError):
    """Readable but not the caller's to change, or a purpose not granted."""

    code, reason = grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED"


class Aborted(ServiceError):
    """Revision conflict (AIP-154); metadata carries ``current_revision``."""

    code, reason = grpc.StatusCode.ABORTED, "REVISION_CONFLICT"


class FailedPrecondition(ServiceError):
    """Refused derivation or a superseded target."""

    code, reason = grpc.StatusCode.FAILED_PRECONDITION, "FAILED_PRECONDITION"


class AlreadyExists(ServiceError):
    """A request id already bound to a different request (store_service/records/idempotency.py); metadata
    carries ``request_id`` and the ``operation`` it is bound to."""

    code, reason = grpc.StatusCode.ALREADY_EXISTS, "REQUEST_ID_REUSED"


class Unauthenticated(ServiceError):
    """Missing or bad credential."""

    code, reason = grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED"


class Unavailable(ServiceError):
    """A dependency (database, model, service) is down."""

    code, reason = grpc.StatusCode.UNAVAILABLE, "UNAVAILABLE"


# One workspace's database cannot be used now, while the service that says so works: it is being
# copied to another server (store_service/control/moves.py), or its server is down. Such refusals
# pass through the gateway as they are, and no circuit breaker counts them against the service.
MOVING = "WORKSPACE_MOVING"
WORKSPACE_UNAVAILABLE = "WORKSPACE_UNAVAILABLE"
WORKSPACE_REASONS = frozenset({MOVING, WORKSPACE_UNAVAILABLE})


MOVING_MESSAGE = "the workspace is being moved to another database server; retry in a few seconds"


class WorkspaceMoving(Unavailable):
    """The workspace's database is read-only while it is copied to another server."""

    reason, retry_after = MOVING, 2.0


class WorkspaceUnavailable(Unavailable):
    """The workspace's database server does not answer (other workspaces are not affected)."""

    reason, retry_after = WORKSPACE_UNAVAILABLE, 1.0


class DeadlineExceeded(ServiceError):
    """The caller's deadline passed before the work could commit; nothing was written."""

    code, reason = grpc.StatusCode.DEADLINE_EXCEEDED, "DEADLINE_EXCEEDED"


# Codes a caller can cause: passed through unchanged when a downstream service returns them.
CALLER_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.RESOURCE_EXHAUSTED,  # what the caller sent or asked for is too large
    }
)
DOWN_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


def status_proto(
    code: grpc.StatusCode,
    message: str,
    reason: str,
    metadata: dict[str, str] | None = None,
    retry_after: float | None = None,
) -> status_pb2.Status:
    """A ``google.rpc.Status`` with an ErrorInfo detail (also the per-entry error of a batch), and a
    RetryInfo detail when ``retry_after`` (seconds) says when to try again."""
    details = [error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN, metadata=metadata or {})]
    if retry_after is not None:
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromMilliseconds(int(retry_after * 1000))
        details.append(retry)
    packed = []
    for detail in details:
        packed.append(any_pb2.Any())
        packed[-1].Pack(detail)
    return status_pb2.Status(code=getattr(code_pb2, code.name), message=message, details=packed)


def to_status(code: grpc.StatusCode, message: str, reason: str, metadata: dict[str, str] | None = None):
    """Builds a ``grpc.Status`` with an ErrorInfo detail, for ``context.abort_with_status``."""
    return rpc_status.to_status(status_proto(code, message, reason, metadata))


def _detail(err: grpc.RpcError, kind):
    """The first detail of message type ``kind`` of a failed call, if it has one."""
    status = rpc_status.from_call(err)
    for detail in status.details if status else ():
        if detail.Is(kind.DESCRIPTOR):
            found = kind()
            detail.Unpack(found)
            return found
    return None


def error_info(err: grpc.RpcError) -> error_details_pb2.ErrorInfo | None:
    """Reads the ErrorInfo detail of a failed call, if it has one."""
    return _detail(err, error_details_pb2.ErrorInfo)


def retry_info(err: grpc.RpcError) -> error_details_pb2.RetryInfo | None:
    """Reads the RetryInfo detail of a failed call, if it has one."""
    return _detail(err, error_details_pb2.RetryInfo)


def status_for(exc: BaseException) -> grpc.Status:
    """Maps any exception raised in a handler to the status the caller receives."""
    return rpc_status.to_status(status_proto_for(exc))


def status_proto_for(exc: BaseException) -> status_pb2.Status:
    """The ``google.rpc.Status`` of ``status_for``: the one mapping, also used per entry of a batch."""
    if isinstance(exc, ServiceError):
        return status_proto(exc.code, exc.message, exc.reason, exc.metadata, exc.retry_after)
    if isinstance(exc, grpc.RpcError) and isinstance(exc, grpc.Call):
        code = exc.code()
        if code in CALLER_CODES:
            info = error_info(exc)
            return status_proto(
                code,
                exc.details() or code.name,
                info.reason if info else code.name,
                dict(info.metadata) if info else None,
            )
        if code in DOWN_CODES:
            info = error_info(exc)
            if code == grpc.StatusCode.UNAVAILABLE and info is not None and info.reason in WORKSPACE_REASONS:
                retry = retry_info(exc)
                after = retry.retry_delay.ToMilliseconds() / 1000 if retry is not None else None
                return status_proto(code, exc.details(), info.reason, dict(info.metadata), after)
            return status_proto(grpc.StatusCode.UNAVAILABLE, "a dependency is unavailable; retry later", "UNAVAILABLE")
    if isinstance(exc, (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)):
        return status_proto(grpc.StatusCode.ABORTED, "concurrent change; retry the call", "CONCURRENT_CHANGE")
    if isinstance(exc, psycopg.DataError):  # a value PostgreSQL cannot store (validation missed it)
        log.warning("data error from input: %s", exc)
        return status_proto(grpc.StatusCode.INVALID_ARGUMENT, "a value in the request is not valid", "INVALID_ARGUMENT")
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):  # only a move makes a workspace read-only
        return status_proto_for(WorkspaceMoving(MOVING_MESSAGE))
    if isinstance(exc, (psycopg.OperationalError, psycopg_pool.PoolTimeout)):
        log.warning("database unavailable: %s", exc)
        return status_proto(grpc.StatusCode.UNAVAILABLE, "the database is unavailable; retry later", "UNAVAILABLE")
    log.exception("unhandled error in handler", exc_info=exc)
    return status_proto(grpc.StatusCode.INTERNAL, "internal error", "INTERNAL")
