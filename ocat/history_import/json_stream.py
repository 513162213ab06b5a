"""Reading the items of a top-level JSON array one at a time, in bounded memory.

Chat exports are one JSON array of 100-300 MB; loading it whole would hold the text and every
decoded object at once. This reads the stream in chunks, decodes one item at a time with
`json.JSONDecoder.raw_decode` and drops the text it has decoded. Only the stdlib is used.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import Any, Protocol

from ocat.errors import InputFileError

CHUNK_SIZE = 1 << 20
"""How much to read at a time (bytes, or characters from a text stream)."""

# JSON's whitespace; anything else is the start of the next token.
_TOKEN = re.compile(r"[^ \t\n\r]")
# What may follow a decoded number up to the end of the buffer when the number is cut short.
_NUMBER_TAIL = re.compile(r"[0-9.eE+-]*\Z")
# A decoding error this close to the end of the buffer may only mean the text goes on in the
# next chunk (a cut "\u12" escape, "tru", a number): read more before calling it an error.
_NEAR_END = 16


# Outside a string, what changes a skipped value's depth or starts a string; inside one, what ends it.
_STRUCTURE = re.compile(r'["\[\]{}]')
_STRING_END = re.compile(r'["\\]')


class TooDeep:
    """An item of the array nested deeper than Python's decoder goes: skipped, read past without
    recursion, and named (it stands for the item in what `iter_array` yields)."""

    def __init__(self, number: int, noun: str) -> None:
        self.number = number
        self.problem = f"{noun} {number} is nested too deeply to read (thousands of levels)"


class Readable(Protocol):
    """A stream of bytes (decoded here as UTF-8) or of text: an open file, a zip member."""

    def read(self, size: int = -1, /) -> bytes | str:
        """Up to `size` bytes or characters; empty at the end."""
        ...


class _Text:
    """The stream as text, decoded strictly as UTF-8, with the byte offset of a bad byte."""

    def __init__(self, stream: Readable, name: str) -> None:
        self.stream = stream
        self.name = name
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.bytes_read = 0

    def read(self, size: int) -> str:
        """Up to `size` more units of text; "" at the end of the stream."""
        while True:
            data = self.stream.read(size)
            if isinstance(data, str):
                return data
            # Bytes held back from the last chunk (a cut multi-byte character) come first.
            start = self.bytes_read - len(self.decoder.getstate()[0])
            self.bytes_read += len(data)
            try:
                decoded = self.decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                raise self._undecodable(exc, start) from None
            # A chunk holding only part of a character decodes to nothing: that is not the end.
            if decoded or not data:
                return decoded

    def _undecodable(self, exc: UnicodeDecodeError, start: int) -> InputFileError:
        offset = start + exc.start
        if exc.end == len(exc.object) and exc.reason == "unexpected end of data":
            return InputFileError(
                f"{self.name} ends in the middle of a character at byte {offset}: the file is truncated"
            )
        return InputFileError(
            f"{self.name} is not UTF-8 text: byte {offset} (0x{exc.object[exc.start]:02x}) cannot be decoded; "
            "exports are UTF-8"
        )


class _ArrayReader:
    """Walks a JSON array's tokens over a buffer that is refilled and compacted as it is read."""

    def __init__(self, stream: Readable, name: str, noun: str, chunk_size: int) -> None:
        self.source = _Text(stream, name)
        self.name = name
        self.noun = noun
        self.chunk_size = chunk_size
        self.decoder = json.JSONDecoder(strict=False)
        self.text = ""
        self.pos = 0
        self.dropped = 0  # characters dropped from the front of the buffer so far
        self.ended = False

    def fill(self, at_least: int = 0) -> bool:
        """Read more; False at the end of the stream. Reading at least as much as the buffer
        already holds of an unfinished item doubles the buffer, so an item larger than a chunk
        is re-decoded a logarithmic number of times, not once per chunk."""
        if self.ended:
            return False
        chunk = self.source.read(max(self.chunk_size, at_least))
        if not chunk:
            self.ended = True
            return False
        # Compact on refill, not after every item: one copy per chunk instead of one per item.
        self.dropped += self.pos
        self.text = self.text[self.pos :] + chunk
        self.pos = 0
        return True

    def next_token(self) -> str | None:
        """The next non-whitespace character (the buffer positioned on it), or None at the end."""
        while True:
            found = _TOKEN.search(self.text, self.pos)
            if found:
                self.pos = found.start()
                return self.text[self.pos]
            self.pos = len(self.text)
            if not self.fill():
                return None

    def value(self, number: int) -> Any:
        """Decode the item starting at the buffer position (the `number`th of the array); an
        item nested too deeply for the decoder is read past and stands as a TooDeep."""
        while True:
            try:
                item, end = self.decoder.raw_decode(self.text, self.pos)
            except RecursionError:
                self.skip(number)
                return TooDeep(number, self.noun)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(self.text) - _NEAR_END
                if cut and self.fill(len(self.text) - self.pos):
                    continue
                if cut:
                    raise self.truncated(number) from None
                where = self.dropped + exc.pos + 1
                raise InputFileError(
                    f"{self.name}: {self.noun} {number} is not valid JSON ({exc.msg} at character {where})"
                ) from None
            # A number cut by the end of the buffer ("12", "0.", "1e-") may go on in the next chunk.
            if isinstance(item, (int, float)) and _NUMBER_TAIL.match(self.text, end) and self.fill():
                continue
            self.pos = end
            return item

    def skip(self, number: int) -> None:
        """Move past the container starting at the buffer position without decoding it (a loop,
        not recursion: any depth), reading more as needed."""
        depth, at, in_string = 0, self.pos, False
        while True:
            pattern = _STRING_END if in_string else _STRUCTURE
            found = pattern.search(self.text, at)
            # A backslash ending the buffer escapes what the next chunk starts with: read it first.
            if found is None or (in_string and found.group() == "\\" and found.end() >= len(self.text)):
                # What was scanned is never decoded: the refill drops it (the buffer stays a chunk).
                self.pos, at = (found.start() if found is not None else len(self.text)), 0
                if not self.fill():
                    raise self.truncated(number)
                continue
            mark, at = found.group(), found.end()
            if in_string:
                if mark == "\\":
                    at += 1  # whatever is escaped (a quote, a backslash) is part of the string
                else:
                    in_string = False
            elif mark == '"':
                in_string = True
            elif mark in "[{":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    self.pos = at
                    return

    def truncated(self, number: int) -> InputFileError:
        """The error for a stream that stops inside the `number`th item."""
        return InputFileError(
            f"{self.name} ends in the middle of {self.noun} {number}: the file is truncated "
            f"(the {number - 1} before it were read)"
        )


