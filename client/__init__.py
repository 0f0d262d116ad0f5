"""What a program that talks to Recallatron takes from one place: the gateway's stubs with the
caller's credential (``Gateway``, ``bearer``), the choices and limits a client checks before it sends
(``client.choices``), and a whole system started as a user starts it (``client.system``).

The command line, the web screen and the MCP server use it; so do the tests, the bench and the tools.
It imports no service's internals: only ``servicekit`` and the generated ``recallatron`` messages.
"""

from client.gateway import Gateway, Metadata, bearer

__all__ = ["Gateway", "Metadata", "bearer"]
