"""Input checks shared by services: whole GPUs, Kubernetes quantities."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from portal.services.fields import quantity_string, whole_count
from queues import quantity


@pytest.mark.parametrize("value", [1.5, "1.5", "two", True, -1, "-3", [1]])
def test_whole_count_refuses_and_names_the_field(value):
    with pytest.raises(ValidationError) as err:
        whole_count("nominal_gpus", value)
    assert list(err.value.message_dict) == ["nominal_gpus"]


@pytest.mark.parametrize(("value", "expected"), [(8, 8), ("8", 8), (2.0, 2), (0, 0)])
def test_whole_count_accepts_whole_numbers(value, expected):
    assert whole_count("nominal_gpus", value) == expected


def test_none_means_no_limit_only_when_allowed():
    assert whole_count("borrowing_limit_gpus", None, allow_none=True) is None
    with pytest.raises(ValidationError):
        whole_count("nominal_gpus", None)


def test_quantities_follow_kubernetes_rules():
    assert quantity.parse("500m") == Decimal("0.5")
    assert quantity.parse("8Gi") == 8 * 2**30
    assert quantity.parse("8G") == 8 * 10**9
    assert quantity.parse("8Gi") != quantity.parse("8G")


@pytest.mark.parametrize("value", ["8gb", "1.5.3", "NaN", "12 Gi", ""])
def test_bad_quantities_name_the_field(value):
    with pytest.raises(ValidationError) as err:
        quantity_string("memory_per_gpu", value)
    assert list(err.value.message_dict) == ["memory_per_gpu"]


@pytest.mark.parametrize("value", ["--5", "²", "٣", "8 GPUs", "-"])
def test_whole_count_refuses_odd_strings_with_a_field_error_not_a_crash(value):
    # "--5" and "²" passed the old isdigit() test and then crashed int(): a 500.
    with pytest.raises(ValidationError) as err:
        whole_count("nominal_gpus", value)
    assert list(err.value.message_dict) == ["nominal_gpus"]


def test_whole_count_strips_spaces():
    assert whole_count("nominal_gpus", " 8 ") == 8