def iter_array(
    stream: Readable, name: str, noun: str = "item", chunk_size: int = CHUNK_SIZE
) -> Iterator[Any]:
    """Yield the items of the JSON array that `stream` holds, one at a time, in bounded memory.

    `name` (the file) and `noun` ("conversation") word the errors. A byte stream is decoded as
    UTF-8; a bad byte raises InputFileError with its offset. A stream that is not an array, or
    not valid JSON, raises InputFileError; a truncated one yields every complete item first.
    """
    reader = _ArrayReader(stream, name, noun, chunk_size)
    token = reader.next_token()
    if token == "\ufeff":  # a byte order mark some editors write
        reader.pos += 1
        token = reader.next_token()
    if token is None:
        raise InputFileError(f"{name} is empty")
    if token != "[":
        raise InputFileError(f"{name} is not a JSON list of {noun}s (it starts with {token!r})")
    reader.pos += 1
    token = reader.next_token()
    if token == "]":
        return
    number = 1
    while True:
        if token is None:
            raise reader.truncated(number)
        yield reader.value(number)
        token = reader.next_token()
        if token == "]":
            return
        if token is None:
            raise InputFileError(
                f"{name} ends after {noun} {number}, before the list is closed: the file is truncated"
            )
        if token != ",":
            where = reader.dropped + reader.pos + 1
            raise InputFileError(
                f"{name}: expected ',' or ']' after {noun} {number}, found {token!r} at character {where}"
            )
        reader.pos += 1
        number += 1
        token = reader.next_token()
