"""The PDD control plane: a Django project that stores, plans, pushes and meters."""

from controlplane.celery import app as celery_app

__all__ = ["celery_app"]
