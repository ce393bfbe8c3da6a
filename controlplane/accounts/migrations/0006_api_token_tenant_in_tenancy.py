# A token's tenant is now tenancy.Tenant (issue #30): the same table (billing_tenant), column and
# constraint, so only the migration state changes.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0005_api_token_expiry'),
        ('tenancy', '0001_tenant_from_billing'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='apitoken',
                    name='tenant',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenancy.tenant'),
                ),
            ],
            database_operations=[],
        ),
    ]
