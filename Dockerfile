# The dashboard image: the repository, its Python dependencies, Streamlit, the Docker CLI
# with the compose plugin, and a Java runtime for the PySpark metrics (Spark's driver is a
# JVM; Spark 4.2 runs on Java 17 to 25). The brokers run in their own containers
# (docker-compose.yml), and the engine only drives them.
#
#   docker compose build dashboard
#
# Its two base images are build arguments. By default they are the official python:3.11-slim
# and docker:28-cli; where those cannot be pulled, `./lab images` builds stand-ins from a local
# Debian base (containers/python, containers/docker-cli) and passes them here:
#
#   docker build --build-arg PYTHON_IMAGE=... --build-arg DOCKER_CLI_IMAGE=... .
ARG PYTHON_IMAGE=python:3.11-slim
ARG DOCKER_CLI_IMAGE=docker:28-cli

# The official Docker CLI image ships static `docker` and `docker compose` binaries. The
# engine runs `docker compose up/rm` for the broker services through the mounted socket.
FROM ${DOCKER_CLI_IMAGE} AS docker-cli

FROM ${PYTHON_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY --from=docker-cli /usr/local/bin/docker /usr/local/bin/docker
# The whole plugin folder: the compose plugin in the official image (the stand-in's is empty,
# and its Python base carries a standalone docker-compose instead).
COPY --from=docker-cli /usr/local/libexec/docker/cli-plugins/ /usr/local/libexec/docker/cli-plugins/

WORKDIR /app

# The dependencies first, read from pyproject.toml alone, so that a code change does not
# reinstall them.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# Java for Spark, and Maven once, to fetch Spark's Kafka connector into .cache at build time.
RUN apt-get update \
    && apt-get install -y --no-install-recommends default-jre-headless maven \
    && rm -rf /var/lib/apt/lists/*

COPY . .
# Editable, so that `engine` is imported from /app: engine/base/paths.py finds kafka/pom.xml (the
# pinned Kafka version), docker-compose.yml and runs/ next to the engine package. A plain
# `pip install .` would copy the package into site-packages, away from those files.
RUN pip install --no-deps --editable . \
    && mkdir -p /app/runs \
    && python -c "from engine.metrics.session import ensure_connector_jars; ensure_connector_jars()"

# Runs as root: the engine talks to the host's Docker socket, whose group id differs from
# host to host, and that socket is root-equivalent anyway (see docker-compose.yml).
EXPOSE 8501 19091 19092 19093
CMD ["streamlit", "run", "app.py", "--server.address", "0.0.0.0", "--server.port", "8501"]
