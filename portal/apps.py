"""Django app config of the portal's product app."""

from django.apps import AppConfig


class PortalConfig(AppConfig):
    """The product app: models, services, selectors, views, API and tasks."""

    name = "portal"
    verbose_name = "GPU quota portal"
    default_auto_field = "django.db.models.BigAutoField"
