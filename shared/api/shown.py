"""A client's value as a message or a log line shows it: never verbatim when it could be large or secret (a key,
a token, megabytes)."""

from __future__ import annotations

import re

_IDENTIFIER = re.compile(r"[A-Za-z0-9][A-Za-z0-9./-]{0,62}").fullmatch
_KINDS = {dict: "an object", list: "an array", bool: "a boolean", int: "a number", float: "a number"}


def identifier(value: object) -> str:
    """A client's apiVersion or kind for a message: quoted when it looks like one, else described by its JSON type
    (and a string by its length)."""
    if value is None or (isinstance(value, str) and _IDENTIFIER(value)):
        return repr(value)
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    return _KINDS.get(type(value), "a value")


def field_value(value: object) -> object:
    """A field error's value: a short string, a number, a boolean or null as it is; a long string (an annotation may
    hold 256 KiB) described by its length, anything else by its Python type."""
    if isinstance(value, str) and len(value) > 80:
        return f"<{len(value)} characters>"
    return value if isinstance(value, str | int | bool) or value is None else f"<{type(value).__name__}>"
