"""ocat as an MCP client: the servers the config names, started beside the chat, whose tools
the chat model may call with the user's consent (docs/tools.md).

The rooms: `config` (the entries, as Claude Desktop writes them; no SDK), `consent` (who allowed
which tool, and asking the user), `servers` (the SDK's clients on a thread of their own, and
their processes). Only this package and ocat.mcp_server import the MCP SDK.
"""
