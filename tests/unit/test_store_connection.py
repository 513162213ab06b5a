"""A safe connection to a Chroma server on another machine: https and a CA, a token in a header,
tenant and database, plain HTTP off this machine refused before any lookup, a refusal in one
line, the token in no message, and nothing lost while the server is away.

Every server here listens on loopback: a real `chroma run` (the `chroma_run` fixture) and a
reverse proxy that wants a bearer token (tests/support/token_proxy.py). A host "off this
machine" is one under `.invalid` (RFC 2606), which the refusal keeps from ever being looked up.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ocat.config.loading import load_settings
from ocat.errors import ConfigError, StoreError
from ocat.memory import MemoryStore, location_for
from ocat.memory.storage.chroma import open_client
from ocat.memory.storage.location import server_location
from ocat.memory.storage.server_access import ServerRefused, expanded_headers, is_loopback, refuse_clear_text
from ocat.records import Exchange
from tests.support.chroma_server import ChromaServer
from tests.support.cli import Cli, Running
from tests.support.fakes import FakeEmbedder, FakeLLMServer
from tests.support.token_proxy import TokenProxy, make_tls

# Distinctive, so that finding it anywhere it must not be is certain.
TOKEN = "tok-9f3a71c2e85b4d60-do-not-show"
TOKEN_ENV = "OCAT_STORE_TOKEN"
AUTH = {"Authorization": "Bearer ${OCAT_STORE_TOKEN}"}


def write_config(folder: Path, url: str, **extra: str) -> Path:
    """A user config pointing memory at `url` with the token header (and `extra` vector_store keys)."""
    lines = ["vector_store:", f"  url: {url}", "  headers:", "    Authorization: Bearer ${OCAT_STORE_TOKEN}"]
    lines += [f"  {key}: {value}" for key, value in extra.items()]
    path = folder / "config.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def nowhere_but_here(home: Path, *texts: str) -> None:
    """The token is in none of `texts` (a run's stdout and stderr) nor in any file under `home` (logs, spools)."""
    for text in texts:
        assert TOKEN not in text
    for path in home.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert TOKEN.encode() not in path.read_bytes(), path


@pytest.fixture
def proxy(chroma_run: ChromaServer) -> Iterator[TokenProxy]:
    """The token proxy in front of the `chroma_run` server, over plain HTTP on loopback."""
    served = TokenProxy(chroma_run.port, TOKEN).start()
    try:
        yield served
    finally:
        served.stop()


# -- plain HTTP off this machine --------------------------------------------------------------------


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST.", "db.localhost", "127.0.0.1", "127.8.9.1", "::1", "[::1]"])
def test_loopback_is_told_from_the_name_alone(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["memory.invalid", "10.0.0.5", "192.168.1.2", "::ffff:10.0.0.1", "localhost.example"])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize("where", [
    {"url": "http://memory.invalid:8000"},
    {"url": "http://memory.invalid/chroma"},
    {"url": None, "host": "memory.invalid"},
])
def test_plain_http_off_this_machine_is_refused_before_any_lookup(
    where: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    looked_up: list[object] = []

    def no_lookup(*args: object, **kwargs: object) -> Any:
        looked_up.append(args)
        raise AssertionError("no lookup may happen")

    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    monkeypatch.setattr(socket, "create_connection", no_lookup)
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    location = server_location(where.get("url"), where.get("host"), 8000, headers=AUTH)
    with pytest.raises(StoreError, match=r"refusing plain HTTP to http://memory\.invalid:\d+.*vector_store\.insecure"):
        open_client(location)
    assert looked_up == []


def test_https_or_insecure_true_lets_a_remote_host_through_the_check() -> None:
    refuse_clear_text(server_location("https://memory.invalid:8443", None, 8000))
    refuse_clear_text(server_location(None, "memory.invalid", 8000, ssl=True))
    refuse_clear_text(server_location("http://memory.invalid:8000", None, 8000, insecure=True))
    refuse_clear_text(server_location("http://127.0.0.1:8000", None, 8000))


def test_the_cli_refuses_plain_remote_http_in_one_line_with_exit_1(cli: Cli, tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://memory.invalid:8000")
    run = cli("--config", str(config), "--vector-store-stats", env={TOKEN_ENV: TOKEN})
    assert run.returncode == 1, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "vector_store.insecure" in lines[0] and "http://memory.invalid:8000" in lines[0]
    nowhere_but_here(cli.home, run.stdout, run.stderr)


# -- the settings -----------------------------------------------------------------------------------


def test_the_url_carries_scheme_host_port_and_prefix_and_describes_without_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path, "https://memory.invalid:8443/chroma/", tenant="team", database="shared")
    settings = load_settings(str(config), env={})
    location = location_for(settings)
    assert (location.scheme, location.host, location.port, location.prefix) == ("https", "memory.invalid", 8443,
                                                                                 "/chroma")
    assert location.describe() == "https://memory.invalid:8443/chroma (tenant team, database shared)"
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    assert expanded_headers(location) == {"Authorization": f"Bearer {TOKEN}"}
    for shown in (repr(location), repr(settings), repr(settings.vector_store), location.describe()):
        assert TOKEN not in shown and "Bearer" not in shown
    # Host and port with ssl: the same https location, the default port of the scheme when the URL has none.
    assert location_for(load_settings(None, env={}, overrides={
        "vector_store.host": "memory.invalid", "vector_store.ssl": True})).server_url() == "https://memory.invalid:8000"
    assert location_for(load_settings(None, env={}, overrides={
        "vector_store.url": "https://memory.invalid"})).port == 443


def test_a_header_variable_that_is_not_set_is_a_config_error_naming_it(tmp_path: Path) -> None:
    location = location_for(load_settings(str(write_config(tmp_path, "https://memory.invalid")), env={}))
    with pytest.raises(ConfigError, match=r"vector_store\.headers: Authorization needs the environment variable "
                                          r"OCAT_STORE_TOKEN, which is not set"):
        expanded_headers(location, env={})


def test_a_header_variable_named_ocat_is_not_taken_for_a_misspelt_setting(tmp_path: Path) -> None:
    # Every other OCAT_* variable must name a setting; the one the headers read is not one.
    config = write_config(tmp_path, "https://memory.invalid")
    load_settings(str(config), env={TOKEN_ENV: TOKEN})
    with pytest.raises(ConfigError, match="OCAT_STORE_TOKN"):
        load_settings(str(config), env={"OCAT_STORE_TOKN": TOKEN})


@pytest.mark.parametrize(("text", "problem"), [
    ("  headers: Bearer x\n", "vector_store.headers must be a mapping of names to strings"),
    ("  headers:\n    Bad Name: x\n", "'Bad Name', which is not an HTTP header name"),
    ("  headers:\n    X-Version: 2\n", "X-Version must be a string"),
    ("  url: https://user:pw@memory.invalid\n", "no user:password@"),
    ("  url: memory.invalid:8000\n", "an http:// or https:// URL"),
])
def test_bad_connection_settings_are_named_at_their_line(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("vector_store:\n" + text)
    with pytest.raises(ConfigError, match="c.yaml:2") as caught:
        load_settings(str(path), env={})
    assert problem in str(caught.value) and "pw" not in str(caught.value).replace("password", "")


# -- the token, through a proxy ----------------------------------------------------------------------


def test_the_token_gets_in_and_the_store_works_through_the_proxy(
    cli: Cli, proxy: TokenProxy, tmp_path: Path, real_embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)  # the client in this process reads it as the CLI's does
    store = MemoryStore.open(server_location(proxy.url, None, 8000, headers=AUTH), real_embedder, name="default")
    store.add_exchange(Exchange(user_prompt="where is the spare key", assistant_response="under the blue pot",
                                thread_id="t", session_id="s"))
    store.close()
    config = write_config(tmp_path, proxy.url)
    run = cli("--config", str(config), "--vector-store-stats", "--output", "json")
    assert run.returncode == 0, run.stderr
    assert run.json()["result"]["exchanges"] == 1
    found = cli("--config", str(config), "--query-vector-store", "where did I leave the spare key?")
    assert found.returncode == 0 and "blue pot" in found.stdout, found.stderr
    # Named stores are read on the same server, through the same proxy and token.
    named = cli("--config", str(config), "--store", "work", "--vector-store-stats")
    assert named.returncode == 1 and "no store named 'work'; the stores are: default" in named.stderr, named.stderr
    assert proxy.forwarded and proxy.refused == 0
    nowhere_but_here(cli.home, run.stdout, run.stderr, found.stdout, found.stderr, named.stdout, named.stderr)


@pytest.mark.parametrize("token", [None, "tok-wrong-0000000000000000"])
@pytest.mark.parametrize("action", [["--vector-store-stats"], ["--query-vector-store", "spare key"],
                                    ["--check-store"]])
def test_a_missing_or_wrong_token_is_one_line_naming_the_server_and_status_then_exit_1(
    cli: Cli, proxy: TokenProxy, tmp_path: Path, token: str | None, action: list[str]
) -> None:
    config = write_config(tmp_path, proxy.url)
    if token is None:  # no header at all: the proxy is asked, and refuses
        config.write_text(f"vector_store:\n  url: {proxy.url}\n")
    run = cli("--config", str(config), *action, env={TOKEN_ENV: token or TOKEN})
    assert run.returncode == 1, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert f"the memory server at {proxy.url} refused ocat: HTTP 401 Unauthorized" in lines[0]
    assert "vector_store.headers" in lines[0]
    assert proxy.refused >= 1 and not proxy.forwarded
    as_json = cli("--config", str(config), *action, "--output", "json", env={TOKEN_ENV: token or TOKEN})
    assert as_json.json()["error"]["type"] == "StoreError" and as_json.json()["error"]["exit_code"] == 1
    nowhere_but_here(cli.home, run.stdout, run.stderr, as_json.stdout, as_json.stderr)
    if token:
        assert token not in run.stderr


def test_a_refusal_in_process_is_a_server_refused_error_without_the_token(
    proxy: TokenProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "tok-wrong-1111111111111111")
    location = server_location(proxy.url, None, 8000, headers=AUTH)
    with pytest.raises(ServerRefused) as caught:
        open_client(location)
    assert "tok-wrong" not in str(caught.value) and "HTTP 401" in str(caught.value)


# -- TLS ----------------------------------------------------------------------------------------------


@pytest.fixture
def tls_proxy(chroma_run: ChromaServer, tmp_path: Path) -> Iterator[TokenProxy]:
    """The token proxy over TLS, with a certificate from a CA made for the test."""
    pytest.importorskip("cryptography", reason="the test's certificates are made with cryptography")
    served = TokenProxy(chroma_run.port, TOKEN, tls=make_tls(tmp_path)).start()
    try:
        yield served
    finally:
        served.stop()


def test_https_with_the_ca_from_a_setting_or_ssl_cert_file(cli: Cli, tls_proxy: TokenProxy, tmp_path: Path) -> None:
    assert tls_proxy.tls is not None and tls_proxy.url.startswith("https://")
    ca = str(tls_proxy.tls.ca_file)
    with_setting = write_config(tmp_path, tls_proxy.url, ca_file=ca)
    run = cli("--config", str(with_setting), "--vector-store-stats", "--output", "json", env={TOKEN_ENV: TOKEN})
    assert run.returncode == 0, run.stderr
    assert run.json()["result"]["exchanges"] == 0
    # The same by host, port and ssl.
    run = cli("--config", str(with_setting), "--set", "vector_store.url=null", "--set", "vector_store.host=127.0.0.1",
              "--set", f"vector_store.port={tls_proxy.port}", "--set", "vector_store.ssl=true",
              "--vector-store-stats", env={TOKEN_ENV: TOKEN})
    assert run.returncode == 0 and f"https://127.0.0.1:{tls_proxy.port}" in run.stdout, run.stderr
    # Or the CA through SSL_CERT_FILE, which the HTTP client reads.
    plain = write_config(tmp_path, tls_proxy.url)
    run = cli("--config", str(plain), "--vector-store-stats", env={TOKEN_ENV: TOKEN, "SSL_CERT_FILE": ca})
    assert run.returncode == 0, run.stderr
    # Without the CA, the certificate is not trusted: one line saying so.
    run = cli("--config", str(plain), "--vector-store-stats", env={TOKEN_ENV: TOKEN, "SSL_CERT_FILE": None})
    assert run.returncode == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "certificate" in lines[0] and "vector_store.ca_file" in lines[0], run.stderr
    nowhere_but_here(cli.home, run.stdout, run.stderr)


# -- tenant and database ----------------------------------------------------------------------------


def test_tenant_and_database_reach_the_server(cli: Cli, chroma_run: ChromaServer, proxy: TokenProxy,
                                              tmp_path: Path) -> None:
    import chromadb

    admin = chromadb.AdminClient(chromadb.config.Settings(chroma_api_impl="chromadb.api.fastapi.FastAPI",
                                                          chroma_server_host="127.0.0.1",
                                                          chroma_server_http_port=chroma_run.port,
                                                          anonymized_telemetry=False))
    admin.create_tenant("team")
    admin.create_database("shared", tenant="team")
    config = write_config(tmp_path, proxy.url, tenant="team", database="shared")
    run = cli("--config", str(config), "--vector-store-stats", "--output", "json", env={TOKEN_ENV: TOKEN})
    assert run.returncode == 0, run.stderr
    assert any("/tenants/team/databases/shared/collections" in path for path in proxy.forwarded)
    inside = chromadb.HttpClient(host="127.0.0.1", port=chroma_run.port, tenant="team", database="shared")
    assert "default-exchanges" in {c.name for c in inside.list_collections()}
    outside = chromadb.HttpClient(host="127.0.0.1", port=chroma_run.port)
    assert "default-exchanges" not in {c.name for c in outside.list_collections()}
    # A database that does not exist is named.
    missing = write_config(tmp_path, proxy.url, tenant="team", database="nosuch")
    run = cli("--config", str(missing), "--vector-store-stats", env={TOKEN_ENV: TOKEN})
    assert run.returncode == 1 and "nosuch" in run.stderr and len(run.stderr.strip().splitlines()) == 1


# -- nothing lost while the server is away ------------------------------------------------------------


# The line mode, with memory tried again at once rather than every 30 s after a failure.
REVIVE_SOON = r"""
import sys
import ocat.chat.session_memory as session_memory
session_memory.REVIVE_SECONDS = 0.0
from ocat.cli.dispatch import run
sys.argv[0] = "ocat"
run()
"""


def test_exchanges_said_while_the_server_is_away_are_written_when_it_is_back(
    cli: Cli, chroma_run: ChromaServer, proxy: TokenProxy, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    config = write_config(tmp_path, proxy.url)
    llm_server.reply = "Noted."
    chat = Running(cli, "--config", str(config), "--plain", "--model", "openai/fake-model",
                   "--set", f"llm.api_base={llm_server.api_base}", "--set", "llm.api_key=sk-test",
                   stdin=True, env={TOKEN_ENV: TOKEN}, script=REVIVE_SOON)
    said = 0

    def say(text: str) -> None:
        nonlocal said
        chat.send(text)
        said += 1
        chat.wait_until(lambda out: out.count("Noted.") >= said, stream="stdout")

    say("the spare key is under the blue pot")
    chroma_run.stop()
    say("the bike lock code is four seven one one")
    chroma_run.start()  # the same port and data
    say("the boiler is serviced in May")
    chat.send("/quit")
    assert chat.process.wait(timeout=120) == 0
    stderr = chat.said("stderr")
    import chromadb

    client = chromadb.HttpClient(host="127.0.0.1", port=chroma_run.port)
    stored = client.get_collection("default-exchanges").get(include=["documents"])
    texts = " ".join(stored["documents"] or [])
    assert len(stored["ids"]) == 3, stderr
    assert f"the memory server at {proxy.url} is away: HTTP 502" in stderr and "Memory is back on" in stderr
    for fact in ("blue pot", "four seven one one", "serviced in May"):
        assert fact in texts
    nowhere_but_here(cli.home, stderr, "".join(chat.seen["stdout"]))


def test_a_chat_that_ends_while_the_server_is_away_keeps_its_words_for_the_next_start(
    cli: Cli, chroma_run: ChromaServer, proxy: TokenProxy, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    config = write_config(tmp_path, proxy.url)
    llm_server.reply = "Noted."
    chroma_run.stop()
    run = cli("--config", str(config), "--plain", "--model", "openai/fake-model",
              "--set", f"llm.api_base={llm_server.api_base}", "--set", "llm.api_key=sk-test",
              input="the ladder is in the shed\n/quit\n", env={TOKEN_ENV: TOKEN})
    assert run.returncode == 0, run.stderr
    assert "1 exchange of this chat could not be written to memory" in run.stderr
    assert "kept in ~/.local/state/ocat/unsaved/" in run.stderr
    chroma_run.start()
    found = cli("--config", str(config), "--query-vector-store", "where is the ladder?", env={TOKEN_ENV: TOKEN})
    assert found.returncode == 0, found.stderr
    assert "1 exchange kept by an earlier chat was written to memory" in found.stderr and "shed" in found.stdout
    nowhere_but_here(cli.home, run.stdout, run.stderr, found.stdout, found.stderr)


def test_two_machines_writing_one_thread_at_once_keep_both_exchanges(
    chroma_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    stores = []
    for machine in ("a", "b"):  # each machine has its own cache (derived files)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / machine / "cache"))
        stores.append(MemoryStore.open(chroma_server, FakeEmbedder(), name="default"))
    said = [Exchange(user_prompt=f"{machine} says hello", assistant_response="hi", thread_id="shared",
                     session_id=machine) for machine in ("a", "b")]
    start = threading.Barrier(2)

    def write(store: MemoryStore, exchange: Exchange) -> None:
        start.wait()
        store.add_exchange(exchange)

    writers = [threading.Thread(target=write, args=pair) for pair in zip(stores, said)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    for store in stores:
        assert {e.exchange_id for e in store.get_thread("shared")} == {e.exchange_id for e in said}
        store.close()


def test_the_line_mode_with_a_wrong_token_goes_on_without_memory_and_keeps_every_word(
    cli: Cli, proxy: TokenProxy, llm_server: FakeLLMServer, tmp_path: Path
) -> None:
    config = write_config(tmp_path, proxy.url)
    llm_server.reply = "Noted."
    chat = ["--config", str(config), "--plain", "--model", "openai/fake-model",
            "--set", f"llm.api_base={llm_server.api_base}", "--set", "llm.api_key=sk-test"]
    run = cli(*chat, input="the ladder is in the shed\n/quit\n", env={TOKEN_ENV: "tok-wrong-2222222222222222"})
    assert run.returncode == 0, run.stderr
    assert "Noted." in run.stdout
    assert f"memory is off: the memory server at {proxy.url} refused ocat: HTTP 401 Unauthorized" in run.stderr
    assert "kept in ~/.local/state/ocat/unsaved/" in run.stderr
    assert "tok-wrong-2222" not in run.stderr + run.stdout
    # --ask, as the chats: an answer, memory off in one line, the exchange kept.
    ask = cli(*[a for a in chat if a != "--plain"], "--ask", "the bike is in the garage",
              env={TOKEN_ENV: "tok-wrong-2222222222222222"})
    assert ask.returncode == 0 and "Noted." in ask.stdout, ask.stderr
    assert "refused ocat: HTTP 401 Unauthorized" in ask.stderr and "kept in ~/.local/state/ocat/unsaved/" in ask.stderr
    # With the right token, the next start writes what was kept.
    later = cli(*chat, input="/quit\n", env={TOKEN_ENV: TOKEN})
    assert later.returncode == 0 and "2 exchanges kept by an earlier chat were written to memory" in later.stderr, \
        later.stderr
    nowhere_but_here(cli.home, run.stdout, run.stderr, ask.stdout, ask.stderr, later.stdout, later.stderr)


def test_a_name_that_does_not_resolve_is_not_called_a_server_that_is_down(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(*args: object, **kwargs: object) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)  # no lookup leaves this machine
    with pytest.raises(StoreError) as caught:
        open_client(server_location("https://memory.invalid:8443", None, 8000))
    assert "the memory server at https://memory.invalid:8443 cannot be found: its name does not resolve" in str(
        caught.value)


def test_two_stores_of_one_name_in_two_databases_never_share_a_derived_file() -> None:
    """The lexical index of a server store is named by host, port and, when set, a digest of the
    prefix, tenant and database; the plain case keeps the name it always had."""
    from ocat.memory.storage.location import StoreLocation
    from ocat.memory.storage.derived import lexical_index_path

    plain = StoreLocation(host="127.0.0.1", port=8000)
    assert lexical_index_path(plain, "memory").name == "127.0.0.1-8000-memory.sqlite3"
    named = {lexical_index_path(StoreLocation(host="127.0.0.1", port=8000, **where), "memory")
             for where in ({"database": "work"}, {"database": "home"}, {"tenant": "team"}, {"prefix": "/chroma"})}
    assert len(named) == 4 and lexical_index_path(plain, "memory") not in named
