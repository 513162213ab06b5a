"""Every memory operation, written once: search, add, get, delete, threads, stats, import, export.

Each is a function taking open stores and plain values and returning a typed result; the
CLI (`ocat.headless.actions`), the slash commands (`ocat.commands`), the MCP tools
(`ocat.mcp_server.tools`) and the screens call them and only render what comes back.
Textual-free, and nothing heavy is imported until an operation runs.
"""
