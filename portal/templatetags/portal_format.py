"""Template filters for figures shown to people (durations, signed changes)."""

from django import template

from queues.whatif import format_duration

register = template.Library()


@register.filter
def duration(seconds: float | None) -> str:
    """Seconds as ``"45 s"``, ``"12 min"`` or ``"2.5 h"`` (``"-"`` for ``None``);
    see :func:`queues.whatif.format_duration`."""
    return format_duration(seconds)


@register.filter
def change_class(delta: float | None) -> str:
    """CSS class of a change in waits, borrowing or preemptions: ``"up"`` for a rise,
    ``"down"`` for a fall, ``""`` for none (or ``None``)."""
    if not delta:
        return ""
    return "up" if delta > 0 else "down"
