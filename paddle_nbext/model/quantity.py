"""Exact Kubernetes resource quantities (`500m`, `2`, `1.5`, `4Gi`, `1G`, `1e3`).

Resource totals shown to users ("4 trainers x 2 CPU = 8 CPU, 16Gi") and limits checks must be
exact, so quantities are held as `fractions.Fraction` of the base unit (cores or bytes) and never
as floats.  The grammar is the one kube-apiserver accepts, plus an upper-case `K` for kilo, a
frequent slip that we normalise to `k` when writing manifests.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from .contract import format_bytes as contract_format_bytes
from .contract import format_cores

__all__ = ["QUANTITY_PATTERN", "Quantity", "QuantityError", "format_bytes", "format_cpu"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "K": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
#: The grammar as a regular expression both Python and JavaScript read the same way (ASCII digits
#: only: `\\d` would let other scripts' digits through in Python); the schemas serve it.
QUANTITY_PATTERN = r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkKMGTPE])?"
_PATTERN = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:(?P<binary>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?[0-9]+)|(?P<decimal>[numkKMGTPE]?))"
)
_MAX_EXPONENT = 30  # beyond this no real resource exists; refusing keeps Fractions small


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message says what is allowed."""


@dataclass(frozen=True, order=False)
class Quantity:
    """A non-symbolic amount in base units (cores for CPU, bytes for memory, whole devices)."""

    value: Fraction

    @classmethod
    def parse(cls, raw: str | float | Fraction | Quantity) -> Quantity:
        if isinstance(raw, Quantity):
            return raw
        if isinstance(raw, bool):
            raise QuantityError("expected a quantity such as '500m', '2', '4Gi'; got a boolean")
        if isinstance(raw, (int, Fraction)):
            return cls(Fraction(raw))
        if isinstance(raw, float):
            if not math.isfinite(raw):
                raise QuantityError("expected a finite number")
            return cls(Fraction(str(raw)))
        if not isinstance(raw, str):
            raise QuantityError(f"expected a quantity string such as '500m' or '4Gi', got {type(raw).__name__}")
        text = raw.strip()
        match = _PATTERN.fullmatch(text)
        if not match:
            raise QuantityError(
                f"'{raw}' is not a quantity: use a number with an optional suffix "
                "(m, k, M, G, T, P, E or Ki, Mi, Gi, Ti, Pi, Ei), e.g. '500m', '2', '1.5', '4Gi', '1G'"
            )
        number = Fraction(match["number"] if not match["number"].endswith(".") else match["number"][:-1])
        if match["binary"]:
            factor = Fraction(_BINARY[match["binary"]])
        elif match["exp"]:
            exponent = int(match["exp"][1:])
            if abs(exponent) > _MAX_EXPONENT:
                raise QuantityError(f"'{raw}': exponent {exponent} is out of range (|e| <= {_MAX_EXPONENT})")
            factor = Fraction(10) ** exponent
        else:
            factor = _DECIMAL[match["decimal"] or ""]
        value = number * factor
        return cls(-value if match["sign"] == "-" else value)

    # Arithmetic stays exact: totals are sums of per-replica amounts times replica counts.
    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + Quantity.parse(other).value)

    def __mul__(self, count: int) -> Quantity:
        if not isinstance(count, int) or isinstance(count, bool):
            return NotImplemented
        return Quantity(self.value * count)

    __rmul__ = __mul__

    def __lt__(self, other: Quantity) -> bool:
        return self.value < Quantity.parse(other).value

    def __le__(self, other: Quantity) -> bool:
        return self.value <= Quantity.parse(other).value

    def __gt__(self, other: Quantity) -> bool:
        return self.value > Quantity.parse(other).value

    def __ge__(self, other: Quantity) -> bool:
        return self.value >= Quantity.parse(other).value

    def canonical(self) -> str:
        """The shortest exact string Kubernetes accepts for this amount (`1500m`, `2`, `4Gi`)."""
        return _canonical(self.value)

    def as_cpu(self) -> str:
        return format_cpu(self.value)

    def as_bytes(self) -> str:
        return format_bytes(self.value)


def _canonical(value: Fraction) -> str:
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value == 0:
        return "0"
    if value.denominator == 1:
        whole = value.numerator
        for suffix, factor in sorted(_BINARY.items(), key=lambda item: -item[1]):
            if whole >= factor and whole % factor == 0:
                return f"{sign}{whole // factor}{suffix}"
        for suffix in ("E", "P", "T", "G", "M", "k"):
            factor = int(_DECIMAL[suffix])
            if whole >= factor and whole % factor == 0:
                return f"{sign}{whole // factor}{suffix}"
        return f"{sign}{whole}"
    for suffix in ("m", "u", "n"):
        scaled = value / _DECIMAL[suffix]
        if scaled.denominator == 1:
            return f"{sign}{scaled.numerator}{suffix}"
    # Kubernetes rounds sub-nano amounts up; do the same so a limit is never undercut.
    nanos = -(-value.numerator * 10**9 // value.denominator)
    return f"{sign}{nanos}n"


def format_cpu(value: Fraction | Quantity) -> str:
    """Cores for people: `8`, `1.5`, `250m` (`contract.format_cores`, the one definition)."""
    return format_cores(float(value.value if isinstance(value, Quantity) else Fraction(value)))


def format_bytes(value: int | Fraction | Quantity) -> str:
    """Bytes for people: the largest binary unit with at most two decimals (`16Gi`, `1.5Gi`;
    `contract.format_bytes`, the one definition)."""
    return contract_format_bytes(float(value.value if isinstance(value, Quantity) else Fraction(value)))
