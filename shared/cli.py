"""Value types for argparse shared by the command lines (clear messages for bad values)."""

from __future__ import annotations

import argparse


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
