# The engine's example fleet server: one image, run as every replica by docker-compose.yml.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# The package first (its dependencies are the slow layer, at the versions make test passed
# with), then the servable example.
COPY pyproject.toml README.md .ci/constraints.txt ./
COPY engine ./engine
COPY stores ./stores
RUN pip install -c constraints.txt .

COPY examples ./examples

RUN useradd --system --uid 10001 --no-create-home --home-dir /app engine \
    && mkdir -p /data/effects \
    && chown engine /data/effects
USER engine

# Every replica gets the same ENGINE_KEYS and ENGINE_STORE, and its own ENGINE_REPLICA_ID.
ENV FLEET_EFFECTS_DIR=/data/effects
EXPOSE 8000

# 200 when the process and its store answer, 503 (a failed check) when the store does not.
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]

# SIGTERM drains: the listener closes, rounds in flight finish, then the process exits.
STOPSIGNAL SIGTERM
CMD ["python", "-m", "engine", "serve", "examples/fleet_server.py", "--host", "0.0.0.0", "--port", "8000"]
