FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md manage.py ./
COPY pdd_core pdd_core
COPY controlplane controlplane
COPY frontend frontend
COPY fixtures fixtures
RUN pip install --no-cache-dir . && mkdir -p /var/lib/pdd
EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "controlplane.asgi:application"]
