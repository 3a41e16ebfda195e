"""``manage.py demo``: run the whole portal locally on the embedded default.

Migrates, seeds the demo data, starts a Celery worker (and beat) as child
processes, prints the URL and logins, and serves the portal until Ctrl-C, which
stops every process it started.
"""

import os
import signal
import subprocess
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    """Start web, worker and beat for a local demo."""

    help = "Migrate, seed demo data, start a worker and beat, and serve on 127.0.0.1:PORT."

    def add_arguments(self, parser) -> None:
        """``--port`` (default: $PORT or 8000) and ``--no-worker``."""
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-worker", action="store_true", help="serve the web only")

    def handle(self, *args, port: int, no_worker: bool, **options) -> None:
        """Run until interrupted; always terminate the children on the way out."""
        settings.VAR_DIR.mkdir(parents=True, exist_ok=True)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("seed_demo")
        # SIGTERM (e.g. from a supervisor) unwinds like Ctrl-C, so children are stopped too.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        children: list[subprocess.Popen] = []
        celery = [sys.executable, "-m", "celery", "-A", "portal"]
        try:
            if not no_worker:
                worker = [*celery, "worker", "--loglevel=WARNING", "--pool=threads"]
                schedule = settings.VAR_DIR / "celerybeat-schedule"
                beat = [*celery, "beat", "--loglevel=WARNING", f"--schedule={schedule}"]
                children.append(subprocess.Popen(worker))
                children.append(subprocess.Popen(beat))
            url = f"http://127.0.0.1:{port}/"
            self.stdout.write(self.style.SUCCESS(f"\nThe portal is at {url}  (Ctrl-C stops it)\n"))
            call_command("runserver", f"127.0.0.1:{port}", use_reloader=False)
        finally:
            for child in children:
                child.send_signal(signal.SIGTERM)
            for child in children:
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
