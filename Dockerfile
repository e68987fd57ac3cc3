# One image for the web server (daphne, ASGI) and the worker.
FROM python:3.11-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap util-linux python3 python3-venv tini tmux nano vim-tiny \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY . .

ENV TAKEHOME_VAR_DIR=/data \
    PYTHONUNBUFFERED=1
# The sandbox's runner virtualenv is built from Debian's python3, under a path
# every sandbox uid can read.
# collectstatic runs in production mode so whitenoise's manifest is written;
# the key here only lets the settings load during the build.
RUN python -m grading.engine.runner /opt/takehome-runner && \
    DEBUG=false SECRET_KEY=build-time-only-never-used-to-sign-anything-0123456789 \
    python manage.py collectstatic --noinput -v0
ENV TAKEHOME_RUNNER_DIR=/opt/takehome-runner

# tini reaps the sandboxes' processes when the worker is pid 1.
ENTRYPOINT ["/usr/bin/tini", "--"]
# daphne (ASGI): the pages and the hosted terminal's WebSockets. It has no request timeout
# (a streamed model reply holds its request for up to TAKEHOME_MODEL_TIMEOUT_S); Django runs
# the views in a pool of ASGI_THREADS threads. --verbosity 0: no access log of daphne's (it names
# each path whole, a candidate's link token with it); the app logs each request itself (shared/logs.py).
# --no-server-name: no `Server: daphne` header.
ENV ASGI_THREADS=16
CMD ["daphne", "takehome.asgi:application", "--bind", "0.0.0.0", "--port", "8000", "--application-close-timeout", "10", "--verbosity", "0", "--no-server-name"]
