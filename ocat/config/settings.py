"""The settings ocat is configured with: one frozen dataclass per config section.

Field metadata holds each key's one-line doc and the checks `ocat.config.keys` applies; the
default values live in `config/default.yaml`, documented key by key. The `chunking` section is
`ocat.text.chunking.ChunkingSettings`, beside the code that splits by it (text is below config).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from ocat.config import locations
from ocat.config.mcp_servers import McpServerConfig
from ocat.text.chunking import ChunkingSettings
from ocat.text.secrets import SECRETS_MODES

# How retrieved memories are shown in the chat: not at all, in full, or as a count.
ContextMode = Literal["off", "on", "summary"]
CONTEXT_MODES: tuple[ContextMode, ...] = get_args(ContextMode)
# Whether the chat model checks the links between versions of a fact: off, or model (paid calls).
ConsolidateMode = Literal["off", "model"]
CONSOLIDATE_MODES: tuple[ConsolidateMode, ...] = get_args(ConsolidateMode)
_URL = (re.compile(r"(https?|file)://\S+"), "an http://, https:// or file:// URL")
# A Chroma server's address: no userinfo (credentials go in headers), query or fragment; a path prefix may follow.
_SERVER_URL = (re.compile(r"https?://[^\s/?#@]+(/[^\s?#@]*)?"),
               "an http:// or https:// URL with no user:password@, query or fragment (a token goes in "
               "vector_store.headers)")
# HTTP header names (RFC 9110 tokens), as vector_store.headers is checked.
HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# `${NAME}` in a header's value: the environment variable NAME, read when the store opens.
HEADER_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_SHA256 = (re.compile(r"[0-9A-Fa-f]{64}"), "64 hexadecimal digits")
# A collection name Chroma accepts, and how a message words it.
COLLECTION_NAME = (
    re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{1,61}[A-Za-z0-9]"),
    "3-63 characters of letters, digits, '_' or '-', starting and ending with a letter or digit",
)



def _field(doc: str, *, path: bool = False, secret: bool = False, **checks: Any) -> Any:
    """A settings field: its one-line doc and the checks its value must pass.

    `checks` are lo, hi (inclusive), above (exclusive), choices, and pattern (regex, wording).
    There is no default here on purpose: `config/default.yaml` is the single source of defaults.
    """
    return field(metadata={"doc": doc, "path": path, **checks}, repr=not secret)


@dataclass(frozen=True)
class VectorStoreSettings:
    """The episodic memory store (ChromaDB) and how much of it each turn retrieves."""

    enabled: bool = _field("Store exchanges and retrieve memories; false runs a plain chat.")
    path: str | None = _field("Local store folder (absolute once loaded); null: the XDG data folder.", path=True)
    host: str | None = _field("ChromaDB server host; when set it replaces the local store.")
    port: int = _field("ChromaDB server port.", lo=1, hi=65535)
    url: str | None = _field("ChromaDB server URL (https://host:port/prefix); when set it replaces host and port.",
                             pattern=_SERVER_URL)
    ssl: bool = _field("Reach `host` over HTTPS (a `url` says so by its scheme).")
    headers: dict[str, str] = _field("HTTP headers sent to the server (a proxy's token); ${VAR} reads the "
                                     "environment when the store opens. Never logged.", secret=True)
    tenant: str | None = _field("Chroma tenant on the server; null: Chroma's default_tenant.")
    database: str | None = _field("Chroma database on the server; null: Chroma's default_database.")
    insecure: bool = _field("Allow plain HTTP to a server that is not on this machine (loopback).")
    ca_file: str | None = _field("CA certificate (PEM) the server's TLS certificate is checked against; "
                                 "null: the system's.", path=True)
    collection: str = _field("Name of the collection that holds this memory.", pattern=COLLECTION_NAME)
    similarity_threshold: float = _field(
        "Calibrated relevance (0-1) a past exchange needs to reach the model.", lo=0, hi=1
    )
    chat_window: int = _field("Previous exchanges of the current chat sent with each prompt.", lo=0)
    context_results: int = _field("Past exchanges retrieved per prompt; default --results of queries.", lo=1)
    search_context_window: int = _field("Recent exchanges whose prompts join the memory search query.", lo=0)
    time_in_prompt: bool = _field("A time the prompt names ('last week', 'in March') restricts the search to it.")
    memory_threshold: float = _field("Calibrated relevance (0-1) a document or /vadd memory needs.", lo=0, hi=1)
    memory_results: int = _field("Document chunks and /vadd memories retrieved per prompt.", lo=1)
    memory_token_budget: int = _field("Most tokens of memory given to the model per turn.", lo=0)
    docs_folder: str | None = _field("Folder that `/vdoc docs:NAME` reads from; null: none.", path=True)


@dataclass(frozen=True)
class EmbeddingSettings:
    """The model that turns text into vectors."""

    model: str = _field("all-MiniLM-L6-v2 (local ONNX) or a litellm embedding model.")
    dimensions: int = _field("Length of the embedding vectors.", lo=1)
    model_path: str | None = _field("Folder of model.onnx + tokenizer.json; null: ChromaDB's cache.", path=True)
    download: bool = _field("Fetch the local model on first need when no folder holds it.")
    download_url: str | None = _field("Where the model archive is fetched from; null: ChromaDB's own.",
                                      pattern=_URL)
    download_sha256: str | None = _field("SHA-256 the archive must have; null: ChromaDB's archive's.",
                                         pattern=_SHA256)
    threads: int = _field("Threads the local model runs on; 0: one per core.", lo=0)


@dataclass(frozen=True)
class LLMSettings:
    """The chat model, called through litellm."""

    model: str = _field("litellm model name, e.g. gpt-4o-mini or ollama/llama3.")
    temperature: float = _field("Sampling temperature, 0-2.", lo=0, hi=2)
    max_tokens: int | None = _field("Most tokens in one reply; null leaves it to the provider.", lo=1)
    timeout_seconds: float = _field("Seconds to wait for the provider before giving up.", above=0)
    api_base: str | None = _field("Provider base URL; null uses the provider's default.")
    api_key: str | None = _field("Provider API key; null: the provider's usual env variable.", secret=True)
    system_prompt: str = _field("Text sent as the system message; empty sends none.")
    system_prompt_files: list[str] = _field("Files appended to the system prompt.", path=True)


@dataclass(frozen=True)
class DisplaySettings:
    """How the terminal UI looks."""

    theme: str = _field("Textual theme name, shipped or user-defined.")
    context_mode: ContextMode = _field("Retrieved memories shown: off, on (in full), summary.", choices=CONTEXT_MODES)


@dataclass(frozen=True)
class MemorySettings:
    """What memory keeps (secrets, links between versions) and what the chat model may store in it."""

    model_may_remember: bool = _field("Let the chat model store notes with its remember tool (tools.enabled on).")
    max_notes_per_turn: int = _field("Most notes the chat model may store with remember in one turn.", lo=1, hi=100)
    link_versions: bool = _field(
        "Link each exchange written to the earlier ones it may update (same subject, another value).")
    consolidate: ConsolidateMode = _field(
        "off, or model: the chat model checks in the background which earlier exchanges each new one updates "
        "(a model call per exchange; its cost is shown).", choices=CONSOLIDATE_MODES)
    secrets: str = _field("Credentials in what is stored: redact (keys, tokens), strict (also passwords said in "
                          "prose), keep.", choices=SECRETS_MODES)


@dataclass(frozen=True)
class WakeSettings:
    """The wake block: what the model knows at the start of every thread (pins, profile, recent threads)."""

    enabled: bool = _field("Give the model the wake block (pins, profile, recent threads) in every thread.")
    tokens: int = _field("Most tokens the wake block may take; filled pins first, then profile, then threads.", lo=0)
    threads: int = _field("Recent threads listed in the wake block, one line each.", lo=0)
    profile: str | None = _field("Markdown file about you, in the wake block; null: profile.md beside the config.",
                                 path=True)


# Whether the chat model is offered tools: auto (when the model can call them), on, off.
ToolMode = Literal["auto", "on", "off"]
TOOL_MODES: tuple[ToolMode, ...] = get_args(ToolMode)


@dataclass(frozen=True)
class ToolsSettings:
    """The tools the chat model may call (searching and reading memory, remembering) and their limits."""

    enabled: ToolMode = _field("auto: offer tools when the model can call them; on: always; off: never.",
                          choices=TOOL_MODES)
    max_steps: int = _field("Most model calls with tools in one turn; one last call without tools follows.",
                            lo=1, hi=50)
    max_calls_per_step: int = _field("Most tool calls run in one model step; the rest are tool errors, not run.",
                                     lo=1, hi=100)
    result_tokens: int = _field("Most tokens one tool result may give the model; a longer one is cut, with a note.",
                                lo=100, hi=100_000)
    mcp_servers_file: str | None = _field(
        "A claude_desktop_config.json whose mcpServers the chat may use too; null: none.", path=True)


_KEYS = (
    re.compile(r"[A-Za-z0-9_+-]+(,[A-Za-z0-9_+-]+)*"),
    "key names joined by '+' for modifiers and ',' between alternatives, e.g. ctrl+j,shift+enter",
)


@dataclass(frozen=True)
class KeysSettings:
    """Key bindings of the full-screen chat (Textual key names)."""

    send: str = _field("Send the prompt.", pattern=_KEYS)
    newline: str = _field("Insert a line break in the prompt.", pattern=_KEYS)
    cancel: str = _field("Stop the answer being written.", pattern=_KEYS)
    quit: str = _field("Leave ocat.", pattern=_KEYS)
    copy_answer: str = _field("Copy the last answer.", pattern=_KEYS)
    copy_code: str = _field("Copy the last code block of the last answer.", pattern=_KEYS)
    editor: str = _field("Open the prompt in $VISUAL / $EDITOR.", pattern=_KEYS)
    memory: str = _field("Open the memory browser.", pattern=_KEYS)
    messages: str = _field("Move from the prompt to the conversation's messages (Up and Down step, Esc goes back).",
                           pattern=_KEYS)
    fork: str = _field("On a focused message: start a new thread from its exchange (/fork).", pattern=_KEYS)


@dataclass(frozen=True)
class Settings:
    """Everything ocat is configured with, validated and with paths resolved."""

    vector_store: VectorStoreSettings
    chunking: ChunkingSettings
    embedding: EmbeddingSettings
    llm: LLMSettings
    display: DisplaySettings
    keys: KeysSettings
    memory: MemorySettings
    wake: WakeSettings
    tools: ToolsSettings
    # The MCP servers the chat may use (`mcp_servers:` and tools.mcp_servers_file, ocat.mcp_client).
    mcp_servers: tuple[McpServerConfig, ...] = ()
    # Tools allowed for this command alone (`--allow-tool SERVER.TOOL`).
    allowed_tools: frozenset[str] = frozenset()
    # The project this command keeps to (`--project PATH`): its exchanges only; None: all, this one's first.
    project: str | None = None
    config_path: str | None = None  # the user file that was read, or None
    # The dotted keys the user file, OCAT_* variables or flags set (the rest are the shipped defaults).
    named: frozenset[str] = frozenset()
    # One line for each old key name the config used (`ocat.config.keys.MOVED_KEYS`), for the faces to show once.
    deprecations: tuple[str, ...] = ()

    @property
    def store_path(self) -> Path:
        """Folder of the local store: `vector_store.path`, or the default for the collection."""
        if self.vector_store.path is not None:
            return Path(self.vector_store.path)
        return locations.default_store_path(self.vector_store.collection)

    @property
    def profile_path(self) -> Path:
        """The profile the wake block quotes: `wake.profile`, or profile.md beside the user config."""
        if self.wake.profile is not None:
            return Path(self.wake.profile)
        return locations.user_config_file().with_name("profile.md")


# Each config section's name and the dataclass that holds it, in the order of the file.
SECTION_CLASSES: dict[str, type] = {
    "vector_store": VectorStoreSettings,
    "chunking": ChunkingSettings,
    "embedding": EmbeddingSettings,
    "llm": LLMSettings,
    "display": DisplaySettings,
    "keys": KeysSettings,
    "memory": MemorySettings,
    "wake": WakeSettings,
    "tools": ToolsSettings,
}
SECTIONS: tuple[str, ...] = tuple(SECTION_CLASSES)
# The top-level entry that holds MCP servers by name (not a section of fixed keys).
MCP_SERVERS = "mcp_servers"
