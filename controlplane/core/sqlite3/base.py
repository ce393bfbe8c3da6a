"""The SQLite backend of the embedded defaults, with PostgreSQL's integer column ranges.

Django bounds each integer model field by its column's range, which it asks the backend for:
PostgreSQL's ``integer`` holds 32 bits, while SQLite says every integer column holds 64. So on
SQLite a pool of 2^63 - 1 instances was accepted (201) that PostgreSQL refuses (400), the API
schema documented other maxima on each backend, and a database could not move from one to the
other. This backend answers the SQL standard ranges Django declares for every backend (the ones
PostgreSQL enforces): both backends accept exactly the same values.
"""

from __future__ import annotations

from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.backends.sqlite3 import base, operations


class DatabaseOperations(operations.DatabaseOperations):
    def integer_field_range(self, internal_type: str) -> tuple[int, int]:
        low, high = BaseDatabaseOperations.integer_field_ranges[internal_type]
        return low, high


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
