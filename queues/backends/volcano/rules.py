"""What Volcano adds to the specs' rules: whole queue weights 1..65535, and queue
names that neither Volcano's own queues nor another team or cohort already take
(teams and cohorts both become cluster-scoped Queues)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

#: Volcano's Queue ``spec.weight`` is an int32 in 1..65535 (Queue CRD).
MAX_WEIGHT = 65535
#: Queues Volcano creates itself: ``root`` (top of the hierarchy) and
#: ``default`` (jobs without a queue; its deletion is refused by the webhook).
RESERVED_QUEUE_NAMES = frozenset({"root", "default"})


def weight_problem(weight: Decimal, shown: Any = None) -> str | None:
    """Why ``weight`` cannot be a Volcano queue weight (``shown``: as the user wrote
    it, default ``weight``), or ``None``."""
    shown = weight if shown is None else shown
    if weight != weight.to_integral_value():
        return (f"{shown} is not a whole number: Volcano queue weights are whole numbers "
                f"from 1 to {MAX_WEIGHT}.")
    if weight > MAX_WEIGHT:
        return f"{shown} is larger than {MAX_WEIGHT}, the largest Volcano queue weight."
    if weight < 1:
        return f"{shown} is smaller than 1, the smallest Volcano queue weight."
    return None
