"""API tokens: named, expiring, revocable, stored hashed (django-rest-knox's model)."""

from django.db import models
from django.utils import timezone
from knox.models import AbstractAuthToken
from knox.settings import CONSTANTS


class ApiToken(AbstractAuthToken):
    """A user's API token for ``Authorization: Token <secret>``.

    The secret is shown once, when the token is made, and never stored: the row keeps
    ``digest`` (SHA-512 of the secret, knox's hash) and ``token_key`` (the secret's first
    15 characters, to find the row and to let people tell their tokens apart).
    ``name`` says what the token is for; ``expiry`` (``None`` = never) ends it (knox
    deletes an expired token when it is next presented); deleting the row revokes it.
    """

    # An id as primary key, so admin URLs and forms never carry the digest.
    id = models.BigAutoField(primary_key=True)
    digest = models.CharField(max_length=CONSTANTS.DIGEST_LENGTH, unique=True)
    name = models.CharField(max_length=64)

    class Meta:
        ordering = ["-created", "-id"]
        verbose_name = "API token"
        verbose_name_plural = "API tokens"

    def __str__(self) -> str:
        return f"{self.user} / {self.name} ({self.token_key}…)"

    @property
    def expired(self) -> bool:
        """True once ``expiry`` has passed."""
        return self.expiry is not None and self.expiry <= timezone.now()
