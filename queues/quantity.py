"""Kubernetes resource quantities (``8``, ``500m``, ``64Gi``): check, parse, format.

Decision (the one exception to "only ``queues/cluster.py`` imports kubernetes")
-----------------------------------------------------------------------------
The project rule is to parse quantities with a library, never with hand-made
string splitting. No small, maintained PyPI package parses the Kubernetes
quantity grammar on its own (the package lists were searched for
quantity + kubernetes/k8s: nothing; general unit libraries such as pint do not
know the Kubernetes suffixes ``m``/``Ki``/``E`` or the ``1e3`` exponent form).
So this module, and only this module, imports
``kubernetes.utils.quantity.parse_quantity`` and ``format_quantity``: pure
utility functions of the official client that make no API call and read no
kubeconfig. Importing them loads the ``kubernetes`` package (about 0.5 s, once
per process); nothing here touches a cluster. Everything else in ``queues``
(specs, render) uses the functions below and never imports ``kubernetes``.

``parse_quantity`` alone is lenient (``Decimal`` accepts ``"NaN"``,
``"Infinity"``, surrounding blanks, and ``K`` is taken as kilo), so a string
is first matched against the quantity grammar that the API server publishes
in every CRD's OpenAPI schema (``QUANTITY_PATTERN``, copied from the
``pattern`` of an int-or-string quantity field; see
https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/).

Formatting mirrors the API server's canonical form closely enough that a value
we render reads back unchanged: binary values (the source used ``Ki``..``Ei``)
take the largest exact binary suffix, decimal values the largest exact
decimal suffix (``2000`` cores -> ``"2k"``, ``1.5`` cores -> ``"1500m"``).
Callers that compare with what the cluster reports should still compare
parsed values (``parse``), never strings.
"""

from __future__ import annotations

import re
from decimal import Decimal

from kubernetes.utils.quantity import format_quantity as _k8s_format_quantity
from kubernetes.utils.quantity import parse_quantity as _k8s_parse_quantity

__all__ = [
    "QUANTITY_PATTERN",
    "canonical",
    "equal",
    "format_quantity",
    "is_binary",
    "parse",
    "value_key",
]

#: The Kubernetes quantity grammar as published in CRD OpenAPI schemas.
QUANTITY_PATTERN = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

_BINARY_SUFFIXES = ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki")
_BINARY_POWERS = {"Ki": 1, "Mi": 2, "Ti": 4, "Gi": 3, "Pi": 5, "Ei": 6}
_DECIMAL_UP = (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3))
_DECIMAL_DOWN = (("m", -3), ("u", -6), ("n", -9))


def parse(value: str) -> Decimal:
    """Parse a quantity string into an exact ``Decimal`` in base units.

    Base units are cores for ``cpu``, bytes for ``memory``, devices for
    extended resources. ``"500m"`` -> ``Decimal("0.5")``,
    ``"64Gi"`` -> ``Decimal(68719476736)``.

    Raises ``ValueError`` (with the offending string) when ``value`` is not a
    ``str`` or not a quantity.
    """
    if not isinstance(value, str):
        raise ValueError(f"expected a quantity string such as '8', '500m' or '64Gi', got {value!r}")
    if not QUANTITY_PATTERN.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. '8', '500m', '64Gi')")
    return Decimal(_k8s_parse_quantity(value))


def is_binary(value: str) -> bool:
    """True when the quantity string uses a power-of-two suffix (``Ki`` .. ``Ei``)."""
    return value.endswith(_BINARY_SUFFIXES)


def _is_integral(value: Decimal) -> bool:
    return value == value.to_integral_value()


def format_quantity(value: Decimal | int, *, binary: bool = False) -> str:
    """Render ``value`` (base units) as a canonical quantity string.

    ``binary=True`` prefers the largest exact power-of-two suffix
    (``68719476736`` -> ``"64Gi"``); otherwise, and when no binary suffix is
    exact, the largest exact decimal suffix is used (``2000`` -> ``"2k"``,
    ``Decimal("1.5")`` -> ``"1500m"``, ``32`` -> ``"32"``).

    Raises ``ValueError`` for negative values and for values finer than a
    nano-unit, which Kubernetes cannot represent exactly.
    """
    value = Decimal(value)
    if not value.is_finite() or value < 0:
        raise ValueError(f"cannot render {value!r} as a quantity")
    if value == 0:
        return "0"
    if _is_integral(value):
        if binary:
            for suffix in _BINARY_SUFFIXES:
                scaled = value / (Decimal(1024) ** _BINARY_POWERS[suffix])
                if _is_integral(scaled):
                    return _k8s_format_quantity(value, suffix, quantize=Decimal(1))
        for suffix, exponent in _DECIMAL_UP:
            if _is_integral(value.scaleb(-exponent)):
                return _k8s_format_quantity(value, suffix, quantize=Decimal(1))
        return str(int(value))
    for suffix, exponent in _DECIMAL_DOWN:
        if _is_integral(value.scaleb(-exponent)):
            return _k8s_format_quantity(value, suffix, quantize=Decimal(1))
    raise ValueError(f"{value} is finer than 1n and cannot be represented as a quantity")


def canonical(value: str) -> str:
    """Canonical form of a quantity string: ``"64000m"`` -> ``"64"``, ``"1024Mi"`` -> ``"1Gi"``."""
    return format_quantity(parse(value), binary=is_binary(value))


def value_key(value: str | int) -> str:
    """The quantity's exact value in base units as a plain decimal string, for comparing.

    Equal values give equal keys whatever their spelling: ``"64Gi"`` and
    ``"68719476736"`` -> ``"68719476736"``; ``"1000m"``, ``"1"`` and ``1`` ->
    ``"1"``; ``"0"`` and ``"0m"`` -> ``"0"``; ``"500m"`` -> ``"0.5"``. An
    ``int`` (a quantity read back as a JSON number) is taken as its decimal
    string. Raises ``ValueError`` when ``value`` is not a quantity.
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a quantity, got {value!r}")
    if isinstance(value, int):
        value = str(value)
    number = parse(value).normalize()
    return format(number, "f") if number else "0"


def equal(a: str | int, b: str | int) -> bool:
    """True when ``a`` and ``b`` are quantities of the same value (``"1"`` == ``"1000m"``).

    Compares exact values (``Decimal``), never strings: ``"64Gi"`` ==
    ``"68719476736"``, ``"0"`` == ``"0m"``, ``"1Gi"`` != ``"1G"``. Returns
    ``False`` (instead of raising) when either side is not a quantity.
    """
    try:
        return value_key(a) == value_key(b)
    except ValueError:
        return False
