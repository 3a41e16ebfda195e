"""``manage.py seed_demo``: create the demo logins (idempotent)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

#: (username, password, is_staff, description) of the demo logins. Demo only:
#: ``seed_demo`` refuses to run with DEBUG off.
DEMO_USERS = (
    ("admin", "admin-demo-pass", True, "platform staff (admin console)"),
    ("alice", "alice-demo-pass", False, "team lead"),
    ("bob", "bob-demo-pass", False, "team member"),
)


class Command(BaseCommand):
    """Create or reset the demo users and print their logins."""

    help = "Create the demo logins (admin, a team lead, a team member) and print them."

    def handle(self, *args, **options) -> None:
        """Create the users in one transaction; print one login per line."""
        from django.conf import settings

        if not settings.DEBUG:
            self.stderr.write("seed_demo only runs with DEBUG on (demo passwords are public).")
            raise SystemExit(2)
        user_model = get_user_model()
        with transaction.atomic():
            for username, password, is_staff, _ in DEMO_USERS:
                user, _created = user_model.objects.get_or_create(username=username)
                user.is_staff = is_staff
                user.is_superuser = is_staff
                user.set_password(password)
                user.save()
        self.stdout.write("Demo logins:")
        for username, password, _, description in DEMO_USERS:
            self.stdout.write(f"  {username:<8} / {password:<18} {description}")
