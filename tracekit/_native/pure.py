"""Pure-Python stand-in for the C scanner (``kineto_scan.c``): the same ``scan`` and ``nest``
contract, used when the extension could not be built or loaded (no compiler at install time).

It gives the same columns as the C scanner, byte for byte (a test checks this on every shared
Kineto trace), at a fraction of its speed: the stdlib ``json`` parser with hooks that keep number
text exactly as written (timestamps are exact decimals) and keep duplicate keys in file order.
The one difference is error text: messages come from ``json`` and name the byte where it stopped.
"""

from __future__ import annotations

import decimal
import json
import re
from typing import Any

import numpy as np

MISSING64 = -(1 << 63)
MISSING32 = -(1 << 31)
INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1
_PLAIN_INT = re.compile(r"-?[0-9]+\Z")
# Keys of "args" that become integer columns (the C scanner's promoted keys).
_ARGS_I64 = {"External id": "external_id", "external id": "external_id", "correlation": "correlation",
             "stream": "stream", "bytes": "bytes", "Bytes": "bytes", "shared memory": "shared_memory"}
_ARGS_I32 = {"device": "device", "registers per thread": "registers_per_thread"}
_ARGS_TRIPLE = {"grid": ("grid_x", "grid_y", "grid_z"), "block": ("block_x", "block_y", "block_z")}
I64_COLUMNS = ("external_id", "correlation", "stream", "flow_id", "bytes", "shared_memory")
I32_COLUMNS = ("device", "registers_per_thread", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
_EXACT = decimal.Context(prec=120, rounding=decimal.ROUND_HALF_UP)


class _Num:
    """A JSON number as written (so "1.50" stays "1.50" and big timestamps keep every digit)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class _Pairs(list):
    """A JSON object as its (key, value) pairs, in file order, duplicates kept."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid literal {name}")


_DECODER = json.JSONDecoder(object_pairs_hook=_Pairs, parse_float=_Num, parse_int=_Num,
                            parse_constant=_reject_constant)


def _plain_int(v: Any, lo: int = MISSING64 + 1, hi: int = INT64_MAX) -> int | None:
    """The value as an integer when it is a JSON integer within [lo, hi], else None."""
    if isinstance(v, _Num) and _PLAIN_INT.match(v.text):
        x = int(v.text)
        if lo <= x <= hi:
            return x
    return None


def _scaled_ns(text: str) -> int:
    """Decimal µs text -> integer ns, rounded half away from zero, exactly (as the C scanner)."""
    try:
        q = _EXACT.to_integral_value(_EXACT.scaleb(decimal.Decimal(text), 3))
    except (ArithmeticError, ValueError):
        raise ValueError("timestamp out of range") from None
    if not MISSING64 < q <= INT64_MAX:
        raise ValueError("timestamp out of range")
    return int(q)


def _dump(v: Any) -> str:
    """Minified JSON text of a parsed value, numbers as written."""
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, _Num):
        return v.text
    if isinstance(v, _Pairs):
        return "{" + ",".join(_dump(k) + ":" + _dump(x) for k, x in v) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_dump(x) for x in v) + "]"
    return "true" if v is True else "false" if v is False else "null"


def _plain(v: Any) -> Any:
    """A parsed value as ordinary Python objects (header values)."""
    if isinstance(v, _Num):
        return int(v.text) if _PLAIN_INT.match(v.text) else float(v.text)
    if isinstance(v, _Pairs):
        return {k: _plain(x) for k, x in v}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


class _Interner:
    def __init__(self) -> None:
        self.codes: dict[str, int] = {}

    def code(self, text: str) -> int:
        c = self.codes.get(text)
        if c is None:
            c = self.codes[text] = len(self.codes)
        return c

    def values(self) -> list[str]:
        return list(self.codes)


