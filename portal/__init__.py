"""The GPU quota portal: Django project and product app.

Importing the package loads the Celery app so that ``@shared_task`` tasks bind to it.
"""

from portal.celery import app as celery_app

__all__ = ("celery_app",)
