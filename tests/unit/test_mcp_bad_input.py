"""`ocat mcp` given what no client should send: raw lines that are not JSON-RPC, and tool
arguments out of range. Every one gets an answer, and the server goes on serving."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from typing import IO, Any, Iterator

import pytest

from ocat.errors import UsageError
from ocat.memory.retrieval.filters import FilterSpec, parse_time, parse_where
from tests.support.warm_start import python_command
from tests.support.cli import Cli

# Seconds to wait for one reply: far longer than any answer takes, so only a server that
# never answers (the bug) runs into it, and the test fails instead of hanging.
REPLY_TIMEOUT = 90


class RawClient:
    """`ocat mcp` driven with raw JSON-RPC lines on stdin, its replies read with a time limit."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, args=(process.stdout,), daemon=True).start()

    def _pump(self, stdout: IO[bytes] | None) -> None:
        assert stdout is not None
        for line in stdout:
            self.lines.put(line)
        self.lines.put(b"")  # the server closed stdout

    def send(self, line: str | bytes) -> None:
        """Write one line (a newline is added) to the server's stdin."""
        assert self.process.stdin is not None
        data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def request(self, id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return the reply to it."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(json.dumps(message))
        return self.reply()

    def reply(self) -> dict[str, Any]:
        """The next response the server writes (notifications skipped); fails after REPLY_TIMEOUT."""
        while True:
            try:
                line = self.lines.get(timeout=REPLY_TIMEOUT)
            except queue.Empty:
                pytest.fail(f"no reply from the server within {REPLY_TIMEOUT}s")
            assert line, "the server closed its stdout"
            message = json.loads(line)
            if "id" in message and ("result" in message or "error" in message):
                return message


@pytest.fixture
def raw_server(cli: Cli) -> Iterator[RawClient]:
    """An initialised `ocat mcp` on the test's store, talked to in raw lines."""
    env = {**os.environ, "OCAT_VECTOR_STORE_PATH": str(cli.store_path)}
    errlog = (cli.home / "mcp-stderr.log").open("wb")
    process = subprocess.Popen(
        python_command("-m", "ocat", "mcp", env=env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=errlog, env=env, cwd=cli.home,
    )
    client = RawClient(process)
    try:
        hello = client.request(1, "initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"},
        })
        assert hello["result"]["serverInfo"]["name"] == "ocat"
        client.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        yield client
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        errlog.close()


DEEP = "[" * 3000 + "]" * 3000
HUGE = "9" * 5000

BAD_LINES = [
    # (the line, the error code, the id the reply must carry)
    ("this is not json", -32700, None),
    ('{"jsonrpc": "2.0", "id": 7, "method": "tools/list"', -32700, None),  # cut short
    (DEEP, -32700, None),
    ('{"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"x": ' + DEEP + "}}", -32700, None),
    # Valid JSON the SDK cannot take: the id can be read, so the client's request is answered.
    ('{"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": {"x": ' + HUGE + "}}", -32600, 10),
    ('{"jsonrpc": "2.0", "id": "s-11", "method": "tools/list", "params": {"x": "\\udfff"}}', -32600, "s-11"),
    ('{"jsonrpc": "2.0", "id": 12, "method": "tools/list", "params": {"x": "\\ud800 alone"}}', -32600, 12),
    ('{"id": 13, "method": "tools/list"}', -32600, 13),  # no "jsonrpc": "2.0"
    ('{"id": 9, "method": "tools/list", "params": {"x": NaN}}', -32600, 9),
    ('{"jsonrpc": "2.0", "id": 14}', -32600, 14),  # neither a request nor a response
    ("42", -32600, None),
    ("[]", -32600, None),
    ('[{"jsonrpc": "2.0", "id": 15, "method": "tools/list"}]', -32600, None),  # batches are not MCP
    ('{"jsonrpc": "2.0", "id": ' + HUGE + ', "method": "x"}', -32600, None),  # an id no one can hold
    ('{"jsonrpc": "2.0", "id": "\\udfff", "method": "x"}', -32600, None),  # nor can this one be written back
]


