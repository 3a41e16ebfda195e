"""Checks of raw input values that every service shares; each error names its field."""

import re
from typing import Any

from django.core.exceptions import ValidationError

from queues import quantity

#: An optionally signed run of ASCII digits: ``str.isdigit`` would accept "²" or
#: "٣", and ``lstrip("-")`` would accept "--5", which ``int()`` then refuses.
_WHOLE = re.compile(r"-?[0-9]+")

#: The largest count a column can store: PostgreSQL ``integer``, which Django's
#: ``PositiveIntegerField`` uses (GPU counts, workers, seconds).
MAX_COUNT = 2**31 - 1


def whole_count(field: str, value: Any, *, allow_none: bool = False) -> int | None:
    """Return ``value`` as a whole number 0..:data:`MAX_COUNT` (GPUs, workers, seconds).

    ``1.5`` or ``"1.5"`` is an error naming ``field``, never rounded; ``True`` is
    not a number; ``None`` passes only with ``allow_none`` (meaning "no limit");
    a number above :data:`MAX_COUNT` (what the database column holds) is an error.
    Raises :class:`ValidationError` ``{field: message}``.
    """
    if value is None or value == "":
        if allow_none:
            return None
        raise ValidationError({field: "This field is required."})
    if isinstance(value, bool):
        raise ValidationError({field: f"{value!r} is not a whole number."})
    if isinstance(value, float):
        if not value.is_integer():
            raise ValidationError({field: f"{value} is not a whole number of GPUs."})
        value = int(value)
    if isinstance(value, str):
        if not _WHOLE.fullmatch(value.strip()):
            raise ValidationError({field: f"'{value}' is not a whole number."})
        value = int(value.strip())
    if not isinstance(value, int):
        raise ValidationError({field: f"{value!r} is not a whole number."})
    if value < 0:
        raise ValidationError({field: f"{value} is negative; it must be 0 or more."})
    if value > MAX_COUNT:
        raise ValidationError({field: f"{value} is too large; it must be at most {MAX_COUNT}."})
    return value


def quantity_string(field: str, value: str, *, allow_blank: bool = False) -> str:
    """Check a Kubernetes quantity (``500m``, ``8Gi``) with the library parser.

    Returns the value unchanged; ``8gb`` or ``-1`` are errors naming ``field``.
    Raises :class:`ValidationError`.
    """
    if value in (None, ""):
        if allow_blank:
            return ""
        raise ValidationError({field: "This field is required."})
    try:
        parsed = quantity.parse(str(value))
    except (ValueError, TypeError) as exc:
        raise ValidationError(
            {field: f"'{value}' is not a Kubernetes quantity such as 500m, 8 or 64Gi ({exc})."}
        ) from exc
    if parsed < 0:
        raise ValidationError({field: f"'{value}' is negative."})
    return str(value)
