"""Kubernetes resource quantities with exact arithmetic.

A quantity is written as Kubernetes writes it: a signed decimal number, optionally with an exponent
(``1e3``, ``1E-3``), followed by a decimal SI suffix (``n u m "" k M G T P E``) or a binary suffix
(``Ki Mi Gi Ti Pi Ei``). Values are held as :class:`fractions.Fraction`, so ``1000000000Gi`` and
``100m`` add and compare exactly. :meth:`Quantity.canonical` renders a value the way the API server
canonicalises it (the suffix family of the input is kept, the largest exact suffix is chosen).
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from functools import total_ordering
from typing import Final

from flexq.errors import FlexqError

__all__ = ["Quantity", "QuantityError", "parse_quantity"]

_DECIMAL: Final[dict[str, Fraction]] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_BINARY: Final[dict[str, Fraction]] = {
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_PATTERN: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE](?P<exp>[+-]?\d+))?$"
)
_MAX_EXPONENT: Final = 30


class QuantityError(FlexqError, ValueError):
    """A string or number is not a valid Kubernetes quantity."""

    def __init__(self, text: str, reason: str = "") -> None:
        self.text = text
        self.reason = reason
        super().__init__(f'invalid quantity "{text}"' + (f": {reason}" if reason else ""))


@total_ordering
class Quantity:
    """An exact resource amount. Immutable; hashable; ordered by value."""

    __slots__ = ("_binary", "_value")

    def __init__(self, value: Fraction | int, *, binary: bool = False) -> None:
        self._value = Fraction(value)
        self._binary = binary

    @property
    def value(self) -> Fraction:
        return self._value

    @property
    def is_binary(self) -> bool:
        return self._binary

    @classmethod
    def parse(cls, raw: str | int | float) -> Quantity:
        return parse_quantity(raw)

    def milli(self) -> int:
        """The value in thousandths, rounded up as the API server rounds (``0.0001`` -> ``1m``)."""
        scaled = self._value * 1000
        return -((-scaled.numerator) // scaled.denominator)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self._value + other._value, binary=self._binary or other._binary)

    def __sub__(self, other: Quantity) -> Quantity:
        return Quantity(self._value - other._value, binary=self._binary or other._binary)

    def __mul__(self, factor: int) -> Quantity:
        return Quantity(self._value * factor, binary=self._binary)

    __rmul__ = __mul__

    def __neg__(self) -> Quantity:
        return Quantity(-self._value, binary=self._binary)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self._value == other._value
        if isinstance(other, int | Fraction):
            return self._value == other
        return NotImplemented

    def __lt__(self, other: Quantity | int) -> bool:
        if isinstance(other, Quantity):
            return self._value < other._value
        return self._value < other

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return self._value != 0

    def __repr__(self) -> str:
        return f"Quantity({self.canonical()!r})"

    def __str__(self) -> str:
        return self.canonical()

    def canonical(self) -> str:
        """Render as the API server would: integer digits with the largest exact suffix."""
        v = self._value
        if v == 0:
            return "0"
        sign = "-" if v < 0 else ""
        v = abs(v)
        if self._binary and v.denominator == 1:
            for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
                scaled = v / _BINARY[suffix]
                if scaled.denominator == 1:
                    return f"{sign}{scaled.numerator}{suffix}"
            return f"{sign}{v.numerator}"
        for suffix in ("E", "P", "T", "G", "M", "k", "", "m", "u", "n"):
            scaled = v / _DECIMAL[suffix]
            exact = scaled.denominator == 1
            if exact and (suffix in ("", "m", "u", "n") or scaled.numerator % 1000 != 0):
                return f"{sign}{scaled.numerator}{suffix}"
        # Finer than a nano: round up to nanos, as Kubernetes does.
        nanos = -((-v.numerator * 10**9) // v.denominator)
        return f"{sign}{nanos}n"

    def to_json(self) -> str | int:
        """The form a quantity takes in an object: an integer stays an integer string."""
        return self.canonical()


def parse_quantity(raw: str | int | float) -> Quantity:
    """Parse ``raw`` into a :class:`Quantity`; raise :class:`QuantityError` naming the text."""
    if isinstance(raw, bool):
        raise QuantityError(str(raw).lower(), "a quantity is a number, not a boolean")
    if isinstance(raw, int):
        return Quantity(raw)
    if isinstance(raw, float):
        if raw != raw or raw in (float("inf"), float("-inf")):
            raise QuantityError(str(raw))
        return Quantity(Fraction(str(raw)))
    if not isinstance(raw, str):
        raise QuantityError(repr(raw), "expected a string or a number")
    return _parse_text(raw)


@functools.lru_cache(maxsize=4096)
def _parse_text(raw: str) -> Quantity:
    """Parse a quantity's text (cached: quantities are immutable and manifests repeat the same few)."""
    text = raw.strip()
    match = _PATTERN.match(text)
    if match is None:
        raise QuantityError(raw)
    number = Fraction(match["num"])
    binary = False
    if match["suffix"] is not None:
        suffix = match["suffix"]
        if suffix in _BINARY:
            number *= _BINARY[suffix]
            binary = True
        else:
            number *= _DECIMAL[suffix]
    elif match["exp"] is not None:
        exponent = int(match["exp"])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(raw, "exponent out of range")
        number *= Fraction(10) ** exponent
    if match["sign"] == "-":
        number = -number
    return Quantity(number, binary=binary)
