# The control plane's image (web, Celery worker and beat, migrations) and the `pdd` command line
# (data-plane agents). Dependencies come from the hashed lockfile; the process runs as `pdd`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PDD_DATA_DIR=/var/lib/pdd

WORKDIR /app
# Locked, hashed runtime dependencies first: this layer is reused until the lockfile changes.
COPY requirements/runtime.txt requirements/runtime.txt
RUN pip install --require-hashes -r requirements/runtime.txt

COPY pyproject.toml README.md manage.py ./
COPY pdd_core pdd_core
COPY controlplane controlplane
COPY frontend frontend
COPY fixtures fixtures
RUN pip install --no-deps . \
    && groupadd --system --gid 10001 pdd \
    && useradd --system --uid 10001 --gid pdd --home-dir /var/lib/pdd --shell /usr/sbin/nologin pdd \
    && mkdir -p /var/lib/pdd \
    && chown pdd:pdd /var/lib/pdd

USER 10001:10001
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "controlplane.asgi:application"]
