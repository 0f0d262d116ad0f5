"""The gateway's public stubs with the caller's credential."""

from __future__ import annotations

from recallatron.gateway.v1 import gateway_pb2_grpc

from client.credential import bearer
from servicekit import clients


class Gateway:
    """Stubs of the public services plus the caller's credential."""

    def __init__(self, addr: str, token: str | None) -> None:
        self.channel = clients.channel(addr)
        self.memory = gateway_pb2_grpc.MemoryServiceStub(self.channel)
        self.admin = gateway_pb2_grpc.AdminServiceStub(self.channel)
        self.metadata = bearer(token) if token else ()

    def close(self) -> None:
        """Closes the channel."""
        self.channel.close()
