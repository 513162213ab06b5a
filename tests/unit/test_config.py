"""Settings: defaults, layering, path resolution, and errors that name the key, file and line."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ocat.config import loading as config
from ocat.config.loading import SECTIONS, Settings, load_settings, parse_override
from ocat.errors import ConfigError

DOCUMENTED_DEFAULTS = {
    "vector_store": {
        "enabled": True, "path": None, "host": None, "port": 8000, "url": None, "ssl": False, "headers": {},
        "tenant": None, "database": None, "insecure": False, "ca_file": None, "collection": "default",
        "similarity_threshold": 0.65, "chat_window": 3, "context_results": 5,
        "search_context_window": 3, "time_in_prompt": True, "memory_threshold": 0.7, "memory_results": 3, "memory_token_budget": 1500, "docs_folder": None,
    },
    "chunking": {
        "strategy": "semantic", "chunk_size": 1000, "chunk_overlap": 100,
        "max_chunk_size": 1500, "preserve_sentence_boundaries": True,
    },
    "embedding": {
        "model": "all-MiniLM-L6-v2", "dimensions": 384, "model_path": None,
        "download": True, "download_url": None, "download_sha256": None, "threads": 0,
    },
    "llm": {
        "model": "gpt-4o-mini", "temperature": 0.7, "max_tokens": None, "timeout_seconds": 120.0,
        "api_base": None, "api_key": None, "system_prompt": "", "system_prompt_files": [],
    },
    "display": {"theme": "textual-dark", "context_mode": "summary"},
    "keys": {"send": "enter", "newline": "ctrl+j,shift+enter", "cancel": "escape", "quit": "ctrl+q",
             "copy_answer": "ctrl+o", "copy_code": "ctrl+b",
             "editor": "ctrl+g", "memory": "ctrl+r", "messages": "alt+up", "fork": "f"},
    "memory": {"model_may_remember": True, "max_notes_per_turn": 10, "link_versions": True, "consolidate": "off",
               "secrets": "redact"},
    "wake": {"enabled": True, "tokens": 400, "threads": 5, "profile": None},
    "tools": {"enabled": "auto", "max_steps": 6, "max_calls_per_step": 10, "result_tokens": 1500, "mcp_servers_file": None},
}


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake home and XDG folders, so the real user's config is never read."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    monkeypatch.chdir(tmp_path)
    return home


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load(path: Path | None = None, env: dict[str, str] | None = None, **overrides: object) -> Settings:
    return load_settings(str(path) if path else None, env=env or {},
                         overrides={k.replace("__", "."): v for k, v in overrides.items()})


def error_of(*args, **kwargs) -> str:
    with pytest.raises(ConfigError) as info:
        load(*args, **kwargs)
    return str(info.value)


# ---- defaults ---------------------------------------------------------------

def test_defaults_match_documented_values(home: Path) -> None:
    settings = load()
    for section, expected in DOCUMENTED_DEFAULTS.items():
        assert dataclasses.asdict(getattr(settings, section)) == expected, section
    assert settings.config_path is None
    assert settings.store_path == home / ".local/share/ocat/vector_stores/default"
    assert isinstance(settings.llm.timeout_seconds, float)


def test_sections_and_schema_agree() -> None:
    assert SECTIONS == tuple(DOCUMENTED_DEFAULTS)
    # then mcp_servers, allowed_tools, project, config_path, named, deprecations
    assert SECTIONS == tuple(f.name for f in dataclasses.fields(Settings))[:-6]
    for section in SECTIONS:
        cls = type(getattr(load(), section))
        assert [f.name for f in dataclasses.fields(cls)] == list(DOCUMENTED_DEFAULTS[section])
        for f in dataclasses.fields(cls):
            assert f.metadata["doc"].strip(), f"{section}.{f.name} has no doc"


def test_default_yaml_documents_every_key_with_a_comment_above() -> None:
    lines = config.DEFAULTS_FILE.read_text(encoding="utf-8").splitlines()
    found: dict[tuple[str, str], int] = {}
    section = None
    for number, line in enumerate(lines):
        if match := re.match(r"([a-z_]+):", line):
            section = match.group(1)
            found[(section, "")] = number
        elif match := re.match(r"  ([a-z_0-9]+):", line):
            found[(section, match.group(1))] = number
    for section in SECTIONS:
        cls = type(getattr(load(), section))
        for key in ["", *(f.name for f in dataclasses.fields(cls))]:
            assert (section, key) in found, f"{section}.{key} missing from default.yaml"
            above = lines[found[(section, key)] - 1].strip()
            assert above.startswith("#"), f"{section}.{key} has no comment directly above it"


def test_settings_are_frozen_and_hide_the_api_key() -> None:
    settings = load(llm__api_key="sk-secret")
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.llm.model = "x"  # type: ignore[misc]
    assert settings.llm.api_key == "sk-secret"
    assert "sk-secret" not in repr(settings)


@pytest.mark.slow  # a fresh interpreter
def test_config_imports_no_heavy_modules() -> None:
    code = "import ocat.config.loading, sys; print(sorted({'textual', 'litellm', 'chromadb'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- choosing the user file ---------------------------------------------------

def test_xdg_user_file_is_read_when_present(home: Path) -> None:
    user = write(home / ".config/ocat/config.yaml", "llm:\n  model: from-xdg\n")
    settings = load()
    assert settings.llm.model == "from-xdg"
    assert settings.config_path == str(user)


def test_ocat_config_selects_a_file(tmp_path: Path, home: Path) -> None:
    write(home / ".config/ocat/config.yaml", "llm:\n  model: from-xdg\n")
    chosen = write(tmp_path / "chosen.yaml", "llm:\n  model: chosen\n")
    settings = load(env={"OCAT_CONFIG": str(chosen)})
    assert settings.llm.model == "chosen"
    assert settings.config_path == str(chosen)


def test_config_path_argument_beats_ocat_config(tmp_path: Path) -> None:
    by_env = write(tmp_path / "env.yaml", "llm:\n  model: env-file\n")
    by_arg = write(tmp_path / "arg.yaml", "llm:\n  model: arg-file\n")
    assert load(by_arg, env={"OCAT_CONFIG": str(by_env)}).llm.model == "arg-file"


def test_missing_explicit_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert error_of(missing) == f"config error: config file not found: {missing}"
    message = error_of(env={"OCAT_CONFIG": str(missing)})
    assert f"config file not found: {missing}" in message and "OCAT_CONFIG" in message


@pytest.mark.parametrize("text", ["", "# nothing but a comment\n", "llm:\n  # model: x\n"])
def test_empty_user_file_changes_nothing(tmp_path: Path, text: str) -> None:
    path = write(tmp_path / "c.yaml", text)
    settings = load(path)
    assert settings.config_path == str(path)
    assert dataclasses.asdict(settings.llm) == DOCUMENTED_DEFAULTS["llm"]


# ---- precedence ---------------------------------------------------------------

@pytest.mark.parametrize(("use_env", "use_override", "expected"), [
    (False, False, "from-file"),
    (True, False, "from-env"),
    (True, True, "from-cli"),
    (False, True, "from-cli"),
])
def test_precedence_file_env_overrides(tmp_path: Path, use_env: bool, use_override: bool, expected: str) -> None:
    path = write(tmp_path / "c.yaml", "llm:\n  model: from-file\n  temperature: 0.1\n")
    env = {"OCAT_LLM_MODEL": "from-env"} if use_env else {}
    overrides = {"llm.model": "from-cli"} if use_override else {}
    settings = load_settings(str(path), env=env, overrides=overrides)
    assert settings.llm.model == expected
    assert settings.llm.temperature == 0.1  # untouched keys keep the file's value


def test_env_values_are_parsed_as_yaml(tmp_path: Path) -> None:
    settings = load(env={
        "OCAT_VECTOR_STORE_SIMILARITY_THRESHOLD": "0.5",
        "OCAT_VECTOR_STORE_ENABLED": "false",
        "OCAT_VECTOR_STORE_PORT": "9000",
        "OCAT_LLM_SYSTEM_PROMPT_FILES": "[a.md, b.md]",
        "OCAT_LLM_MAX_TOKENS": "null",
        "OCAT_EMBEDDING_MODEL_PATH": "models/mini",
        "OCAT_DISPLAY_CONTEXT_MODE": "off",  # YAML 1.1 would make this false
        "OCAT_LLM_SYSTEM_PROMPT": "Note: be brief",  # YAML would make this a mapping
        "OCAT_LLM_MODEL": "1.5",
        "OCAT_CONFIG": "",
        "OCATS_SOMETHING_ELSE": "ignored",  # not OCAT_*; an unknown OCAT_* is refused (test_bad_config_and_args)
    })
    assert settings.vector_store.similarity_threshold == 0.5
    assert settings.vector_store.enabled is False
    assert settings.vector_store.port == 9000
    assert settings.llm.system_prompt_files == [str(tmp_path / "a.md"), str(tmp_path / "b.md")]
    assert settings.llm.max_tokens is None
    assert settings.embedding.model_path == str(tmp_path / "models/mini")
    assert settings.display.context_mode == "off"
    assert settings.llm.system_prompt == "Note: be brief"
    assert settings.llm.model == "1.5"


def test_overrides_accept_typed_values_and_strings() -> None:
    settings = load(vector_store__enabled=False, llm__temperature="0.2", chunking__chunk_size=800)
    assert settings.vector_store.enabled is False
    assert settings.llm.temperature == 0.2
    assert settings.chunking.chunk_size == 800


def test_plain_yaml_words_in_string_fields_stay_text(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", "display:\n  context_mode: off\nllm:\n  model: 1.5\n")
    settings = load(path)
    assert settings.display.context_mode == "off"
    assert settings.llm.model == "1.5"


def test_float_fields_accept_ints(tmp_path: Path) -> None:
    settings = load(write(tmp_path / "c.yaml", "vector_store:\n  similarity_threshold: 1\n"))
    assert settings.vector_store.similarity_threshold == 1.0
    assert isinstance(settings.vector_store.similarity_threshold, float)


# ---- paths ----------------------------------------------------------------------

def test_relative_paths_resolve_against_the_file_that_set_them(tmp_path: Path, home: Path) -> None:
    path = write(tmp_path / "conf/c.yaml", """
        vector_store:
          path: stores/work
        embedding:
          model_path: ~/models/mini
        llm:
          system_prompt_files: [prompts/base.md, /abs/extra.md]
    """)
    settings = load(path)
    assert settings.vector_store.path == str(tmp_path / "conf/stores/work")
    assert settings.store_path == tmp_path / "conf/stores/work"
    assert settings.embedding.model_path == str(home / "models/mini")
    assert settings.llm.system_prompt_files == [str(tmp_path / "conf/prompts/base.md"), "/abs/extra.md"]


def test_env_and_command_line_paths_resolve_against_the_cwd(tmp_path: Path) -> None:
    assert load(env={"OCAT_VECTOR_STORE_PATH": "s1"}).store_path == tmp_path / "s1"
    assert load(vector_store__path="s2").store_path == tmp_path / "s2"


def test_store_path_follows_the_collection(home: Path) -> None:
    assert load(vector_store__collection="work-notes").store_path == (
        home / ".local/share/ocat/vector_stores/work-notes")


# ---- file errors: key, file and line --------------------------------------------

FILE_ERRORS = [
    # (yaml, line, text the message must contain)
    ("vector_store:\n  enabled: true\n  similarity_threshold: 1.5\n", 3,
     "vector_store.similarity_threshold must be between 0 and 1, got 1.5"),
    ("vector_store:\n  memory_threshold: -0.1\n", 2, "vector_store.memory_threshold must be between 0 and 1"),
    ("chunking:\n  chunk_size: big\n", 2, "chunking.chunk_size must be an integer, got 'big' (string)"),
    ("chunking:\n  chunk_size: 10.5\n", 2, "chunking.chunk_size must be an integer, got 10.5 (number)"),
    ("chunking:\n  chunk_size: true\n", 2, "chunking.chunk_size must be an integer, got true (boolean)"),
    ("vector_store:\n  enabled: 1\n", 2, "vector_store.enabled must be true or false, got 1 (integer)"),
    ("vector_store:\n  enabled: 'yes'\n", 2, "vector_store.enabled must be true or false, got 'yes' (string)"),
    ("llm:\n  temperature: true\n", 2, "llm.temperature must be a number, got true (boolean)"),
    ("llm:\n  temperature: 2.5\n", 2, "llm.temperature must be between 0 and 2"),
    ("llm:\n  max_tokens: 0\n", 2, "llm.max_tokens must be at least 1, got 0"),
    ("llm:\n  max_tokens: lots\n", 2, "llm.max_tokens must be an integer or null"),
    ("llm:\n  timeout_seconds: 0\n", 2, "llm.timeout_seconds must be greater than 0"),
    ("llm:\n  system_prompt_files: [a.md, 3]\n", 2,
     "llm.system_prompt_files must be a list of strings, got a list containing 3 (integer)"),
    ("llm:\n  system_prompt_files: a.md\n", 2, "llm.system_prompt_files must be a list of strings"),
    ("vector_store:\n  port: 70000\n", 2, "vector_store.port must be between 1 and 65535"),
    ("vector_store:\n  collection: a\n", 2, "vector_store.collection must be 3-63 characters"),
    ("vector_store:\n  collection: -bad-\n", 2, "vector_store.collection must be"),
    ("chunking:\n  strategy: sentences\n", 2,
     "chunking.strategy must be one of truncate, fixed_size, semantic, hybrid, markdown, got 'sentences'"),
    ("display:\n  context_mode: full\n", 2, "display.context_mode must be one of off, on, summary"),
    ("llm:\n  model: gpt-4o\n  modle: x\n", 3, "unknown key 'llm.modle' (did you mean 'llm.model'?)"),
    ("\nlm:\n  model: x\n", 2, "unknown section 'lm' (did you mean 'llm'?)"),
    ("llm: gpt-4o\n", 1, "section 'llm' must be a mapping of keys, got 'gpt-4o'"),
    ("- llm\n- display\n", 1, "the top level must be a mapping of sections, got a list"),
    ("llm:\n  model: a\n   temperature: 0.3\n", 3, "invalid YAML: mapping values are not allowed here"),
    ("llm:\n  model: x\n---\nllm: {}\n", 3, "invalid YAML"),
    ("chunking:\n  chunk_size: 100\n  chunk_overlap: 100\n", 3,
     "chunking.chunk_overlap must be less than chunking.chunk_size (100), got 100"),
    ("chunking:\n  max_chunk_size: 500\n", 2,
     "chunking.max_chunk_size must be at least chunking.chunk_size (1000), got 500"),
    # Only chunk_size is the user's: blame it, not the shipped max_chunk_size.
    ("\nchunking:\n  chunk_size: 2000\n", 3,
     "chunking.chunk_size must be at most chunking.max_chunk_size (1500), got 2000"),
    ("chunking:\n  chunk_size: 50\n", 2,
     "chunking.chunk_size must be greater than chunking.chunk_overlap (100), got 50"),
]


@pytest.mark.parametrize(("text", "line", "expected"), FILE_ERRORS, ids=[e[2][:40] for e in FILE_ERRORS])
def test_file_errors_name_key_file_and_line(tmp_path: Path, text: str, line: int, expected: str) -> None:
    path = write(tmp_path / "c.yaml", text)
    message = error_of(path)
    assert message.startswith(f"config error: {path}:{line}: "), message
    assert expected in message


def test_error_message_matches_the_documented_shape(home: Path) -> None:
    write(home / ".config/ocat/config.yaml", "\n\nvector_store:\n  similarity_threshold: 1.5\n")
    assert error_of() == (f"config error: {home}/.config/ocat/config.yaml:4: "
                          "vector_store.similarity_threshold must be between 0 and 1, got 1.5")


def test_a_bad_value_in_the_file_is_reported_even_if_env_overrides_it(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", "llm:\n  temperature: 9\n")
    assert f"{path}:2: llm.temperature" in error_of(path, env={"OCAT_LLM_TEMPERATURE": "0.5"})


# ---- env and command-line errors ----------------------------------------------------

@pytest.mark.parametrize(("env", "expected"), [
    ({"OCAT_LLM_MODLE": "x"}, "config error: OCAT_LLM_MODLE: unknown key 'llm.modle' (did you mean OCAT_LLM_MODEL?)"),
    ({"OCAT_VECTOR_STORE_THRESHOLD": "0.5"}, "config error: OCAT_VECTOR_STORE_THRESHOLD: unknown key"),
    ({"OCAT_VECTOR_STORE_PORT": "abc"},
     "config error: OCAT_VECTOR_STORE_PORT: vector_store.port must be an integer, got 'abc' (string)"),
    ({"OCAT_VECTOR_STORE_SIMILARITY_THRESHOLD": "1.5"},
     "config error: OCAT_VECTOR_STORE_SIMILARITY_THRESHOLD: vector_store.similarity_threshold must be between 0 and 1"),
    ({"OCAT_VECTOR_STORE_ENABLED": "1"}, "OCAT_VECTOR_STORE_ENABLED: vector_store.enabled must be true or false"),
    ({"OCAT_CHUNKING_CHUNK_SIZE": "[1"}, "OCAT_CHUNKING_CHUNK_SIZE: chunking.chunk_size is not a valid YAML value"),
    ({"OCAT_DISPLAY_CONTEXT_MODE": "full"}, "OCAT_DISPLAY_CONTEXT_MODE: display.context_mode must be one of"),
    ({"OCAT_CHUNKING_CHUNK_OVERLAP": "5000"}, "OCAT_CHUNKING_CHUNK_OVERLAP: chunking.chunk_overlap must be less than"),
])
def test_env_errors_name_the_variable(env: dict[str, str], expected: str) -> None:
    assert expected in error_of(env=env)


@pytest.mark.parametrize(("overrides", "expected"), [
    ({"llm.modl": "x"}, "config error: command line: unknown key 'llm.modl' (did you mean 'llm.model'?)"),
    ({"lm.model": "x"}, "config error: command line: unknown section 'lm' (did you mean 'llm'?)"),
    ({"model": "x"}, "config error: command line: unknown key 'model'"),
    ({"vector_store.enabled": "maybe"}, "config error: command line: vector_store.enabled must be true or false"),
    ({"llm.temperature": -1}, "config error: command line: llm.temperature must be between 0 and 2, got -1"),
])
def test_override_errors_say_command_line(overrides: dict[str, object], expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(env={}, overrides=overrides)
    assert expected in str(info.value)


# ---- parse_override -------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("llm.temperature=0.2", ("llm.temperature", 0.2)),
    ("vector_store.enabled=false", ("vector_store.enabled", False)),
    ("llm.system_prompt_files=[a, b]", ("llm.system_prompt_files", ["a", "b"])),
    ("llm.model=ollama/llama3:8b", ("llm.model", "ollama/llama3:8b")),
    ("llm.system_prompt=a=b", ("llm.system_prompt", "a=b")),
    ("display.context_mode=off", ("display.context_mode", "off")),
    ("llm.max_tokens=null", ("llm.max_tokens", None)),
])
def test_parse_override(text: str, expected: tuple[str, object]) -> None:
    assert parse_override(text) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("llm.temperature", "expected section.key=value"),
    ("llm.temprature=0.2", "unknown key 'llm.temprature' (did you mean 'llm.temperature'?)"),
])
def test_parse_override_errors(text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(expected)):
        parse_override(text)


def test_parsed_override_round_trips_through_load_settings() -> None:
    key, value = parse_override("llm.temperature=0.2")
    assert load_settings(env={}, overrides={key: value}).llm.temperature == 0.2


def test_a_key_binding_is_remapped_and_a_bad_key_name_is_refused(tmp_path: Path) -> None:
    settings = load_settings(env={"OCAT_KEYS_COPY_CODE": "f5,ctrl+shift+c"})
    assert settings.keys.copy_code == "f5,ctrl+shift+c"
    config = tmp_path / "config.yaml"
    config.write_text("keys:\n  send: 'ctrl enter'\n")
    with pytest.raises(ConfigError, match=r"config.yaml:2: keys.send must be key names"):
        load_settings(str(config))


def test_a_bare_off_in_yaml_is_the_word_off_for_a_setting_that_offers_it(tmp_path: Path) -> None:
    """YAML 1.1 reads `off` as false: for `context_mode` and `consolidate` it is what the user meant."""
    config = tmp_path / "config.yaml"
    config.write_text("memory:\n  consolidate: off\ndisplay:\n  context_mode: on\n", encoding="utf-8")
    settings = load_settings(str(config), env={})
    assert (settings.memory.consolidate, settings.display.context_mode) == ("off", "on")
    config.write_text("memory:\n  consolidate: on\n", encoding="utf-8")  # not one of its words
    with pytest.raises(ConfigError, match="must be one of off, model"):
        load_settings(str(config), env={})


# ---- keys that moved: the wake block's keys left `memory` for `wake` ----------------

OLD_WAKE = {"memory.wake": False, "memory.wake_tokens": 120, "memory.wake_threads": 2, "memory.profile": "me.md"}
NEW_WAKE = {"wake.enabled": False, "wake.tokens": 120, "wake.threads": 2, "wake.profile": "me.md"}


def as_yaml(keys: dict[str, object]) -> str:
    """`{"a.b": 1, "a.c": 2}` as a config file: `a:` then its keys."""
    sections: dict[str, list[str]] = {}
    for dotted, value in keys.items():
        section, key = dotted.split(".")
        sections.setdefault(section, []).append(f"  {key}: {str(value).lower() if isinstance(value, bool) else value}")
    return "".join(f"{section}:\n" + "\n".join(lines) + "\n" for section, lines in sections.items())


def given(layer: str, keys: dict[str, object], folder: Path) -> Settings:
    """Settings with `keys` set in one layer: the user file, OCAT_* variables or the command line."""
    if layer == "file":
        return load(write(folder / "config.yaml", as_yaml(keys)))
    if layer == "env":
        return load(env={config.env_name(dotted): str(value).lower() for dotted, value in keys.items()})
    return load_settings(None, env={}, overrides=keys)


@pytest.mark.parametrize("layer", ["file", "env", "command line"])
def test_the_wake_keys_old_names_under_memory_give_the_same_settings_and_each_says_its_new_name(
    tmp_path: Path, layer: str
) -> None:
    old, new = given(layer, OLD_WAKE, tmp_path), given(layer, NEW_WAKE, tmp_path)
    assert dataclasses.asdict(new.wake) == {"enabled": False, "tokens": 120, "threads": 2,
                                            "profile": str(tmp_path / "me.md")}
    assert new.deprecations == ()
    assert dataclasses.replace(old, deprecations=()) == new
    # One line for each old name used, naming the new one (as the layer spells names).
    # One line for each old name used, naming the new one as the layer spells names.
    read = "(the old name is read for this release only)"
    expected = {
        "file": [f"config: {tmp_path / 'config.yaml'}:{n}: '{o}' is deprecated, it is now '{k}' {read}"
                 for n, (o, k) in enumerate(zip(OLD_WAKE, NEW_WAKE), start=2)],
        "env": [f"config: {config.env_name(o)} is deprecated, it is now {config.env_name(k)} {read}"
                for o, k in zip(OLD_WAKE, NEW_WAKE)],
        "command line": [f"config: command line: '{o}' is deprecated, it is now '{k}' {read}"
                         for o, k in zip(OLD_WAKE, NEW_WAKE)],
    }[layer]
    assert sorted(old.deprecations) == sorted(expected)


def test_a_wake_key_given_under_both_names_in_one_place_is_refused_naming_both(tmp_path: Path) -> None:
    both = write(tmp_path / "config.yaml", "memory:\n  wake_tokens: 100\nwake:\n  tokens: 200\n")
    assert error_of(both) == (f"config error: {both}:4: 'wake.tokens' is given twice: as 'wake.tokens' and as its "
                              f"old name 'memory.wake_tokens' ({both}:2); keep 'wake.tokens' only")
    # The new name first, then the old: the same, at the old name's line.
    write(both, "wake:\n  profile: a.md\nmemory:\n  profile: b.md\n")
    assert f"{both}:4: 'wake.profile' is given twice" in error_of(both)
    assert error_of(env={"OCAT_MEMORY_WAKE": "false", "OCAT_WAKE_ENABLED": "true"}) == (
        "config error: OCAT_WAKE_ENABLED: OCAT_WAKE_ENABLED is given twice: as OCAT_WAKE_ENABLED and as its "
        "old name OCAT_MEMORY_WAKE; keep OCAT_WAKE_ENABLED only")
    assert error_of(memory__wake_threads=1, wake__threads=2) == (
        "config error: command line: 'wake.threads' is given twice: as 'wake.threads' and as its "
        "old name 'memory.wake_threads'; keep 'wake.threads' only")


def test_an_old_name_in_one_layer_and_the_new_in_a_higher_one_follow_the_layers(tmp_path: Path) -> None:
    """Not a clash: each layer says one thing, and the higher wins, as for any key; the old name is still said."""
    user = write(tmp_path / "config.yaml", "memory:\n  wake_threads: 1\n")
    settings = load(user, env={"OCAT_WAKE_THREADS": "7"})
    assert settings.wake.threads == 7
    assert settings.deprecations == (f"config: {user}:2: 'memory.wake_threads' is deprecated, it is now "
                                     "'wake.threads' (the old name is read for this release only)",)
    assert load(user, wake__threads=3).wake.threads == 3
    # The old name in the higher layer wins over the new one in the lower, as its key would.
    assert load(write(tmp_path / "new.yaml", "wake:\n  threads: 4\n"), memory__wake_threads=9).wake.threads == 9


def test_a_bad_value_under_an_old_name_is_named_as_written(tmp_path: Path) -> None:
    user = write(tmp_path / "config.yaml", "memory:\n  wake_tokens: -1\n")
    assert error_of(user) == f"config error: {user}:2: memory.wake_tokens must be at least 0, got -1"
    assert error_of(env={"OCAT_MEMORY_WAKE_THREADS": "many"}) == (
        "config error: OCAT_MEMORY_WAKE_THREADS: memory.wake_threads must be an integer, got 'many' (string)")
    assert error_of(wake__tokens=-1) == "config error: command line: wake.tokens must be at least 0, got -1"


@pytest.mark.parametrize("text", ["off", "1.5", "Note: be brief", "~", "", "[1, 2]", "{a: 1}", "2025-01-02", "'quoted'",
                                  "x" * 100_000, "[" * 40 + "]" * 40, "a:\n  b: 1"])
def test_a_value_from_a_variable_or_flag_reads_as_the_pure_python_parser_reads_it(text: str) -> None:
    # libyaml reads the values (ocat.config.yaml_read.FAST_LOADER); what it gives must be what the
    # pure-Python parser gives, which reads those libyaml refuses.
    import yaml

    from ocat.config.yaml_read import read_scalar

    assert read_scalar(text) == yaml.safe_load(text)

