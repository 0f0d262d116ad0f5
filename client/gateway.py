"""The gateway's public stubs with the caller's credential."""

from __future__ import annotations

import copy

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
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

    def with_token(self, token: str) -> Gateway:
        """The same connection with another caller's credential (closing either closes both)."""
        other = copy.copy(self)
        other.metadata = bearer(token)
        return other

    def new_workspace(self, name: str) -> tuple[str, str]:
        """Creates a workspace named ``name``, or, when that name is taken (names are unique),
        ``name (2)``, ``name (3)`` ... the first one free; returns (its id, the name it got). For
        programs that make workspaces of their own (eval, the demo, benches): a kept earlier run's
        workspace does not stop the next run."""
        for n in range(1, 1000):
            candidate = name if n == 1 else f"{name} ({n})"
            try:
                resp = self.admin.CreateWorkspace(g.CreateWorkspaceRequest(name=candidate), metadata=self.metadata)
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.ALREADY_EXISTS:
                    continue
                raise
            return resp.workspace_id, candidate
        raise RuntimeError(f"no free workspace name like {name!r}")

    def close(self) -> None:
        """Closes the channel."""
        self.channel.close()
