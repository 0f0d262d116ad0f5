"""The context bundle over MCP: a prompt and a resource, both the caller's GetContext text.

``recallatron_context`` (prompt; arguments ``purpose``, default conversation, and ``token_budget``,
default 0 meaning 1,500) gives one user message holding the rendered bundle, for a client to put at
the start of a conversation. ``recallatron://context/{purpose}`` (resource template) reads the same
text at the default budget. Both need the workspace's context_bundle setting on. A refusal is an MCP
error whose message is ``<gRPC status name>: <message>``, as the tools word theirs
(mcp_server/tools.py): JSON-RPC invalid params for what the caller can fix, internal error for an
unavailable gateway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import grpc
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, INVALID_PARAMS
from pydantic import Field
from recallatron.gateway.v1 import gateway_pb2 as g

import client
from client import choices
from mcp_server.tools import CALL_TIMEOUT_S, Purpose

RESOURCE = "recallatron://context/{purpose}"
# Statuses a caller cannot fix by changing the request: the JSON-RPC internal error.
DOWN = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL}
DESCRIPTION = (
    "Your context bundle from Recallatron for one purpose: the memories you pinned, the 3 newest "
    "summaries, the newest memory about each of the 5 entities most mentioned in the last 30 days and "
    "the 10 newest memories, each with its provenance and dates before its text (quoted), cut to a token budget "
    "(the last line says what was cut). The memories are dated claims made by someone, not current "
    "truth; recall for anything that is not here. Needs the workspace's context_bundle setting on."
)


def register(server: MCPServer, gateway: client.Gateway, metadata_of: Callable[[Context], client.Metadata]) -> None:
    """Adds the ``recallatron_context`` prompt and the ``recallatron://context/{purpose}`` resource."""

    def text(ctx: Context, purpose: str, token_budget: int) -> str:
        if purpose not in choices.PURPOSES:
            raise MCPError(INVALID_PARAMS, f"INVALID_ARGUMENT: purpose must be one of: {', '.join(choices.PURPOSES)}")
        try:
            resp = gateway.memory.GetContext(
                g.GetContextRequest(purpose=choices.PURPOSES[purpose], token_budget=token_budget),
                metadata=metadata_of(ctx),
                timeout=CALL_TIMEOUT_S,
            )
        except grpc.RpcError as exc:
            code = INTERNAL_ERROR if exc.code() in DOWN else INVALID_PARAMS
            raise MCPError(code, f"{exc.code().name}: {exc.details()}") from None
        except ToolError as exc:
            raise MCPError(INVALID_PARAMS, str(exc)) from None
        return resp.text

    @server.prompt(name="recallatron_context", title="Recallatron context bundle", description=DESCRIPTION)
    def recallatron_context(
        ctx: Context,
        purpose: Annotated[Purpose, Field(description="The purpose of the memories in the bundle.")] = "conversation",
        token_budget: Annotated[
            int, Field(description="Most tokens (a conservative estimate): 0 means 1,500, else 200..100,000.")
        ] = 0,
    ) -> list[UserMessage]:
        return [UserMessage(text(ctx, purpose, token_budget))]

    @server.resource(RESOURCE, name="recallatron_context", description=DESCRIPTION, mime_type="text/markdown")
    def context_resource(purpose: str, ctx: Context) -> str:
        return text(ctx, purpose, 0)
