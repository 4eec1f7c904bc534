from fractions import Fraction

import pytest

from flexq.api.quantity import Quantity, QuantityError, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("100m", Fraction(1, 10)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("2", 2),
        (16, 16),
        (1.5, Fraction(3, 2)),
        ("20Gi", 20 * 2**30),
        ("75Gi", 75 * 2**30),
        ("1000000000Gi", 10**9 * 2**30),
        ("1000000000", 10**9),
        ("1k", 1000),
        ("1M", 10**6),
        ("4Ki", 4096),
        ("1e3", 1000),
        ("1E-3", Fraction(1, 1000)),
        ("5n", Fraction(5, 10**9)),
        ("+3", 3),
        ("-3", -3),
    ],
)
def test_parse(text: str | int | float, value: Fraction | int) -> None:
    assert parse_quantity(text).value == value


@pytest.mark.parametrize("text", ["lots", "", "1.2.3", "10GB", "Gi", "1e", "1 Gi", "0x10", "1e99", "inf"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert text in str(info.value)


def test_rejects_booleans() -> None:
    with pytest.raises(QuantityError):
        parse_quantity(True)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("100m", "100m"), ("0.1", "100m"), ("1000m", "1"), ("20Gi", "20Gi"), ("1024Mi", "1Gi"),
     ("1500", "1500"), ("2000", "2k"), ("0", "0"), ("1000000000Gi", "1000000000Gi"), ("1.5Gi", "1536Mi")],
)
def test_canonical(text: str, canonical: str) -> None:
    assert parse_quantity(text).canonical() == canonical


def test_exact_arithmetic_and_order() -> None:
    total = parse_quantity("100m") + parse_quantity("900m")
    assert total == Quantity(1)
    assert parse_quantity("1Gi") > parse_quantity("1G")
    assert parse_quantity("16") - parse_quantity("4") * 4 == Quantity(0)
    assert parse_quantity("1000000000Gi") + parse_quantity("1") > parse_quantity("1000000000Gi")
    assert parse_quantity("1m").milli() == 1
    assert parse_quantity("1n").milli() == 1  # rounded up, as the API server does
