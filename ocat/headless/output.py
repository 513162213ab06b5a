"""What a one-shot action prints: the Reporter (results on stdout as text or one JSON document,
notes on stderr, exit codes), JSON that is safe for terminals and parsers, reading stdin."""

from __future__ import annotations

import json
import re
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import IO, Any, Callable, Iterator, Literal, get_args

from ocat.errors import OcatError
from ocat.text.redact import redact
from ocat.text.terminal import printable


# Characters json.dumps(ensure_ascii=False) leaves raw that a terminal or a JavaScript
# parser may act on: DEL and the C1 controls (0x9b is a one-byte CSI), the bidirectional
# marks, overrides and isolates ("Trojan Source"), the line and paragraph separators (line
# ends in JavaScript), the BOM, and lone surrogates (undecodable bytes, which stdout cannot
# encode). They can only occur inside JSON strings, so \uXXXX in their place stays valid JSON.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")


def dump_json(value: Any) -> str:
    """`value` as one line of JSON: UTF-8 text kept readable, every control character escaped.

    Every JSON document ocat prints goes through here.
    """
    text = json.dumps(value, ensure_ascii=False)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_SURROGATES = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> tuple[str, bool]:
    """`text` with undecodable bytes as U+FFFD, and whether there were any.

    Python decodes argv (and stdin, in some locales) with surrogateescape: a byte that is
    not UTF-8 becomes a lone surrogate, which the tokenizer, ChromaDB and JSON all refuse.
    """
    cleaned, count = _SURROGATES.subn("\ufffd", text)
    return cleaned, bool(count)


def read_stdin(reporter: Reporter, what: str) -> str:
    """All of stdin as text; bytes that are not UTF-8 become U+FFFD, and one line on stderr says so."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:  # a text stream put in place of stdin (tests, embedding)
        text, replaced = valid_text(sys.stdin.read())
    else:
        # Read bytes: the locale decides how sys.stdin decodes, strictly in some (a traceback).
        data = buffer.read()
        try:
            text, replaced = data.decode("utf-8"), False
        except UnicodeDecodeError:
            text, replaced = data.decode("utf-8", errors="replace"), True
    if replaced:
        reporter.note(f"ocat: warning: {what} on stdin is not valid UTF-8; undecodable bytes replaced with U+FFFD")
    # Universal newlines, as iterating over sys.stdin would give.
    return text.replace("\r\n", "\n").replace("\r", "\n")


# What a headless action prints on stdout: lines for a person, or one JSON document (`--output`).
OutputFormat = Literal["text", "json"]
OUTPUT_FORMATS: tuple[OutputFormat, ...] = get_args(OutputFormat)


class Reporter:
    """Writes an action's result as text or as the JSON envelope, and its failures."""

    def __init__(self, *, action: str, output: OutputFormat, stdout: IO[str] | None = None,
                 stderr: IO[str] | None = None):
        self.action = action
        self.output = output
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self.started = time.perf_counter()
        self.model: str | None = None
        self.config_path: str | None = None

    def restart_clock(self) -> None:
        """Start timing a new result (each batch query reports its own duration)."""
        self.started = time.perf_counter()

    def envelope(self, *, ok: bool, result: Any = None, error: dict[str, Any] | None = None) -> dict[str, Any]:
        """The JSON document every headless action prints with `--output json`."""
        return {
            "ok": ok,
            "mode": "headless",
            "action": self.action,
            "result": result,
            "error": error,
            "meta": {
                "duration_ms": round((time.perf_counter() - self.started) * 1000, 3),
                "model": self.model,
                "config_path": self.config_path,
            },
        }

    def succeed(self, result: dict[str, Any], text: str | None) -> int:
        """Print a result; returns exit code 0."""
        if self.output == "json":
            self.stdout.write(dump_json(self.envelope(ok=True, result=result)) + "\n")
        elif text:
            # Results quote stored memories and model answers: never let them drive the terminal.
            text = printable(text)
            self.stdout.write(text if text.endswith("\n") else text + "\n")
        self.stdout.flush()
        return 0

    def fail(self, exc: OcatError) -> int:
        """Report an expected failure on stderr (and as JSON on stdout); returns its exit code.

        The message is redacted: a provider's error can echo the API key it was sent.
        """
        message = redact(str(exc))
        self.stderr.write(f"ocat: {printable(message)}\n")
        self.stderr.flush()
        if self.output == "json":
            error = {"type": _family(exc), "message": message, "exit_code": exc.exit_code}
            self.stdout.write(dump_json(self.envelope(ok=False, error=error)) + "\n")
            self.stdout.flush()
        return exc.exit_code

    def note(self, message: str) -> None:
        """A message for the person at the terminal, on stderr."""
        self.stderr.write(printable(message) + "\n")
        self.stderr.flush()


class EtaPrinter:
    """Progress of a long action on stderr, at most every `every` seconds: done of total, the
    rate, and how long the rest will take at that rate ("120/412 conversations, 3.1/s, about 1 min left")."""

    def __init__(self, say: Callable[[str], None], noun: str, *, every: float = 2.0) -> None:
        self.say, self.noun, self.every = say, noun, every
        self.started = time.monotonic()
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        """Report `done` of `total` (0: unknown) when it is time to."""
        moment = time.monotonic()
        if moment - self.last < self.every and done < total:
            return
        self.last = moment
        elapsed = max(moment - self.started, 1e-6)
        rate = done / elapsed
        line = f"ocat: {done:,}/{total:,} {self.noun}" if total else f"ocat: {done:,} {self.noun}"
        line += f", {rate:.1f}/s"
        if total and rate > 0 and done < total:
            line += f", about {_duration((total - done) / rate)} left"
        self.say(line)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


@contextmanager
def stop_on_interrupt(reporter: Reporter) -> Iterator[threading.Event]:
    """While the block runs, the first Ctrl+C asks it to stop at its next step (the event is
    set, and a line says so); a second one interrupts at once."""
    stopping = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stopping
        return

    def first(signum: int, frame: object) -> None:
        stopping.set()
        reporter.note("ocat: stopping after the conversations being written (Ctrl+C again to stop at once)")
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = signal.signal(signal.SIGINT, first)
    try:
        yield stopping
    finally:
        signal.signal(signal.SIGINT, previous)


def _family(exc: OcatError) -> str:
    """The error's documented type (a class of ocat.errors): a finer one made elsewhere, such as a
    Chroma server's refusal (a StoreError), is reported as the family a script matches on."""
    return next(cls.__name__ for cls in type(exc).__mro__ if cls.__module__ == OcatError.__module__)
