"""The one error table: domain errors, downstream statuses and database trouble map to the right code."""

import grpc
import psycopg
import psycopg_pool

from servicekit.errors import Aborted, InvalidArgument, NotFound, status_for


def code(exc) -> grpc.StatusCode:
    return status_for(exc).code


def test_domain_errors_keep_their_code_and_detail():
    status = status_for(Aborted("revision conflict", current_revision=3))
    assert status.code == grpc.StatusCode.ABORTED
    assert code(InvalidArgument("bad")) == grpc.StatusCode.INVALID_ARGUMENT
    assert code(NotFound("x")) == grpc.StatusCode.NOT_FOUND


def test_database_trouble_is_unavailable_or_aborted_never_internal():
    assert code(psycopg.OperationalError("too many clients")) == grpc.StatusCode.UNAVAILABLE
    assert code(psycopg_pool.PoolTimeout("no connection")) == grpc.StatusCode.UNAVAILABLE
    assert code(psycopg.errors.DeadlockDetected("deadlock")) == grpc.StatusCode.ABORTED
    assert code(psycopg.errors.SerializationFailure("retry")) == grpc.StatusCode.ABORTED


def test_anything_else_is_internal_with_a_generic_message():
    status = status_for(KeyError("secret detail"))
    assert status.code == grpc.StatusCode.INTERNAL and "secret" not in status.details
