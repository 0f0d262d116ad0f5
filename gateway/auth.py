"""Caller authentication from ``authorization: Bearer <token>`` gRPC metadata."""

from __future__ import annotations

import hmac
from pathlib import Path

from recallatron.store.v1 import store_pb2, store_pb2_grpc

from servicekit.errors import Unauthenticated


def bearer_token(context) -> str:
    """The bearer token of a call; UNAUTHENTICATED when absent or malformed."""
    for key, value in context.invocation_metadata():
        if key == "authorization":
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            break
    raise Unauthenticated("missing bearer token: send metadata 'authorization: Bearer <token>'")


def authenticate(store: store_pb2_grpc.StoreServiceStub, context) -> store_pb2.AuthenticateResponse:
    """Resolves the call's token to a caller and workspace settings through the store."""
    return store.Authenticate(store_pb2.AuthenticateRequest(token=bearer_token(context)))


class OperatorCredential:
    """The operator token (``recallatron up`` writes it into the data folder, mode 0600)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def check(self, context) -> None:
        """UNAUTHENTICATED unless the call carries the operator token (constant-time compare)."""
        token = bearer_token(context)
        try:
            expected = self.path.read_text().strip()
        except OSError:
            raise Unauthenticated("no operator credential is configured on this gateway") from None
        if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
            raise Unauthenticated("invalid operator credential")
