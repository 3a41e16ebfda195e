"""``manage.py create_api_token USERNAME``: print a new REST API token for a user."""

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from portal.services.tokens import token_issue


class Command(BaseCommand):
    """Print a new token's secret for ``Authorization: Token <secret>``.

    Tokens are stored hashed, so a secret is printed once, when made: each call makes a
    new token (``--rotate`` first revokes the user's tokens of the same name).
    """

    help = ("Print a new API token for USERNAME (use it as 'Authorization: Token <secret>'; "
            "it is stored hashed and shown only now).")

    def add_arguments(self, parser) -> None:
        """USERNAME; ``--name``, ``--expires DAYS``, ``--rotate``."""
        parser.add_argument("username")
        parser.add_argument("--name", default="cli",
                            help="what the token is for (default: cli)")
        parser.add_argument("--expires", type=int, default=None, metavar="DAYS",
                            help="days until it expires (default: API_TOKEN_DEFAULT_DAYS; "
                                 "0 = never, allowed when API_TOKEN_MAX_DAYS is 0)")
        parser.add_argument("--rotate", action="store_true",
                            help="revoke the user's tokens of the same name first")

    def handle(self, *args, username: str, name: str, expires: int | None, rotate: bool,
               **options) -> None:
        """Raise CommandError for an unknown user or a refused name/lifetime; print only
        the secret on stdout (the expiry goes to stderr)."""
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named '{username}'.")
        try:
            token, secret = token_issue(actor=None, user=user, name=name, days=expires,
                                        rotate=rotate)
        except ValidationError as exc:
            raise CommandError("; ".join(f"{field}: {' '.join(messages)}"
                                         for field, messages in exc.message_dict.items())
                               ) from None
        self.stdout.write(secret)
        until = f"expires {token.expiry.isoformat()}" if token.expiry else "never expires"
        self.stderr.write(f"token '{token.name}' of {username}: {until}")
