"""``manage.py create_api_token USERNAME``: print a REST API token for a user."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token


class Command(BaseCommand):
    """Print the user's token (created if absent) for ``Authorization: Token <key>``."""

    help = "Print an API token for USERNAME (use it as 'Authorization: Token <key>')."

    def add_arguments(self, parser) -> None:
        """USERNAME, and ``--rotate`` to replace an existing token."""
        parser.add_argument("username")
        parser.add_argument("--rotate", action="store_true", help="replace the existing token")

    def handle(self, *args, username: str, rotate: bool, **options) -> None:
        """Raise CommandError for an unknown user; print only the key on stdout."""
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named '{username}'.")
        if rotate:
            Token.objects.filter(user=user).delete()
        token, _ = Token.objects.get_or_create(user=user)
        self.stdout.write(token.key)
