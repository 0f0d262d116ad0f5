"""Caller authentication from ``authorization: Bearer <token>`` gRPC metadata, optionally narrowed to
fewer purposes by ``recallatron-purposes`` metadata."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from recallatron.memory.v1 import memory_pb2 as m
from recallatron.store.v1 import store_pb2, store_pb2_grpc

from servicekit import vocabulary
from servicekit.caller import narrow
from servicekit.errors import InvalidArgument, Unauthenticated

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


@dataclass(frozen=True)
class Presented:
    """What a call presents to be authenticated: its bearer token and the purposes it narrows to
    (``recallatron-purposes``; None when it sends none). Nothing here is checked yet."""

    token: str
    narrowed: frozenset[int] | None


def presented(context) -> Presented:
    """The call's token and narrowing: UNAUTHENTICATED without a bearer token, INVALID_ARGUMENT for a
    ``recallatron-purposes`` name that is not a purpose."""
    token = bearer_token(context)
    narrowed = narrowed_purposes(context)
    return Presented(token, None if narrowed is None else frozenset(narrowed))


def resolve(store: store_pb2_grpc.StoreServiceStub, who: Presented) -> store_pb2.AuthenticateResponse:
    """Resolves ``who`` to a caller and workspace settings through the store, narrowed to its purposes
    when it names some: PERMISSION_DENIED for one the token does not grant (never widened)."""
    auth = store.Authenticate(store_pb2.AuthenticateRequest(token=who.token))
    if who.narrowed is not None:
        narrow(auth.caller, who.narrowed)
    return auth


def authenticate(store: store_pb2_grpc.StoreServiceStub, context) -> store_pb2.AuthenticateResponse:
    """Resolves the call's token to a caller and workspace settings through the store, narrowed to the
    purposes of ``recallatron-purposes`` when the call sends it: INVALID_ARGUMENT for a name that is
    not a purpose, PERMISSION_DENIED for one the token does not grant (never widened). The token
    is checked first."""
    auth = store.Authenticate(store_pb2.AuthenticateRequest(token=bearer_token(context)))
    narrowed = narrowed_purposes(context)
    if narrowed is not None:
        narrow(auth.caller, narrowed)
    return auth


class Accepted(NamedTuple):
    """What the store answered for a sign-in lately: its workspace's default recall mode and the
    purposes the caller acts with (narrowed as the call asked)."""

    default_mode: int
    purposes: frozenset[int]


class AcceptedLately:
    """Sign-ins (a token and the purposes it narrows to) the store accepted within the last
    ``seconds``, by sha256 digest (tokens are not kept), each with what it answered (``Accepted``):
    at most ``size``, the oldest dropped first.

    A hint, never a credential: every call is still authenticated by the store, so a revoked token
    fails on its next call. It only lets a recall authenticate in its first keyword call instead of
    a call of its own (``gateway.recall``), and start embedding the question before the store has
    answered, which costs a wasted embedding when the token was refused since: so only sign-ins
    accepted lately get it, only for a purpose they act with, and one the store refuses is dropped
    at once."""

    def __init__(self, seconds: float = 300.0, size: int = 10_000, clock=time.monotonic) -> None:
        self.seconds, self.size, self.clock = seconds, size, clock
        self._seen: OrderedDict[bytes, tuple[float, Accepted]] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(who: Presented) -> bytes:
        digest = hashlib.sha256(who.token.encode("utf-8", "surrogatepass"))
        digest.update(repr(sorted(who.narrowed) if who.narrowed is not None else None).encode())
        return digest.digest()

    def get(self, who: Presented) -> Accepted | None:
        """What the store answered for ``who`` if it accepted it lately, else None."""
        key = self._key(who)
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                return None
            if self.clock() - seen[0] > self.seconds:
                del self._seen[key]
                return None
            return seen[1]

    def accepted(self, who: Presented, caller: m.Caller, settings) -> None:
        """Notes that the store accepted ``who`` now as ``caller``, in a workspace of ``settings``."""
        key = self._key(who)
        with self._lock:
            self._seen[key] = (self.clock(), Accepted(settings.default_mode, frozenset(caller.granted_purposes)))
            self._seen.move_to_end(key)
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)

    def refused(self, who: Presented) -> None:
        """Forgets ``who``: the store refused it (its token or the purpose asked)."""
        with self._lock:
            self._seen.pop(self._key(who), None)


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
