"""Kubernetes resource quantities, as k8s.io/apimachinery ``resource.Quantity`` parses, adds and prints them.

Only what the PodGroup ``minResources`` needs: parse (``100m``, ``2Gi``, ``1e3``, ``1.5``), add, multiply by
an integer, and the canonical string Go would send (``1.5`` -> ``1500m``, ``1.5Gi`` -> ``1536Mi``,
``1000`` -> ``1k``). Values are exact (an integer count of nano-units), as Go's are; a string that is
already in canonical shape is kept verbatim, as Go keeps it (``+5`` stays ``+5``).

Deliberate differences, on values no real job uses: a decimal exponent beyond 10^18 is printed with
the ``E`` suffix and a longer mantissa (Go's int64 fast path would print ``e21``), a binary value
beyond 2^70 keeps the ``Ei`` suffix, and exponents beyond +-10000 are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from math import ceil

NANO_PER_UNIT = 10**9
_MAX_INT64 = 2**63 - 1
_MAX_EXPONENT = 10_000
_MAX_INT64_DIGITS = 18  # Go's maxInt64Factors
_FORMAT_RE = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_SPLIT = re.compile(r"([+-]?)(\d*)(?:\.(\d*))?(.*)", re.DOTALL)
_SUFFIX_SHAPE = re.compile(r"[eEinumkKMGTP]*[-+]?\d*")
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {exponent: suffix for suffix, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_POWER = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


class Format(StrEnum):
    """How a quantity prints: the suffix family of the text it was parsed from."""

    DECIMAL_EXPONENT = "DecimalExponent"
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"


@dataclass(frozen=True)
class Quantity:
    """An exact quantity: ``nanos`` is the value times 10^9; ``text`` the verbatim canonical input, if any."""

    nanos: int
    format: Format
    text: str | None = None

    def __add__(self, other: Quantity) -> Quantity:
        """The sum; a zero left operand takes the right one's format (Go's ``Quantity.Add``)."""
        fmt = other.format if self.nanos == 0 else self.format
        return Quantity(self.nanos + other.nanos, fmt)

    def __mul__(self, factor: int) -> Quantity:
        """The product with an integer, same format (Go's ``Quantity.Mul``)."""
        return Quantity(self.nanos * factor, self.format)

    def __str__(self) -> str:
        return self.text if self.text is not None else canonical_text(self.nanos, self.format)


def parse_quantity(value: str | int | float) -> Quantity:
    """Parse a quantity as Go's ``resource.ParseQuantity`` does (JSON numbers are read as their text)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"not a quantity: {value!r}")
    text = value.strip() if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
    if text == "0":
        return Quantity(0, Format.DECIMAL_SI, "0")
    match = _SPLIT.fullmatch(text)
    if not text or match is None or not _SUFFIX_SHAPE.fullmatch(match[4]):
        raise QuantityError(f"quantities must match the regular expression {_FORMAT_RE!r}: {text!r}")
    sign, num, denom, suffix = match[1], match[2].lstrip("0") or "0", match[3] or "", match[4]
    base, exponent, fmt = _interpret_suffix(suffix, text)
    magnitude = Fraction(int(num + denom), 10 ** len(denom)) * Fraction(base) ** exponent
    nanos = ceil(magnitude * NANO_PER_UNIT)  # Go rounds a finer non-zero value up, away from zero
    if fmt is Format.BINARY_SI:
        nanos = min(nanos, _MAX_INT64 * NANO_PER_UNIT)  # Go caps binary quantities silently
        if 0 < nanos < NANO_PER_UNIT:
            fmt = Format.DECIMAL_SI
    cached = text if _is_kept_verbatim(num, denom, base, exponent, fmt) else None
    return Quantity(-nanos if sign == "-" else nanos, fmt, cached)


def canonical(value: str | int | float) -> str:
    """The string Go would send for ``value``: ``canonical("1.5")`` is ``"1500m"``."""
    return str(parse_quantity(value))


def _interpret_suffix(suffix: str, text: str) -> tuple[int, int, Format]:
    """(base, exponent, format) of a suffix, as Go's ``suffixHandler.interpret``."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[+-]?\d+", suffix[1:]):
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"quantity exponent out of range: {text!r}")
        return 10, exponent, Format.DECIMAL_EXPONENT
    raise QuantityError(f"unable to parse quantity's suffix: {text!r}")


def _is_kept_verbatim(num: str, denom: str, base: int, exponent: int, fmt: Format) -> bool:
    """Whether Go's fast path parses the text and remembers it as its own canonical string."""
    shifted = num + denom
    if fmt is Format.BINARY_SI:
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1 if not denom else -1
        scale = 0
    else:
        precision = _MAX_INT64_DIGITS - len(shifted)
        scale = exponent - len(denom)
    if precision < 0 or scale < -9 or int(shifted) > _MAX_INT64:
        return False
    if int(shifted) * (base**exponent if fmt is Format.BINARY_SI else 1) > _MAX_INT64:
        return False
    if fmt is Format.BINARY_SI:
        return int(shifted) & 0x07 != 0
    return scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"


def canonical_text(nanos: int, fmt: Format) -> str:
    """Go's ``Quantity.String()`` for a value: largest suffix, no fraction, no lost precision."""
    if nanos == 0:
        return "0"
    if fmt is Format.BINARY_SI and (abs(nanos) < 1024 * NANO_PER_UNIT or nanos % NANO_PER_UNIT):
        fmt = Format.DECIMAL_SI  # small or fractional binary values print as decimal
    if fmt is Format.BINARY_SI:
        return _binary_text(nanos // NANO_PER_UNIT)
    return _decimal_text(nanos, fmt)


def _decimal_text(nanos: int, fmt: Format) -> str:
    mantissa, exponent = abs(nanos), -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if fmt is Format.DECIMAL_SI and exponent > 18:
        mantissa *= 10 ** (exponent - 18)
        exponent = 18
    exponent_suffix = f"e{exponent}" if exponent else ""
    suffix = _DECIMAL_BY_EXPONENT[exponent] if fmt is Format.DECIMAL_SI else exponent_suffix
    return f"{'-' if nanos < 0 else ''}{mantissa}{suffix}"


def _binary_text(units: int) -> str:
    mantissa, power = abs(units), 0
    while mantissa >= 1024 and mantissa % 1024 == 0 and power < len(_BINARY_BY_POWER) - 1:
        mantissa //= 1024
        power += 1
    return f"{'-' if units < 0 else ''}{mantissa}{_BINARY_BY_POWER[power]}"
