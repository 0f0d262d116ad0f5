"""The web screen's one way to the gateway: a gRPC call with the person's own member token.

The screen keeps no credential and no rule of its own: each call carries the token of the browser's
cookie as ``authorization: Bearer <token>`` (``client.bearer``, what ``gateway.auth`` reads),
and the gateway decides everything, who may read what included. The stubs are synchronous (the
CLI's); each call runs in Starlette's thread pool so a slow gateway holds up only its own request.
"""

from __future__ import annotations

import grpc
from recallatron.gateway.v1 import gateway_pb2_grpc
from starlette.concurrency import run_in_threadpool

from client import bearer
from servicekit import clients

# How long one page waits for one call before it shows DEADLINE_EXCEEDED. Recall's own internal
# deadlines are shorter (embed 2 s, re-rank 3 s: docs/architecture.md, "Deadlines"); 30 s is the
# gateway's default for an internal call whose caller set none (servicekit.limits.INTERNAL_DEADLINE_SECONDS).
CALL_TIMEOUT_SECONDS = 30.0


class LoggedOut(Exception):
    """The browser has no token, or the gateway refused it (UNAUTHENTICATED): the login page is shown
    with ``message`` (empty when there simply was no token)."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


def describe(exc: grpc.RpcError) -> str:
    """A failed call for people: the status code name and the gateway's message, e.g.
    ``ABORTED: revision conflict: expected 1, current 2`` (the CLI's wording, ``cli.command.fail``)."""
    code = exc.code()
    name = code.name if code is not None else "UNKNOWN"
    return f"{name}: {exc.details() or 'no message'}"


class Gateway:
    """The public MemoryService over one channel to ``addr``, shared by every request of the screen."""

    def __init__(self, addr: str) -> None:
        self.addr = addr
        self.channel = clients.channel(addr)
        self.memory = gateway_pb2_grpc.MemoryServiceStub(self.channel)

    def close(self) -> None:
        """Closes the channel."""
        self.channel.close()

    async def call(self, token: str | None, method: str, request):
        """``MemoryService.<method>(request)`` as the member whose token this is; returns the response.

        LoggedOut without a token, with one that gRPC metadata cannot carry (not printable ASCII),
        or when the gateway answers UNAUTHENTICATED (a bad or revoked token: nothing about the caller
        is cached, so a revocation counts on the next call);
        grpc.RpcError for every other failure, for the page to show with ``describe``."""
        if not token:
            raise LoggedOut()
        if not (token.isascii() and token.isprintable()):  # gRPC metadata carries no other value
            raise LoggedOut("That is not a member token: member tokens are printable ASCII (rct_…).")
        stub_method = getattr(self.memory, method)
        try:
            return await run_in_threadpool(stub_method, request, metadata=bearer(token), timeout=CALL_TIMEOUT_SECONDS)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise LoggedOut(describe(exc)) from None
            raise
