"""API tokens stored hashed (portal.ApiToken, django-rest-knox).

DRF's plaintext tokens (rest_framework.authtoken, table ``authtoken_token``) become
hashed ApiTokens named "migrated": same secret, so existing clients keep working,
expiring API_TOKEN_DEFAULT_DAYS after the migration. The plaintext rows are then
deleted (the app is no longer installed; its emptied table is left in place).
"""

from datetime import timedelta

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.utils import timezone

PLAINTEXT_TABLE = "authtoken_token"


def hash_plaintext_tokens(apps, schema_editor):
    """Copy each plaintext token into a hashed ApiToken, then delete the plaintext rows."""
    from knox.crypto import hash_token
    from knox.settings import CONSTANTS

    connection = schema_editor.connection
    if PLAINTEXT_TABLE not in connection.introspection.table_names():
        return
    table = schema_editor.quote_name(PLAINTEXT_TABLE)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key, user_id, created FROM {table}")  # noqa: S608 - constant
        rows = cursor.fetchall()
    api_token = apps.get_model("portal", "ApiToken")
    expiry = timezone.now() + timedelta(days=settings.API_TOKEN_DEFAULT_DAYS)
    for key, user_id, created in rows:
        token = api_token(
            user_id=user_id, digest=hash_token(key), token_key=key[:CONSTANTS.TOKEN_KEY_LENGTH],
            name="migrated", expiry=expiry)
        token.save()
        api_token.objects.filter(pk=token.pk).update(created=created)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {table}")  # noqa: S608 - constant


class Migration(migrations.Migration):

    dependencies = [
        ('portal', '0008_merge_sim_partly_placed'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ApiToken',
            fields=[
                ('token_key', models.CharField(db_index=True, max_length=25)),
                ('created', models.DateTimeField(auto_now_add=True)),
                ('expiry', models.DateTimeField(blank=True, null=True)),
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('digest', models.CharField(max_length=128, unique=True)),
                ('name', models.CharField(max_length=64)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='auth_token_set', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name': 'API token',
                'verbose_name_plural': 'API tokens',
                'ordering': ['-created', '-id'],
            },
        ),
        migrations.RunPython(hash_plaintext_tokens, migrations.RunPython.noop),
    ]
