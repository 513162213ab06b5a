"""Slash commands as data: one registry read by the chat app, the line-mode chat and /help.

The registry and `run_command` are in `ocat.commands.registry`; each module here registers
its commands when imported, and importing this package imports them all. A handler returns a
CommandResult (ocat.commands.results); each front end renders it its own way.
"""

from __future__ import annotations

from ocat.commands.arguments import Arg
from ocat.commands.registry import (
    REGISTRY,
    Command,
    command,
    commands,
    is_command,
    require_store,
    require_store_and_model,
    run_command,
    run_step,
)
from ocat.commands.results import Choose, CommandResult, Confirm, Send, ShowThemes

from ocat.commands import memory as _memory  # noqa: F401
from ocat.commands import conversation as _conversation  # noqa: F401
from ocat.commands import thread_commands as _thread_commands  # noqa: F401
from ocat.commands import editing as _editing  # noqa: F401
from ocat.commands import browsing as _browsing  # noqa: F401
from ocat.commands import wake_commands as _wake_commands  # noqa: F401
from ocat.commands import tool_commands as _tool_commands  # noqa: F401
from ocat.commands import version_commands as _version_commands  # noqa: F401

__all__ = [
    "REGISTRY", "Arg", "Choose", "Command", "CommandResult", "Confirm", "Send", "ShowThemes", "command", "commands",
    "is_command", "require_store", "require_store_and_model", "run_command", "run_step",
]
