"""The MCP server: Recallatron's member calls as Model Context Protocol tools.

A thin adapter over the gateway's gRPC API (``guidance`` holds the text that tells a model how to
use its memory, ``render`` the compact text of a result, ``tools`` the eight tools, ``bundle`` the
context bundle's prompt and resource, ``server`` the stdio and streamable-HTTP transports).
``recallatron mcp`` (cli/mcp_command.py) starts it.
"""
