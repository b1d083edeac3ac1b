"""Value types for argparse shared by the command lines (clear messages for bad values)."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def port_or_zero(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, got {text}")
    return value


def port(text: str) -> int:
    value = port_or_zero(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be a port number from 1 to 65535")
    return value


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|m|s)")


def duration(text: str) -> timedelta:
    """A positive duration in Go's notation, as cert-manager's ``duration`` and ``renewBefore`` are written:
    ``8760h``, ``720h``, ``2m30s``, ``1.5h`` (units h, m, s)."""
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise argparse.ArgumentTypeError(f"must be a duration such as 8760h, 30m or 90s, got {text!r}")
    seconds = sum(float(number) * {"h": 3600, "m": 60, "s": 1}[unit] for number, unit in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive duration, got {text!r}")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """The Go notation of a duration: ``8760h``, ``2m30s``, ``90s`` (whole seconds)."""
    seconds = int(value.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{secs}s" if secs else "")
    return text or "0s"
