"""Resource quantities: parsing and the canonical text of apimachinery's ``resource.Quantity``."""

from __future__ import annotations

import pytest

from reconciler.mpijob.builders.quantity import Format, Quantity, QuantityError, canonical, parse_quantity


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("100m", "100m", id="milli"),
    pytest.param("2Gi", "2Gi", id="binary"),
    pytest.param("512Mi", "512Mi", id="mebi"),
    pytest.param("1e3", "1e3", id="decimal exponent kept"),
    pytest.param("12e6", "12e6", id="decimal exponent, mantissa 12"),
    pytest.param("1.5e3", "1500", id="decimal exponent made integral"),
    pytest.param("1e-3", "1e-3", id="negative exponent"),
    pytest.param("1.5", "1500m", id="fraction as milli"),
    pytest.param("0.1", "100m", id="tenth"),
    pytest.param("-1.5", "-1500m", id="negative"),
    pytest.param("1.5Gi", "1536Mi", id="fractional binary steps down"),
    pytest.param("0.5Ki", "512", id="binary below 1Ki prints decimal"),
    pytest.param("1.1Ki", "1126400m", id="non-integral binary prints decimal"),
    pytest.param("0.0001Ki", "102400u", id="tiny binary"),
    pytest.param("1000", "1k", id="trailing zeros become a suffix"),
    pytest.param("100000", "100k", id="100000"),
    pytest.param("1000M", "1G", id="suffix grows"),
    pytest.param("1024", "1024", id="decimal stays decimal"),
    pytest.param("100000Gi", "100000Gi", id="large binary"),
    pytest.param("1n", "1n", id="nano"),
    pytest.param("0.1n", "1n", id="below nano rounds up"),
    pytest.param("0", "0", id="zero"),
    pytest.param("0Ki", "0", id="binary zero"),
    pytest.param("+5", "+5", id="canonical-looking text is kept verbatim, like Go"),
    pytest.param("8Ei", "9223372036854775807", id="binary capped at 2^63-1"),
    pytest.param(" 2 ", "2", id="surrounding spaces"),
    pytest.param(2, "2", id="JSON integer"),
    pytest.param(0.5, "500m", id="JSON float"),
    pytest.param(1e20, "100e18", id="JSON float with exponent"),
])
def test_canonical(text: str | int | float, expected: str) -> None:
    assert canonical(text) == expected


@pytest.mark.parametrize("text", [
    pytest.param("", id="empty"),
    pytest.param("abc", id="letters"),
    pytest.param("1.5.5", id="two dots"),
    pytest.param("1e", id="bare e"),
    pytest.param("1Kb", id="unknown suffix"),
    pytest.param("1e99999", id="exponent out of range"),
    pytest.param(True, id="boolean"),
])
def test_parse_errors(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


def q(text: str) -> Quantity:
    return parse_quantity(text)


@pytest.mark.parametrize(("quantity", "expected"), [
    pytest.param(q("1") + q("10") * 2, "21", id="cpu 21"),
    pytest.param(q("2Gi") + q("20Gi") * 2, "42Gi", id="memory 42Gi"),
    pytest.param(q("2") + q("10") * 2 + q("50") * 2, "122", id="cpu 122"),
    pytest.param(q("1Gi") + q("32Gi") * 2 + q("512Gi") * 2, "1089Gi", id="memory 1089Gi"),
    pytest.param(q("1Gi") + q("32Gi") * 2, "65Gi", id="memory 65Gi"),
    pytest.param(q("500m") * 2, "1", id="milli sum to a whole"),
    pytest.param(q("512Mi") * 2, "1Gi", id="binary sum steps up"),
    pytest.param(q("0") + q("1Gi"), "1Gi", id="zero takes the other format"),
    pytest.param(q("1Gi") + q("1G"), "2073741824", id="mixed: left format, not exact in binary units"),
    pytest.param(q("1G") + q("1Gi"), "2073741824", id="mixed: decimal"),
    pytest.param(q("1Gi") * 0, "0", id="times zero"),
    pytest.param(q("+5") * 1, "5", id="arithmetic drops the verbatim text"),
])
def test_arithmetic(quantity: Quantity, expected: str) -> None:
    assert str(quantity) == expected


def test_values_are_exact() -> None:
    assert q("1.5") == Quantity(1_500_000_000, Format.DECIMAL_SI)
    assert q("1Ki").nanos == 1024 * 10**9
    assert q("1Ki").format is Format.BINARY_SI
    assert q("1e3").format is Format.DECIMAL_EXPONENT
    assert q("0.0001Ki").format is Format.DECIMAL_SI  # Go switches a binary value below 1 to decimal
