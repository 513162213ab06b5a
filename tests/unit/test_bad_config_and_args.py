"""Bad configuration, bad arguments and hostile output: deep YAML, unknown OCAT_* variables,
duplicate keys, undecodable bytes, huge counts, control characters in JSON, and secrets in errors.

Each ends in one clear line and its documented exit code, never a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ocat import llm
from ocat.config import loading as config
from ocat.config.loading import NON_SETTING_ENV, load_settings
from ocat.errors import ConfigError
from ocat.headless.output import dump_json, valid_text
from ocat.text.redact import redact, remember_secret
from tests.support import REPO
from tests.support.cli import Cli

DEEP = "[" * 1000 + "]" * 1000
SECRET = "mysecretkey-0123456789abcdef"


def config_error(**kwargs: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(**kwargs)
    return str(caught.value)


def assert_clean(run: Any, code: int, *needles: str) -> None:
    assert run.returncode == code, (run.returncode, run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    for needle in needles:
        assert needle in run.stderr, run.stderr


# -- 1. deeply nested YAML -----------------------------------------------------------------------


def test_deep_yaml_in_a_file_is_a_config_error_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text(f"llm:\n  system_prompt_files: {DEEP}\n")
    assert config_error(config_path=str(path), env={}) == f"config error: {path}:2: invalid YAML (nested too deeply)"


@pytest.mark.parametrize("how", ["env", "set"])
def test_deep_yaml_in_a_variable_or_flag_is_a_config_error(how: str) -> None:
    if how == "env":
        message = config_error(env={"OCAT_LLM_SYSTEM_PROMPT_FILES": DEEP})
        assert message.startswith("config error: OCAT_LLM_SYSTEM_PROMPT_FILES: llm.system_prompt_files")
    else:
        with pytest.raises(ConfigError) as caught:
            config.parse_override(f"vector_store.port={DEEP}")
        message = str(caught.value)
        assert message.startswith("config error: command line: vector_store.port")
    assert "(nested too deeply)" in message and "(2000 characters)" in message and len(message) < 250


def test_deep_brackets_in_a_string_key_are_its_text() -> None:
    # String keys keep text YAML cannot read, as they keep `off` or `[1`.
    assert load_settings(env={"OCAT_LLM_SYSTEM_PROMPT": DEEP}).llm.system_prompt == DEEP


def test_a_value_yaml_cannot_construct_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("vector_store:\n  port: 2020-13-45\nllm:\n  model: 2020-13-45\n")
    message = config_error(config_path=str(path), env={})
    assert message == f"config error: {path}:2: vector_store.port is not a valid YAML value (ValueError: month must be in 1..12)"
    path.write_text("llm:\n  model: 2020-13-45\n")
    assert load_settings(str(path), env={}).llm.model == "2020-13-45"


@pytest.mark.parametrize(("text", "line"), [
    ("[" * 100 + "]" * 100, None),                         # as deep as is read
    ("[" * 101 + "]" * 101, 1),
    ("x:\n  y: " + "{a: " * 101 + "1" + "}" * 101, 2),       # the line of the bracket one too many
    ('"' + "[" * 500 + '"', None),                           # brackets in a quoted scalar are its text
    ("'it''s " + "[" * 500 + "'", None),
    ('"a\\"' + "[" * 500 + '"', None),                     # an escaped quote does not end it
    ("# " + "[" * 500 + "\nb: 1", None),                    # nor do they count in a comment
    ("note: don't " + "[" * 101, 1),                         # an apostrophe in a plain scalar opens no quote
])
def test_nesting_is_measured_before_any_parser_reads_the_text(text: str, line: int | None) -> None:
    from ocat.config.yaml_read import too_deep_line

    assert too_deep_line(text) == line


def test_text_just_deep_enough_is_read_and_one_deeper_is_refused() -> None:
    from ocat.config.yaml_read import MAX_NESTING, NestedTooDeeply, read_scalar

    deepest = "[" * MAX_NESTING + "]" * MAX_NESTING
    value = read_scalar(deepest)
    for _ in range(MAX_NESTING - 1):
        (value,) = value
    assert value == []
    with pytest.raises(NestedTooDeeply):
        read_scalar("[" + deepest + "]")


def test_deep_set_with_json_output_prints_the_envelope(cli: Cli) -> None:
    run = cli("--vector-store-stats", "--output", "json", "--set", f"llm.system_prompt_files={DEEP}")
    assert_clean(run, 3, "config error: command line: llm.system_prompt_files is not a valid YAML value (nested too deeply)")
    document = run.json()
    assert document["ok"] is False and document["error"]["type"] == "ConfigError" and document["error"]["exit_code"] == 3


def test_deep_variable_and_file_exit_3(cli: Cli, tmp_path: Path) -> None:
    assert_clean(cli("--vector-store-stats", env={"OCAT_VECTOR_STORE_PORT": DEEP}), 3, "OCAT_VECTOR_STORE_PORT")
    path = tmp_path / "deep.yaml"
    path.write_text(f"vector_store:\n  port: {'{a: ' * 3000}1{'}' * 3000}\n")
    assert_clean(cli("--vector-store-stats", "--config", str(path)), 3, f"{path}:2: invalid YAML (nested too deeply)")


def test_mcp_with_deep_yaml_exits_3_with_a_line_on_stderr(cli: Cli) -> None:
    run = cli("mcp", "--set", f"vector_store.port={DEEP}")
    assert_clean(run, 3, "ocat mcp: config error: command line: vector_store.port")
    assert run.stdout == ""
    assert_clean(cli("mcp", env={"OCAT_VECTOR_STORE_PORT": DEEP}), 3, "ocat mcp: config error: OCAT_VECTOR_STORE_PORT")


# -- 2. unknown OCAT_* variables -----------------------------------------------------------------


def test_an_unknown_ocat_variable_is_refused_like_an_unknown_key() -> None:
    assert config_error(env={"OCAT_NOSUCH_KEY": "1"}) == (
        "config error: OCAT_NOSUCH_KEY: unknown variable 'OCAT_NOSUCH_KEY'; "
        "OCAT_* variables are settings (OCAT_<SECTION>_<KEY>) or OCAT_CONFIG, OCAT_STORE_TOKEN"
    )
    assert "(did you mean OCAT_LLM_MODEL?)" in config_error(env={"OCAT_LMM_MODEL": "x"})
    assert "unknown key 'llm.modle'" in config_error(env={"OCAT_LLM_MODLE": "x"})


def test_variables_that_are_not_settings_are_still_allowed() -> None:
    settings = load_settings(env={"OCAT_CONFIG": "", "OCATS_OTHER": "1", "PATH": "/bin", "OCAT_LLM_MODEL": "m"})
    assert settings.llm.model == "m"


def test_every_ocat_variable_the_code_reads_is_a_setting_or_listed() -> None:
    # A variable read with os.environ / getenv / setenv that is not a setting must be in
    # NON_SETTING_ENV, or every run that sets it would be refused.
    read = re.compile(r"""(?:environ(?:\.get|\.setdefault)?\s*[\(\[]|getenv\(|setenv\(|delenv\()\s*["'](OCAT_[A-Z0-9_]*)""")
    names = set()
    for folder in ("ocat", "tests", "bench"):
        for source in (REPO / folder).rglob("*.py"):
            names |= set(read.findall(source.read_text(encoding="utf-8")))
    assert "OCAT_EMBEDDING_MODEL_PATH" in names  # the scan works
    settings = {config.env_name(spec.dotted) for specs in config.SPECS.values() for spec in specs.values()}
    assert names - settings - set(NON_SETTING_ENV) == set()


def test_an_unknown_variable_exits_3(cli: Cli) -> None:
    run = cli("--vector-store-stats", "--output", "json", env={"OCAT_NOSUCH_KEY": "1"})
    assert_clean(run, 3, "ocat: config error: OCAT_NOSUCH_KEY: unknown variable")
    assert run.json()["error"]["type"] == "ConfigError"


# -- 3. duplicate keys ---------------------------------------------------------------------------


def test_a_duplicate_key_names_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("llm:\n  model: first\n  temperature: 0.1\n  model: second\n")
    assert config_error(config_path=str(path), env={}) == (
        f"config error: {path}:4: duplicate key 'llm.model' (lines 2 and 4); keep one"
    )


def test_a_duplicate_section_names_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("llm:\n  model: a\ndisplay:\n  theme: x\nllm:\n  temperature: 0.1\n")
    assert config_error(config_path=str(path), env={}) == (
        f"config error: {path}:5: duplicate section 'llm' (lines 1 and 5); keep one"
    )


def test_a_key_from_a_merge_may_be_overridden(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("llm:\n  <<: {model: base, temperature: 0.3}\n  model: mine\n")
    settings = load_settings(str(path), env={})
    assert (settings.llm.model, settings.llm.temperature) == ("mine", 0.3)


def test_a_duplicate_key_exits_3(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("vector_store:\n  context_results: 3\n  context_results: 4\n")
    assert_clean(cli("--vector-store-stats", "--config", str(path)), 3,
                 f"{path}:3: duplicate key 'vector_store.context_results' (lines 2 and 3)")


# -- 4. undecodable bytes in arguments and on stdin ----------------------------------------------


def run_bytes(cli: Cli, *args: str | bytes, input: bytes = b"") -> subprocess.CompletedProcess[str]:
    """ocat with raw bytes in argv or on stdin, as a shell passes them."""
    # Strict decoding, as in most UTF-8 locales (C.UTF-8 would have stdin use surrogateescape).
    env = {**os.environ, "OCAT_VECTOR_STORE_PATH": str(cli.store_path), "PYTHONIOENCODING": "utf-8:strict"}
    done = subprocess.run([sys.executable, "-m", "ocat", *args], input=input, capture_output=True,
                          env=env, cwd=cli.home, timeout=180, check=False)
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode("utf-8", "replace"),
                                       done.stderr.decode("utf-8", "replace"))


def test_valid_text_replaces_lone_surrogates() -> None:
    assert valid_text("ok\udcff\udcfe!") == ("ok\ufffd\ufffd!", True)
    assert valid_text("fine é") == ("fine é", False)


def test_undecodable_query_and_prompt_in_argv_are_replaced(cli: Cli) -> None:
    query = run_bytes(cli, "--query-vector-store", b"caf\xff\xfe", "--output", "json")
    assert_clean(query, 0, "ocat: warning: --query-vector-store is not valid UTF-8; undecodable bytes replaced with U+FFFD")
    assert query.stderr.count("\n") == 1
    assert json.loads(query.stdout)["result"]["query"] == "caf\ufffd\ufffd"
    ask = run_bytes(cli, "--ask", b"hi\xff", "--dummy-mode", "--output", "json")
    assert_clean(ask, 0, "--ask is not valid UTF-8")
    assert json.loads(ask.stdout)["result"]["text"].startswith("[dummy] You said: hi\ufffd")


def test_undecodable_stdin_is_replaced(cli: Cli) -> None:
    batch = run_bytes(cli, "--query-vector-store", "-", "--output", "json", input=b"good\nbad \xff\xfe\n")
    assert_clean(batch, 0, "ocat: warning: a query on stdin is not valid UTF-8; undecodable bytes replaced with U+FFFD")
    assert [json.loads(line)["result"]["query"] for line in batch.stdout.splitlines()] == ["good", "bad \ufffd\ufffd"]
    ask = run_bytes(cli, "--ask", "-", "--dummy-mode", input=b"hello \xc3\n")
    assert_clean(ask, 0, "the prompt on stdin is not valid UTF-8")
    assert "hello \ufffd" in ask.stdout


def test_an_undecodable_path_to_add_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    name = os.fsencode(tmp_path) + b"/caf\xe9.txt"
    with open(name, "w", encoding="utf-8") as handle:
        handle.write("Some text worth keeping.")
    run = run_bytes(cli, "--add-to-vector-store", name, "--output", "json")
    assert_clean(run, 2, "--add-to-vector-store: the path", "is not valid UTF-8; rename the file or folder")
    assert json.loads(run.stdout)["error"]["type"] == "UsageError"
    stats = cli("--vector-store-stats", "--output", "json").json()["result"]
    assert stats["documents"] == 0


# -- 5. huge counts ------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["99999999999999999999", "1001", "0", "-3", "1_000", "ten"])
def test_results_out_of_range_is_a_usage_error(cli: Cli, value: str) -> None:
    run = cli("--query-vector-store", "x", "--results", value)
    assert_clean(run, 2, f'argument --results: must be a whole number from 1 to 1000, not "{value}"')


def test_results_at_the_limit_works_and_help_states_it(cli: Cli) -> None:
    assert_clean(cli("--query-vector-store", "x", "--results", "1000"), 0)
    assert "1 to 1000" in " ".join(cli("--help").stdout.split())


# -- 6. control characters in JSON ---------------------------------------------------------------

HOSTILE = "a\x85b\x9bc\u202ed\u2028e\u2029f\u2066g\x7fh\x1bi"


def test_dump_json_escapes_c1_bidi_and_line_separators() -> None:
    text = dump_json({"text": HOSTILE, "ok": "é ü 日本"})
    assert not re.search("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2028\u2029\u2066-\u2069]", text)
    assert "\\u0085" in text and "\\u202e" in text and "\\u2028" in text and "é ü 日本" in text
    assert json.loads(text) == {"text": HOSTILE, "ok": "é ü 日本"}
    assert json.loads(dump_json({"x": "\udcff"})) == {"x": "\udcff"}


def test_json_output_escapes_them_on_stdout(cli: Cli) -> None:
    run = cli("--ask", HOSTILE, "--dummy-mode", "--no-vector-store", "--output", "json")
    assert_clean(run, 0)
    assert not re.search("[\x7f-\x9f\u202a-\u202e\u2028\u2029\u2066-\u2069]", run.stdout)
    assert run.json()["result"]["text"].startswith(f"[dummy] You said: {HOSTILE}")
    # Error envelopes too: a bad value quoted in a config error.
    bad = cli("--vector-store-stats", "--output", "json", "--set", "vector_store.port=\u202e9")
    assert bad.returncode == 3 and "\u202e" not in bad.stdout and "\\u202e" in bad.stdout


# -- 7. secrets in error messages ----------------------------------------------------------------


def test_redact_masks_keys_tokens_and_url_credentials() -> None:
    env = {"MY_SERVICE_TOKEN": "tok-0123456789", "SHORT_TOKEN": "abc", "PLAIN": "tok-0123456789x"}
    text = redact(
        "key sk-proj-AbCdEf0123456789 auth Bearer abc.def-ghi url https://user:pa55word@host:8/v1 "
        "given tok-0123456789 api_key=zzzzzzzzzzzz ?key=AIzaSyA0123456789 short abc configured "
        f"{SECRET} keeps https://host/v1",
        secrets=[SECRET],
        env=env,
    )
    assert text == (
        "key *** auth Bearer *** url https://***@host:8/v1 given *** api_key=*** ?key=*** short abc "
        "configured *** keeps https://host/v1"
    )


def test_a_remembered_secret_is_masked_everywhere() -> None:
    remember_secret("remembered-secret-value")
    assert redact("echo remembered-secret-value", env={}) == "echo ***"


class _Echo(Exception):
    pass


def test_provider_errors_never_show_the_key_or_url_credentials() -> None:
    settings = load_settings(env={}, overrides={"llm.api_key": SECRET, "llm.model": "openai/x",
                                                 "llm.api_base": "https://me:hunter2-pass@llm.example/v1"}).llm
    message = str(llm.provider_error(_Echo(f"Incorrect API key provided: {SECRET}"), settings))
    assert SECRET not in message and message == "openai/x failed (_Echo): Incorrect API key provided: ***"
    unreachable = type("APIConnectionError", (Exception,), {})("cannot connect to https://me:hunter2-pass@llm.example")
    message = str(llm.provider_error(unreachable, settings))
    assert "hunter2-pass" not in message and message.startswith("cannot reach https://***@llm.example/v1 for openai/x")


def test_log_failure_redacts_the_line_and_the_traceback(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ocat.logs import log_failure, log_file

    monkeypatch.setenv("XDG_STATE_HOME", str(isolated_home / "state"))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    try:
        raise RuntimeError(f"the server said: bad key {SECRET}")
    except RuntimeError as exc:
        line = log_failure("the answer", exc)
    assert SECRET not in line and "bad key ***" in line
    logged = log_file().read_text(encoding="utf-8")
    assert "RuntimeError: the server said: bad key ***" in logged and SECRET not in logged
    # Undecodable bytes in an exception's text must not make the log itself fail.
    assert "ValueError" in log_failure("a query", ValueError("caf\udcff"))
    assert "caf\\udcff" in log_file().read_text(encoding="utf-8")


@pytest.fixture
def echoing_server() -> Iterator[str]:
    """An OpenAI-style endpoint that refuses every request, quoting the key it was sent."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            auth = self.headers.get("Authorization", "")
            message = f"Invalid API key: {auth.split()[-1] if auth else ''} (sent as {auth})"
            body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "code": 400}}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()  # a quick shutdown
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def test_an_echoed_key_never_reaches_stderr_or_json(cli: Cli, echoing_server: str) -> None:
    model = ["--model", "openai/x", "--set", f"llm.api_base={echoing_server}", "--no-vector-store"]
    run = cli("--ask", "hi", *model, "--output", "json", env={"OCAT_LLM_API_KEY": SECRET})
    assert_clean(run, 1, "Invalid API key: *** (sent as Bearer ***)")
    assert SECRET not in run.stderr + run.stdout
    assert run.json()["error"]["type"] == "ProviderError"
    # The line-mode chat shows the same failure, masked the same way.
    chat = cli("--plain", *model, "--set", f"llm.api_key={SECRET}", input="hi\n")
    assert "Invalid API key: ***" in chat.stderr and SECRET not in chat.stderr + chat.stdout