class _Columns:
    def __init__(self) -> None:
        self.ph: list[int] = []
        self.ts: list[int] = []
        self.dur: list[int] = []
        self.codes: dict[str, list[int]] = {k: [] for k in ("cat", "name", "pid", "tid")}
        self.interners = {k: _Interner() for k in ("cat", "name", "pid", "tid")}
        self.i64: dict[str, list[int]] = {k: [] for k in I64_COLUMNS}
        self.i32: dict[str, list[int]] = {k: [] for k in I32_COLUMNS}
        self.args_offsets = [0]
        self.args = bytearray()

    def add(self, event: Any) -> None:
        if not isinstance(event, _Pairs):
            raise ValueError("a traceEvents element is not an object")
        ph = 0
        fields = {"cat": -1, "name": -1, "pid": -1, "tid": -1}
        ts = dur = MISSING64
        v64 = dict.fromkeys(I64_COLUMNS, MISSING64)
        v32 = dict.fromkeys(I32_COLUMNS, MISSING32)
        args_text: list[str] = []
        extra: list[str] = []
        has_args = False
        for key, v in event:
            at_key = '"@' + json.dumps(key, ensure_ascii=False)[1:] + ":"
            if key == "ph" and isinstance(v, str) and ph == 0:
                raw = v.encode("utf-8", "surrogatepass")
                if len(raw) == 1:
                    ph = raw[0]
                else:
                    extra.append('"@ph":' + json.dumps(v, ensure_ascii=False))
            elif key in fields and fields[key] < 0:
                if isinstance(v, str):
                    fields[key] = self.interners[key].code(v)
                elif isinstance(v, _Num):
                    fields[key] = self.interners[key].code(v.text)
                else:
                    extra.append(at_key + _dump(v))
            elif (key == "ts" and ts == MISSING64) or (key == "dur" and dur == MISSING64):
                if isinstance(v, _Num):
                    if key == "ts":
                        ts = _scaled_ns(v.text)
                    else:
                        dur = _scaled_ns(v.text)
                else:
                    extra.append(at_key + _dump(v))
            elif key == "id" and v64["flow_id"] == MISSING64 and (flow := _plain_int(v)) is not None:
                v64["flow_id"] = flow
            elif key == "args" and not has_args:
                has_args = True
                self._args(v, args_text, v64, v32)
            else:
                extra.append(at_key + _dump(v))
        self.ph.append(ph)
        self.ts.append(ts)
        self.dur.append(dur)
        for k, c in fields.items():
            self.codes[k].append(c)
        for k in I64_COLUMNS:
            self.i64[k].append(v64[k])
        for k in I32_COLUMNS:
            self.i32[k].append(v32[k])
        if args_text or extra:
            self.args += ("{" + ",".join(args_text + extra) + "}").encode("utf-8")
        self.args_offsets.append(len(self.args))

    @staticmethod
    def _args(v: Any, out: list[str], v64: dict[str, int], v32: dict[str, int]) -> None:
        if not isinstance(v, _Pairs):
            out.append('"@args":' + _dump(v))
            return
        for key, x in v:
            consumed = False
            if key in _ARGS_I64 and v64[_ARGS_I64[key]] == MISSING64:
                n = _plain_int(x)
                if n is not None:
                    v64[_ARGS_I64[key]] = n
                    consumed = True
            elif key in _ARGS_I32 and v32[_ARGS_I32[key]] == MISSING32:
                n = _plain_int(x, MISSING32 + 1, INT32_MAX)
                if n is not None:
                    v32[_ARGS_I32[key]] = n
                    consumed = True
            elif key in _ARGS_TRIPLE and v32[_ARGS_TRIPLE[key][0]] == MISSING32:
                if isinstance(x, list) and not isinstance(x, _Pairs) and len(x) == 3:
                    triple = [_plain_int(e, MISSING32 + 1, INT32_MAX) for e in x]
                    if None not in triple:
                        for col, n in zip(_ARGS_TRIPLE[key], triple, strict=True):
                            v32[col] = n  # type: ignore[assignment]
                        consumed = True
            if not consumed:
                out.append(_dump(key) + ":" + _dump(x))

    def result(self, header: list[tuple[str, Any]], found: bool) -> dict[str, Any]:
        r: dict[str, Any] = {"n": len(self.ph), "found_events": found, "header": [], "header_items": header}
        for k in ("cat", "name", "pid", "tid"):
            r[f"{k}_values"] = self.interners[k].values()
            r[k] = np.array(self.codes[k], np.int32).tobytes()
        r["ph"] = bytes(self.ph)
        r["ts"] = np.array(self.ts, np.int64).tobytes()
        r["dur"] = np.array(self.dur, np.int64).tobytes()
        r["args_offsets"] = np.array(self.args_offsets, np.int64).tobytes()
        r["args_data"] = bytes(self.args)
        for k in I64_COLUMNS:
            r[k] = np.array(self.i64[k], np.int64).tobytes()
        for k in I32_COLUMNS:
            r[k] = np.array(self.i32[k], np.int32).tobytes()
        return r


