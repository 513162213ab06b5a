"""Issue 35 (items 1 and 3): OpenAI-compatible models are reached without litellm (one streamed
POST), what is known of a model comes from litellm's table unimported, and a local server
without a key is sent a placeholder instead of failing for credentials it does not need."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ocat.config.loading import load_settings
from ocat.llm.model_table import model_facts
from tests.support.cli import Cli
from tests.support.fakes import FakeLLMServer

# The --ask path of an OpenAI-compatible model, in a fresh interpreter: which heavy modules it imported.
ASK_IMPORTS = r"""
import sys
from ocat.cli.dispatch import main
code = main()
print("IMPORTED", sorted(m for m in ("litellm", "openai", "textual", "tiktoken") if m in sys.modules), code, file=sys.stderr)
"""


@pytest.mark.slow
def test_the_model_table_is_read_without_importing_litellm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # empty: each test's own comes with the table
    code = ("import sys; from ocat.llm.model_table import model_facts; f = model_facts('gpt-4o-mini'); "
            "print(f.max_input_tokens, f.supports_function_calling, f.provider, 'litellm' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    window, tools, provider, imported = done.stdout.split()
    assert int(window) >= 100_000 and tools == "True" and provider == "openai" and imported == "False"
    # Cached for the next runs, in ocat's own cache.
    assert list((tmp_path / "cache" / "ocat").glob("models-*.json"))


def test_what_is_known_of_a_model_and_what_is_not() -> None:
    from ocat import llm

    assert model_facts("openai/gpt-4o-mini") == model_facts("gpt-4o-mini")
    assert model_facts("openai/my-local-model") is None
    local = load_settings(env={}, overrides={"llm.model": "openai/my-local-model",
                                             "llm.api_base": "http://127.0.0.1:9/v1"}).llm
    assert llm.openai_road(local) and llm.input_token_limit(local) == llm.FALLBACK_CONTEXT_TOKENS - 1024
    assert llm.model_calls_tools(local) is None and llm.credentials_problem(local) is None
    anthropic = load_settings(env={}, overrides={"llm.model": "anthropic/claude-3-5-haiku-20241022"}).llm
    assert not llm.openai_road(anthropic)
    priced = llm._priced(type("U", (), {"prompt_tokens": 1000, "completion_tokens": 100})(), "gpt-4o-mini")
    assert priced.cost_usd is not None and priced.cost_usd > 0
    # The OpenAI road hands the usage over as a dict: counted the same.
    assert llm._priced({"prompt_tokens": 1000, "completion_tokens": 100}, "gpt-4o-mini") == priced


@pytest.mark.slow
def test_ask_reaches_an_openai_compatible_server_without_litellm_or_the_sdk(cli: Cli, llm_server: FakeLLMServer) -> None:
    llm_server.reply = "Short answer."
    done = subprocess.run(
        [sys.executable, "-c", ASK_IMPORTS, "--ask", "hi", "--model", "openai/fake-model",
         "--set", f"llm.api_base={llm_server.api_base}", "--set", "llm.api_key=sk-test"],
        capture_output=True, text=True, env=cli.environ(), cwd=cli.home, timeout=180,
    )
    assert "Short answer." in done.stdout, done.stderr
    assert "IMPORTED [] 0" in done.stderr
    assert llm_server.headers[-1]["Authorization"] == "Bearer sk-test"


@pytest.mark.slow
def test_a_local_server_needs_no_key(cli: Cli, llm_server: FakeLLMServer) -> None:
    llm_server.reply = "No key needed."
    run = cli("--model", "openai/fake", "--set", f"llm.api_base={llm_server.api_base}", "--ask", "hi",
              env={"OPENAI_API_KEY": None})
    assert run.returncode == 0 and "No key needed." in run.stdout, run.stderr
    assert llm_server.headers[-1]["Authorization"] == "Bearer ocat-no-key"
    assert llm_server.requests[-1]["model"] == "fake"


@pytest.mark.slow
def test_without_a_server_or_a_key_it_says_which_key_to_set(cli: Cli) -> None:
    run = cli("--model", "openai/gpt-4o-mini", "--ask", "hi", env={"OPENAI_API_KEY": None})
    assert run.returncode != 0 and "set OPENAI_API_KEY" in run.stderr


@pytest.mark.slow
def test_provider_errors_on_the_openai_road_read_as_before(cli: Cli, llm_server: FakeLLMServer) -> None:
    llm_server.status = 401
    unauthorised = cli("--model", "openai/fake", "--set", f"llm.api_base={llm_server.api_base}",
                       "--set", "llm.api_key=wrong", "--ask", "hi")
    assert unauthorised.returncode == 1 and "authentication failed for openai/fake" in unauthorised.stderr
    refused = cli("--model", "openai/fake", "--set", "llm.api_base=http://127.0.0.1:9/v1",
                  "--set", "llm.api_key=x", "--ask", "hi")
    assert refused.returncode == 1 and "cannot reach http://127.0.0.1:9/v1 for openai/fake" in refused.stderr
