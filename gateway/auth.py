"""Caller authentication from ``authorization: Bearer <token>`` gRPC metadata, optionally narrowed to
fewer purposes by ``recallatron-purposes`` metadata."""

from __future__ import annotations

import hmac
from pathlib import Path

from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2, store_pb2_grpc

from servicekit import vocabulary
from servicekit.errors import InvalidArgument, PermissionDenied, Unauthenticated

# Metadata a caller sends to act with fewer purposes than its token grants: short purpose names,
# comma-separated (``conversation,tasks``). A remote MCP sign-in (mcp_server/oauth.py) sends the
# purposes the person chose; narrowing here, on the caller the store resolved, keeps the one
# readability rule (the caller's granted purposes) in charge of every call.
PURPOSES_METADATA = "recallatron-purposes"
PURPOSE_OF = vocabulary.values(m.Purpose)


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
    """Resolves the call's token to a caller and workspace settings through the store, narrowed to the
    purposes of ``recallatron-purposes`` when the call sends it: INVALID_ARGUMENT for a name that is
    not a purpose, PERMISSION_DENIED for one the token does not grant (never widened)."""
    auth = store.Authenticate(store_pb2.AuthenticateRequest(token=bearer_token(context)))
    narrowed = narrowed_purposes(context)
    if narrowed is not None:
        missing = sorted(vocabulary.name_of(m.Purpose, p) for p in narrowed - set(auth.caller.granted_purposes))
        if missing:
            raise PermissionDenied(f"purpose not granted to this token: {', '.join(missing)}")
        granted = [p for p in auth.caller.granted_purposes if p in narrowed]
        del auth.caller.granted_purposes[:]
        auth.caller.granted_purposes.extend(granted)
    return auth


def narrowed_purposes(context) -> set[int] | None:
    """The purposes of the call's ``recallatron-purposes`` metadata, or None when it sends none."""
    for key, value in context.invocation_metadata():
        if key == PURPOSES_METADATA:
            names = [name.strip() for name in value.split(",")]
            unknown = [name for name in names if name not in PURPOSE_OF]
            if unknown or not names:
                raise InvalidArgument(
                    f"{PURPOSES_METADATA} must name purposes ({', '.join(PURPOSE_OF)}), comma-separated; "
                    f"got {value[:200]!r}",
                    field=PURPOSES_METADATA,
                )
            return {PURPOSE_OF[name] for name in names}
    return None


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
