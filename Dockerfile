# One image for web, worker and beat (see docker-compose.yml).
FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY portal ./portal
COPY queues ./queues
RUN pip install --no-cache-dir -c constraints.txt -e .
# .dockerignore keeps .env, var/ (SQLite, tokens), kubeconfigs, .venv and .git out.
COPY . .
# Static files as production serves them (DEBUG=false: hashed names and the
# staticfiles.json manifest); the same script the tests run.
RUN scripts/build-static
RUN useradd --create-home --uid 10001 --user-group portal && chown -R portal /app
# Numeric, so Kubernetes can check runAsNonRoot (the Helm chart runs it as 10001).
USER 10001
EXPOSE 8000
CMD ["gunicorn", "portal.wsgi", "--bind", "0.0.0.0:8000", "--workers", "3", "--access-logfile", "-"]
