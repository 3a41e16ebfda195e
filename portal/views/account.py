"""The user's own page: API tokens (make one, see them, revoke)."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from portal.forms import ApiTokenForm, add_service_error
from portal.models import ApiToken
from portal.services.tokens import token_issue, token_revoke


def _render(request: HttpRequest, *, form=None, secret: str = "", new_token=None,
            status: int = 200) -> HttpResponse:
    return render(request, "portal/account_tokens.html", {
        "tokens": ApiToken.objects.filter(user=request.user),
        "form": form or ApiTokenForm(initial={"expires_days": settings.API_TOKEN_DEFAULT_DAYS}),
        "secret": secret, "new_token": new_token,
        "max_days": settings.API_TOKEN_MAX_DAYS,
    }, status=status)


@never_cache
@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """GET: the user's tokens. POST: make one; the answer shows its secret, this once
    (rendered, never redirected through a message or the session)."""
    if request.method != "POST":
        return _render(request)
    form = ApiTokenForm(request.POST)
    if form.is_valid():
        try:
            token, secret = token_issue(actor=request.user, user=request.user,
                                        name=form.cleaned_data["name"],
                                        days=form.cleaned_data["expires_days"])
        except ValidationError as exc:
            add_service_error(form, exc)
        else:
            return _render(request, secret=secret, new_token=token)
    return _render(request, form=form, status=400)


@require_POST
@login_required
def token_revoke_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke one of the user's own tokens (another user's answers 404)."""
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token_revoke(actor=request.user, token=token)
    messages.success(request, f"Token '{token.name}' ({token.token_key}…) revoked.")
    return redirect("account-tokens")
