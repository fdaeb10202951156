# The operator image, ftspark/operator:0.1.0: the ftspark package without pyspark. `make images` builds it
# without Docker (tools/images/build.sh); elsewhere, with BuildKit (RUN --mount):
#   docker build -t ftspark/operator:0.1.0 .
# It runs as 10001:10001 on a read-only root filesystem (helm/ftspark-operator): it writes nothing but
# temporary files in /tmp, an emptyDir in the chart.

# Any Debian bookworm with python3 (3.11), python3-venv and ca-certificates: the public image by default; the
# local build passes one made from Debian packages.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# The venv and ftspark's wheel, made apart: the image gets them without pip's cache or build-time files.
FROM ${BASE_IMAGE} AS venv
# Behind a TLS-intercepting proxy: --secret id=ca,src=<its CA bundle> --build-arg PIP_CERT=/run/secrets/ca
ARG PIP_CERT
ARG PIP_DISABLE_PIP_VERSION_CHECK=1
COPY constraints.txt /src/
# pip as in the Makefile's venv; every package at its version in constraints.txt.
RUN --mount=type=cache,id=pip,target=/root/.cache/pip --mount=type=secret,id=ca \
    python3 -m venv /opt/ftspark/venv \
 && /opt/ftspark/venv/bin/pip install pip==25.3 \
 && /opt/ftspark/venv/bin/pip install --constraint /src/constraints.txt \
      kopf kubernetes boto3 pydantic prometheus-client pyyaml
COPY pyproject.toml README.md /src/
COPY operator/ /src/operator/
RUN --mount=type=cache,id=pip,target=/root/.cache/pip --mount=type=secret,id=ca \
    /opt/ftspark/venv/bin/pip wheel --no-deps --wheel-dir /wheels /src

FROM ${BASE_IMAGE}
# A passwd entry for the uid: kopf names itself user@host, and getpass.getuser() fails without one.
RUN groupadd --gid 10001 ftspark \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin ftspark
ENV PATH=/opt/ftspark/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1
COPY --from=venv /opt/ftspark/venv /opt/ftspark/venv
COPY --from=venv /wheels/ /tmp/wheels/
RUN pip install --no-cache-dir --no-deps --no-index /tmp/wheels/*.whl && rm -rf /tmp/wheels
USER 10001:10001
ENTRYPOINT ["python", "-m", "ftspark.app.main"]
