from decimal import Decimal

import pytest

from queues import quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8", Decimal(8)),
        ("500m", Decimal("0.5")),
        ("64Gi", Decimal(64 * 2**30)),
        ("1e3", Decimal(1000)),
        ("256G", Decimal(256 * 10**9)),
    ],
)
def test_parse(text, value):
    assert quantity.parse(text) == value


@pytest.mark.parametrize("text", ["NaN", "Infinity", "1K", " 1", "", "abc", "1.2.3", 8, None])
def test_parse_rejects_what_the_api_server_rejects(text):
    with pytest.raises(ValueError, match="quantity"):
        quantity.parse(text)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("64000m", "64"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("0.5Gi", "512Mi"),
        ("2000", "2k"),
        ("1.5", "1500m"),
        ("256G", "256G"),
        ("0", "0"),
    ],
)
def test_canonical(text, canonical):
    assert quantity.canonical(text) == canonical


def test_format_rejects_negative_and_sub_nano():
    with pytest.raises(ValueError, match="cannot render"):
        quantity.format_quantity(Decimal(-1))
    with pytest.raises(ValueError, match="finer than 1n"):
        quantity.format_quantity(Decimal("1e-10"))
