"""The caller's credential as gRPC metadata. Nothing else is imported here: ``recallatron hook``
takes only this and must start fast."""

from __future__ import annotations

Metadata = tuple[tuple[str, str], ...]


def bearer(token: str) -> Metadata:
    """gRPC metadata carrying ``token`` as ``authorization: Bearer <token>`` (what gateway.auth reads)."""
    return (("authorization", f"Bearer {token}"),)
