"""What a program that talks to Recallatron takes from one place: the gateway's stubs with the
caller's credential (``Gateway``, ``bearer``), the choices and limits a client checks before it sends
(``client.choices``), and a whole system started as a user starts it (``client.system``).

The command line, the web screen and the MCP server use it; so do the tests, the bench and the tools.
It imports no service's internals: only ``servicekit`` and the generated ``recallatron`` messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from client.credential import Metadata, bearer

if TYPE_CHECKING:
    from client.gateway import Gateway

__all__ = ["Gateway", "Metadata", "bearer"]


def __getattr__(name: str):
    # Gateway brings gRPC channels, breakers and metrics (servicekit.clients); `recallatron hook`
    # takes only the bearer metadata and must start fast, so the stubs load when first asked for.
    if name == "Gateway":
        from client.gateway import Gateway

        return Gateway
    raise AttributeError(f"module 'client' has no attribute {name!r}")