def test_every_unreadable_line_is_answered_and_the_server_carries_on(raw_server: RawClient, cli: Cli) -> None:
    for line, code, id in BAD_LINES:
        raw_server.send(line)
        reply = raw_server.reply()
        assert reply["error"]["code"] == code, (line[:80], reply)
        assert reply["id"] == id, (line[:80], reply)
        assert reply["error"]["message"].startswith("Parse error" if code == -32700 else "Invalid Request")
    # Raw bytes that are not UTF-8, and a blank line (no message, so no answer), change nothing.
    raw_server.send(b'{"jsonrpc": "2.0", "id": 16, "method": "tools/list", "params": {"x": "\xff\xfe"}}')
    assert "tools" in raw_server.reply()["result"]
    raw_server.send("")
    listed = raw_server.request(17, "tools/list")
    assert listed["id"] == 17 and {t["name"] for t in listed["result"]["tools"]} >= {"search_memory", "memory_stats"}
    # A tool's date out of range is an error result naming the argument, not an "internal error".
    for argument in ("since", "until"):
        called = raw_server.request(18, "tools/call", {
            "name": "search_memory", "arguments": {"query": "x", argument: "0001-01-01"},
        })
        text = called["result"]["content"][0]["text"]
        assert called["result"]["isError"] is True and f"{argument}: '0001-01-01' is out of range" in text
    stats = raw_server.request(19, "tools/call", {"name": "memory_stats", "arguments": {}})
    assert stats["result"]["isError"] is False
    errors = (cli.home / "mcp-stderr.log").read_text()
    assert "Traceback" not in errors and "internal error" not in errors


# -- tool arguments, without a server --------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (FilterSpec(until="0001-01-01"), "until: '0001-01-01' is out of range: use a date from 0001-01-02"),
        (FilterSpec(since="0001-01-01T12:00"), "since: '0001-01-01T12:00' is out of range"),
        (FilterSpec(since="9" * 400), "since: '" + "9" * 36 + "... is out of range for a Unix time"),
        (FilterSpec(until="x" * 5000), "until: expected a date"),
        (FilterSpec(where={"date": "0001-01-01"}), "where: date: '0001-01-01' is out of range"),
        (FilterSpec(where={"date": 10**5000}), "where: date: a number of about 5001 digits is out of range"),
        (FilterSpec(where={"ocd_number": "1e999"}), "where: ocd_number is a whole number, got '1e999'"),
        (FilterSpec(where={"ocd_number": 10**30}), "where: ocd_number: 1000000000000000000000000000000 is out of range"),
        (FilterSpec(where={"year": 2**63}), "where: year: 9223372036854775808 is out of range"),
        (FilterSpec(where={"year": float("inf")}), "where: year: inf is not a number the store can compare with"),
        (FilterSpec(where={"year": float("nan")}), "where: year: nan is not a number"),
    ],
)
def test_dates_and_numbers_no_store_can_hold_are_argument_errors(spec: FilterSpec, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        spec.to_filters()
    assert str(caught.value).startswith(message)


def test_the_edges_of_the_date_range_still_work() -> None:
    assert parse_time("0001-01-02") < parse_time("1970-01-02") < parse_time("9999-12-31", end=True)
    assert FilterSpec(since="0001-01-02", until="9999-12-30").to_filters()
    # A text too long to be a 64-bit number can only have been saved as text: matched as such.
    assert FilterSpec(where={"year": "9" * 5000}).to_filters().where_for("document") == {"year": {"$eq": "9" * 5000}}
    assert parse_where(["ocd_number<=9223372036854775807"]).conditions[0].value == 2**63 - 1


@pytest.mark.parametrize("item", ["date>=0001-01-01", "ocd_number=99999999999999999999", "date<=1e999",
                                  "chunk_index>1e999"])
def test_the_cli_where_refuses_the_same_values(item: str) -> None:
    with pytest.raises(UsageError):
        parse_where([item])


@pytest.mark.parametrize(
    ("value", "message"),
    [(10**30, "whole numbers go from"), (-(2**63) - 1, "whole numbers go from"),
     (float("inf"), "not a number that can be stored"), (float("nan"), "not a number that can be stored")],
)
def test_saved_metadata_numbers_must_be_storable(value: float, message: str) -> None:
    from ocat.mcp_server.tools import checked_metadata

    with pytest.raises(UsageError, match=message):
        checked_metadata({"n": value})
    assert checked_metadata({"n": 2**63 - 1, "m": -(2**63), "f": 1e308, "b": True})["n"] == 2**63 - 1
