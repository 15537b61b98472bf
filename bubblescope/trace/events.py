"""Typed decoding of trace events with msgspec: only the fields the tables read become Python objects.

msgspec skips every other member while it parses (cpu_op input shapes, call stacks, flow ids), which
made decoding 1.5-2x faster than orjson or json.loads and took 3-4x less memory on real traces
(commit message of this module). Values keep their JSON types (`Any`): a wrongly typed field is found
and named by the table builders, one event at a time, instead of failing the whole decode.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from bubblescope.errors import TraceError

_BYTE = re.compile(r"\(byte (\d+)\)")
_EVENT_PATH = re.compile(r"`\$\[(\d+)\]\.?([^`]*)`")
# A high surrogate escape not followed by a low one, or a low one not preceded by a high one.
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<!\\u[dD][89abAB]..)\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


class Args(msgspec.Struct, gc=False):
    """The `args` members the tables read; others are skipped by the decoder."""

    correlation: Any = None
    device: Any = None
    stream: Any = None
    bytes: Any = None
    # Kernels' launch grid [x, y, z]: tells apart launches of one kernel at different shapes (a GEMV's
    # rows), which is how bytes per launch are attached to the reference workload's kernels.
    grid: Any = None
    python_id: Any = msgspec.field(default=None, name="Python id")
    python_parent_id: Any = msgspec.field(default=None, name="Python parent id")


class Event(msgspec.Struct, gc=False):
    """One trace event: the members the tables read (missing ones are None)."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Args | None = None


_DECODER = msgspec.json.Decoder(list[Event])
_ANY_DECODER = msgspec.json.Decoder()


def parse_events(array_text: bytes) -> list[Event]:
    """Decode `[ {...}, ... ]`; msgspec's own exceptions pass through (see `event_error`)."""
    return _DECODER.decode(array_text)


def event_error(
    exc: BaseException, array_text: bytes, path: Path, first_index: int, offset: int
) -> TraceError:
    """The one-line TraceError for an exception of `parse_events`.

    Args:
        exc: what `parse_events(array_text)` raised.
        array_text: the text it was given.
        path: the file, for messages.
        first_index: index in the whole trace of the array's first event.
        offset: byte offset of `array_text[0]` in the file's text.
    """
    if isinstance(exc, msgspec.ValidationError):
        return TraceError(f"{path}: {_validation_message(str(exc), first_index)}")
    return TraceError(f"{path}: {invalid_json_message(exc, array_text, offset)}")


def decode_events(array_text: bytes, path: Path, first_index: int = 0, offset: int = 0) -> list[Event]:
    """`parse_events` with every failure as a one-line TraceError (see `event_error`)."""
    try:
        return _DECODER.decode(array_text)
    except (msgspec.MsgspecError, RecursionError) as exc:
        raise event_error(exc, array_text, path, first_index, offset) from None


def decode_value(text: bytes | memoryview, path: Path, offset: int = 0) -> Any:
    """Any JSON value (top-level metadata), with the same one-line errors."""
    try:
        return _ANY_DECODER.decode(text)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise TraceError(f"{path}: {invalid_json_message(exc, text, offset)}") from None


def invalid_json_message(exc: BaseException, text: bytes | memoryview, offset: int) -> str:
    """One line saying why `text` (starting at byte `offset` of the file's text) is not JSON."""
    if isinstance(exc, RecursionError):
        return "not valid JSON here (nested too deeply: more than ~1000 levels of arrays or objects)"
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "truncated" in message or "surrogate" in message:
        lone = _LONE_SURROGATE.search(bytes(text))
        if lone is not None:
            escape = lone.group().decode()
            return f"not valid JSON (a lone UTF-16 surrogate escape {escape} at byte {offset + lone.start()})"
    found = _BYTE.search(message)
    if found:
        message = _BYTE.sub(f"(at byte {offset + int(found.group(1))} of the text)", message)
    return f"not valid JSON ({message.replace('JSON is malformed: ', '')})"


def error_byte(exc: BaseException) -> int | None:
    """The byte position a msgspec DecodeError names, if any."""
    found = _BYTE.search(str(exc))
    return int(found.group(1)) if found else None


def _validation_message(message: str, first_index: int) -> str:
    first = message.splitlines()[0]
    found = _EVENT_PATH.search(first)
    if found is None:
        return f"unexpected event layout ({first})"
    index = first_index + int(found.group(1))
    detail = first.split(" - at ")[0]
    if found.group(2):
        return f"event #{index}: {found.group(2)!r} has the wrong type ({detail})"
    return f"event #{index} is not an object ({detail})"