def _decode_error(text: str, e: json.JSONDecodeError) -> ValueError:
    at = len(text[:e.pos].encode("utf-8", "surrogatepass"))
    if e.msg == "Extra data":
        problem = "extra data after the JSON document"
    elif e.msg.startswith("Unterminated string"):
        problem = "unexpected end of file inside a string (truncated JSON)"
    elif e.pos >= len(text.rstrip()):
        problem = "unexpected end of file (truncated JSON)"
    else:
        problem = e.msg[0].lower() + e.msg[1:]
    return ValueError(f"{problem} at byte {at}")


def scan(buf: Any, release: Any = False, threads: int = 1, min_part_bytes: int = 0) -> dict[str, Any]:
    """Columns of a Kineto JSON document; see ``kineto_scan.c`` for the returned keys. ``threads``
    and ``min_part_bytes`` are accepted for the C scanner's signature and ignored.

    Differs from the C scanner in one key: ``header_items`` holds the other top-level keys as
    decoded (key, value) pairs, and ``header`` (byte spans) is empty.
    """
    try:
        text = bytes(buf).decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"invalid UTF-8 at byte {e.start}") from None
    start = len(text) - len(text.lstrip(" \t\r\n"))
    if start == len(text):
        raise ValueError("the file is empty at byte 0")
    if text[start] not in "{[":
        raise ValueError(f"not JSON: the first character is not '{{' or '[' at byte {start}")
    try:
        doc = _DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise _decode_error(text, e) from None
    del text
    cols = _Columns()
    header: list[tuple[str, Any]] = []
    found = False
    if isinstance(doc, _Pairs):
        for key, v in doc:
            if key == "traceEvents" and not found and isinstance(v, list) and not isinstance(v, _Pairs):
                found = True
                for event in v:
                    cols.add(event)
            else:
                header.append((key, _plain(v)))
    else:
        found = True
        for event in doc:
            cols.add(event)
    try:
        r = cols.result(header, found)
        for k in ("cat", "name", "pid", "tid"):
            for value in r[f"{k}_values"]:
                value.encode("utf-8")
        r["args_data"].decode("utf-8")
    except UnicodeError:
        raise ValueError("unpaired surrogate in \\u escape") from None
    return r


def nest(group: Any, start: Any, end: Any, order: Any) -> tuple[bytes, bytes]:
    """Parent row and depth by time containment; the C ``nest``'s contract (see kineto_scan.c)."""
    g = np.frombuffer(group, np.int64)
    s = np.frombuffer(start, np.int64)
    e = np.frombuffer(end, np.int64)
    o = np.frombuffer(order, np.int64)
    n, m = g.size, o.size
    if s.size != n or e.size != n or m > n:
        raise ValueError("nest: arrays differ in length")
    if m and (o.min() < 0 or o.max() >= n):
        raise ValueError("nest: bad order")
    parent = np.full(n, -1, np.int64)
    depth = np.zeros(n, np.int16)
    ends = np.where(e < s, s, e)
    groups, starts, stops = g[o].tolist(), s[o].tolist(), ends[o].tolist()
    rows = o.tolist()
    par = [-1] * m
    dep = [0] * m
    stack: list[int] = []  # positions k in the order
    current = None
    for k in range(m):
        if groups[k] != current:
            stack.clear()
            current = groups[k]
        a, b = starts[k], stops[k]
        while stack:
            q = stack[-1]
            qa, qb = starts[q], stops[q]
            if a >= qa and b <= qb and not (a == qb and qb > qa):
                break
            stack.pop()
        if stack:
            par[k] = rows[stack[-1]]
            dep[k] = min(len(stack), 32767)
        stack.append(k)
    parent[o] = par
    depth[o] = dep
    return parent.tobytes(), depth.tobytes()
