# One image for every service of docker-compose.yml: the web server (daphne, ASGI), the workspace host
# (`manage.py serve_workspaces --http`), the grading worker and beat. It holds the app's runtime
# requirements alone (requirements.txt; never requirements-dev.txt or requirements-docs.txt: the tests,
# the benchmarks, the lint and the docs stay out).
FROM python:3.11-slim-bookworm

# bubblewrap, util-linux (setpriv, prlimit) and Debian's python3 with venv: the sandbox and its runner
# virtualenv; tini reaps the sandboxes' processes; tmux, nano and vim-tiny: the hosted workspaces' shells.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap util-linux python3 python3-venv tini tmux nano vim-tiny \
    && rm -rf /var/lib/apt/lists/*

# The user the web server and beat run as (docker-compose.yml). Its uid is far from the sandbox's pools
# (TAKEHOME_SANDBOX_UID_BASE, TAKEHOME_WORKSPACE_UID_BASE). /data is its own, so a new volume mounted
# there is too (Docker copies the folder's owner into an empty volume): uploads are written by it.
RUN groupadd --system --gid 10001 takehome \
    && useradd --system --uid 10001 --gid takehome --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin takehome \
    && mkdir -p /data/media \
    && chown -R takehome:takehome /data

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
# The app's modules are compiled here: /app is root's, and the web server's user may not write there.
RUN python -m grading.engine.runner /opt/takehome-runner && \
    DEBUG=false SECRET_KEY=build-time-only-never-used-to-sign-anything-0123456789 \
    python manage.py collectstatic --noinput -v0 && \
    python -m compileall -q takehome sessions_app grading shared manage.py
ENV TAKEHOME_RUNNER_DIR=/opt/takehome-runner

# Not root unless a service says so: docker-compose.yml runs the worker and the workspace host as root
# (they start sandboxes under uids of their own, which takes root) and nothing else.
USER takehome

# tini reaps the sandboxes' processes when the worker is pid 1.
ENTRYPOINT ["/usr/bin/tini", "--"]
# daphne (ASGI): the pages and the hosted terminal's WebSockets. It has no request timeout
# (a streamed model reply holds its request for up to TAKEHOME_MODEL_TIMEOUT_S); Django runs
# the views in a pool of ASGI_THREADS threads. --verbosity 0: no access log of daphne's (it names
# each path whole, a candidate's link token with it); the app logs each request itself (shared/logs.py).
# --no-server-name: no `Server: daphne` header.
ENV ASGI_THREADS=16
CMD ["daphne", "takehome.asgi:application", "--bind", "0.0.0.0", "--port", "8000", "--application-close-timeout", "10", "--verbosity", "0", "--no-server-name"]
