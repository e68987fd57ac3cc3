"""Plain data on the wire between the hidden tests and the candidate's code.

This folder is bound read-only at ``/opt/takehome`` inside every sandbox; its
modules run there, never in the worker. This one is imported on both sides of
the process boundary (``takehome_proxy`` in the trusted pytest process,
``takehome_proxy_server`` beside the candidate's code), and each side decodes
with its own copy, so what the candidate's side does to its copy changes only
what it sends.

One JSON document per line. Every JSON object on the wire is a tagged value,
so data can never be mistaken for a tag:

    None, bool, int, str, finite float   as themselves
    list                                 as a JSON array
    {"$dict": [[key, value], ...]}       dict (keys of any type below)
    {"$tuple": [...]}, {"$set": [...]}, {"$frozenset": [...]}
    {"$bytes": "<base64>"}, {"$path": "/abs/or/rel"}, {"$float": "nan"|"inf"|"-inf"}
    {"$decimal": "1.10"}, {"$datetime": "<iso>"}, {"$date": "<iso>"}

Nothing else crosses: no pickle, no object that could run code when read.
Standard library only; Python 3.8+.
"""

import base64
import datetime
import decimal
import json
import math
import pathlib

MAX_DEPTH = 64


class WireError(Exception):
    """A value that cannot cross the boundary, or a message that is not valid wire data."""


def encode(value, depth=0):
    """``value`` as JSON-ready wire data; raises WireError for anything else."""
    if depth > MAX_DEPTH:
        raise WireError("the value is nested more than %d levels deep" % MAX_DEPTH)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)  # why int(): an int subclass (an IntEnum) crosses as its number
    if isinstance(value, float):
        if math.isfinite(value):
            return float(value)
        return {"$float": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, list):
        return [encode(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, depth + 1) for v in value]}
    if isinstance(value, frozenset):
        return {"$frozenset": [encode(v, depth + 1) for v in value]}
    if isinstance(value, set):
        return {"$set": [encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"$dict": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, pathlib.PurePath):
        return {"$path": str(value)}
    if isinstance(value, decimal.Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, datetime.datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, datetime.date):
        return {"$date": value.isoformat()}
    raise WireError(
        "a %s cannot cross the sandbox boundary: only plain data can (numbers, strings, "
        "lists, dicts, tuples, sets, bytes, paths, decimals, dates)" % type(value).__name__
    )


def _hashable(value):
    try:
        hash(value)
    except TypeError:
        raise WireError("a %s cannot be a dict key or set member" % type(value).__name__) from None
    return value


_TAGS = {
    "$tuple": lambda v, d: tuple(decode(x, d) for x in _array(v)),
    "$set": lambda v, d: {_hashable(decode(x, d)) for x in _array(v)},
    "$frozenset": lambda v, d: frozenset(_hashable(decode(x, d)) for x in _array(v)),
    "$dict": lambda v, d: {_hashable(decode(_pair(p)[0], d)): decode(_pair(p)[1], d) for p in _array(v)},
    "$bytes": lambda v, d: base64.b64decode(_text(v).encode("ascii"), validate=True),
    "$path": lambda v, d: pathlib.Path(_text(v)),
    "$float": lambda v, d: {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[_text(v)],
    "$decimal": lambda v, d: decimal.Decimal(_text(v)),
    "$datetime": lambda v, d: datetime.datetime.fromisoformat(_text(v)),
    "$date": lambda v, d: datetime.date.fromisoformat(_text(v)),
}


def _array(v):
    if not isinstance(v, list):
        raise WireError("a tagged value holds no list")
    return v


def _pair(p):
    if not isinstance(p, list) or len(p) != 2:
        raise WireError("a dict entry is not a [key, value] pair")
    return p


def _text(v):
    if not isinstance(v, str):
        raise WireError("a tagged value holds no string")
    return v


def decode(data, depth=0):
    """Wire data back to a Python value; raises WireError on anything not made by ``encode``."""
    if depth > MAX_DEPTH:
        raise WireError("the value is nested more than %d levels deep" % MAX_DEPTH)
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(v, depth + 1) for v in data]
    if isinstance(data, dict) and len(data) == 1:
        ((tag, inner),) = data.items()
        if tag in _TAGS:
            try:
                return _TAGS[tag](inner, depth + 1)
            except WireError:
                raise
            except (ValueError, KeyError, TypeError, decimal.InvalidOperation) as exc:
                raise WireError("a malformed %s value: %s" % (tag, exc)) from None
    raise WireError("not wire data: %.80r" % (data,))


def dumps(message):
    """One message (a dict of JSON-ready values) as one line of bytes."""
    return (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")


def loads(line):
    """One received line as a dict; raises WireError when it is not one."""
    try:
        message = json.loads(line.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # why RecursionError: deeply nested JSON
        raise WireError("an unreadable message: %s" % exc) from None
    if not isinstance(message, dict):
        raise WireError("a message that is not a JSON object")
    return message
