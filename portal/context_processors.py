"""Template context every page gets: the staff nav badge."""

from django.http import HttpRequest

from portal import access
from portal.selectors.quota import pending_request_count


def nav(request: HttpRequest) -> dict:
    """``pending_review_count`` for staff (one query), nothing for others."""
    user = getattr(request, "user", None)
    if user is None or not access.is_staff(user):
        return {}
    return {"pending_review_count": pending_request_count()}
