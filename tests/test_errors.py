"""The one error table: domain errors, downstream statuses and database trouble map to the right code."""

import grpc
import psycopg
import psycopg_pool
from google.rpc import code_pb2, error_details_pb2, status_pb2

from servicekit.errors import Aborted, InvalidArgument, NotFound, status_for


def code(exc) -> grpc.StatusCode:
    return status_for(exc).code


def detail(status: grpc.Status) -> tuple[status_pb2.Status, error_details_pb2.ErrorInfo]:
    """The google.rpc.Status a caller receives in the trailers, and its ErrorInfo detail."""
    ((key, raw),) = status.trailing_metadata
    assert key == "grpc-status-details-bin"
    proto = status_pb2.Status.FromString(raw)
    info = error_details_pb2.ErrorInfo()
    assert len(proto.details) == 1 and proto.details[0].Unpack(info)
    return proto, info


def test_domain_errors_keep_their_code_and_detail():
    status = status_for(Aborted("revision conflict: expected 2, current 3", current_revision=3))
    assert status.code == grpc.StatusCode.ABORTED and status.details == "revision conflict: expected 2, current 3"
    proto, info = detail(status)
    assert (proto.code, proto.message) == (code_pb2.ABORTED, status.details)
    assert (info.reason, info.domain, dict(info.metadata)) == (
        "REVISION_CONFLICT",
        "recallatron",
        {"current_revision": "3"},
    )
    status = status_for(InvalidArgument("limit must be 1..1000", field="limit"))
    assert status.code == grpc.StatusCode.INVALID_ARGUMENT
    assert (detail(status)[1].reason, dict(detail(status)[1].metadata)) == ("INVALID_ARGUMENT", {"field": "limit"})
    status = status_for(NotFound("memory not found"))
    assert status.code == grpc.StatusCode.NOT_FOUND and status.details == "memory not found"
    assert (detail(status)[1].reason, dict(detail(status)[1].metadata)) == ("NOT_FOUND", {})


def test_database_trouble_is_unavailable_or_aborted_never_internal():
    assert code(psycopg.OperationalError("too many clients")) == grpc.StatusCode.UNAVAILABLE
    assert code(psycopg_pool.PoolTimeout("no connection")) == grpc.StatusCode.UNAVAILABLE
    assert code(psycopg.errors.DeadlockDetected("deadlock")) == grpc.StatusCode.ABORTED
    assert code(psycopg.errors.SerializationFailure("retry")) == grpc.StatusCode.ABORTED


def test_anything_else_is_internal_with_a_generic_message():
    status = status_for(KeyError("secret detail"))
    assert status.code == grpc.StatusCode.INTERNAL and status.details == "internal error"
    assert detail(status)[1].reason == "INTERNAL" and "secret" not in str(detail(status))
