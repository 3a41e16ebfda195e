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


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("64Gi", "68719476736"),
        ("1000m", "1"),
        ("0", "0m"),
        ("1", 1),
        ("1e3", "1k"),
        ("0.5Gi", "512Mi"),
        ("1.5", "1500m"),
    ],
)
def test_equal_compares_values_not_strings(a, b):
    assert quantity.equal(a, b)
    assert quantity.equal(b, a)
    assert quantity.value_key(a) == quantity.value_key(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [("1Gi", "1G"), ("1", "1001m"), ("8", "9"), ("8", "abc"), ("NaN", "NaN"), (True, "1")],
)
def test_equal_is_false_for_different_values_or_non_quantities(a, b):
    assert not quantity.equal(a, b)


def test_value_key_is_the_plain_base_unit_value():
    assert quantity.value_key("64Gi") == "68719476736"
    assert quantity.value_key("500m") == "0.5"
    assert quantity.value_key("0m") == "0"
    assert quantity.value_key(24) == "24"
    with pytest.raises(ValueError, match="quantity"):
        quantity.value_key("8gb")
