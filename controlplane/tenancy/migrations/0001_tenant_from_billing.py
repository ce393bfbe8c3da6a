# Tenant moves here from billing (issue #30) without touching the database: the table stays
# billing_tenant (Meta.db_table), so this migration creates the model in the migration state only.
# billing.0008 then deletes it from billing's state, after billing's and accounts' foreign keys
# were pointed at tenancy.Tenant (state only as well: same table, same column, same constraint).
# The content type follows the model, so admin permissions and log entries on tenants carry over.

import django.core.validators
from django.db import migrations, models


def content_type_to(app_label):
    def rename(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        old = "tenancy" if app_label == "billing" else "billing"
        ContentType.objects.using(schema_editor.connection.alias).filter(
            app_label=old, model="tenant"
        ).update(app_label=app_label)

    return rename


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('billing', '0007_invoice_line_unpriced'),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Tenant',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('slug', models.CharField(max_length=64, unique=True, validators=[django.core.validators.RegexValidator('^[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$', 'Use lowercase letters, digits, hyphens and dots, starting and ending with a letter or digit.')])),
                        ('name', models.CharField(max_length=100, unique=True)),
                        ('currency', models.CharField(default='USD', max_length=3, validators=[django.core.validators.RegexValidator('^[A-Z]{3}$', 'Use a three-letter ISO 4217 code, e.g. USD.')])),
                        ('is_active', models.BooleanField(default=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'billing_tenant',
                        'ordering': ['slug'],
                        'abstract': False,
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_type_to("tenancy"), content_type_to("billing")),
    ]
