# Tenant leaves billing for tenancy (issue #30), database untouched: billing's foreign keys point
# at tenancy.Tenant, whose table is still billing_tenant (same column, same constraint), and the
# model leaves billing's migration state once no state refers to it (accounts.0006 moved the
# token's key first).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0006_api_token_tenant_in_tenancy'),
        ('billing', '0007_invoice_line_unpriced'),
        ('tenancy', '0001_tenant_from_billing'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='usagerecord',
                    name='tenant',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='usage', to='tenancy.tenant'),
                ),
                migrations.AlterField(
                    model_name='apikey',
                    name='tenant',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='api_keys', to='tenancy.tenant'),
                ),
                migrations.AlterField(
                    model_name='invoice',
                    name='tenant',
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='invoices', to='tenancy.tenant'),
                ),
                migrations.DeleteModel(
                    name='Tenant',
                ),
            ],
            database_operations=[],
        ),
    ]
