"""Filters shared by the job list pages and ``GET /api/v1/jobs/`` (django-filter).

One :class:`JobFilter` for both, so a page's filter form and the API's query
parameters mean the same thing: ``team`` (slug), ``phase``, ``submitter``
(username), ``flavor`` (name), ``q`` (part of the job name, any case), ``age``
(``1h``, ``24h``, ``7d``, ``30d``: submitted within that long). An unknown
``phase`` or ``age`` is a 400 on the API naming the parameter (the pages show it
next to the field). The order stays the queryset's (newest first, then id).
"""

from __future__ import annotations

import datetime as dt

import django_filters
from django.utils import timezone

from portal.models import Job

#: ``age`` choices: (value, label, how far back).
AGES = (("1h", "last hour", dt.timedelta(hours=1)),
        ("24h", "last 24 hours", dt.timedelta(hours=24)),
        ("7d", "last 7 days", dt.timedelta(days=7)),
        ("30d", "last 30 days", dt.timedelta(days=30)))


class JobFilter(django_filters.FilterSet):
    """``?team=&phase=&submitter=&flavor=&q=&age=`` over visible jobs."""

    team = django_filters.CharFilter(field_name="team__slug", help_text="team slug")
    phase = django_filters.ChoiceFilter(choices=Job.Phase.choices)
    submitter = django_filters.CharFilter(field_name="submitter__username",
                                          help_text="username of who submitted")
    flavor = django_filters.CharFilter(field_name="flavor__name", help_text="GPU flavor name")
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", max_length=63,
                                  label="Name contains", help_text="part of the job name")
    age = django_filters.ChoiceFilter(choices=[(v, label) for v, label, _ in AGES],
                                      method="filter_age", label="Submitted",
                                      help_text="submitted within: 1h, 24h, 7d or 30d")

    class Meta:
        model = Job
        fields = ["team", "phase", "submitter", "flavor", "q", "age"]

    def filter_age(self, queryset, name, value):
        """Jobs submitted within the chosen span (``submitted_at >= now - span``)."""
        span = next(delta for v, _, delta in AGES if v == value)
        return queryset.filter(submitted_at__gte=timezone.now() - span)
