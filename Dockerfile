# The operator image (not buildable on the development machines, which have no Docker engine; CI elsewhere).
FROM python:3.11-slim-bookworm
WORKDIR /app
COPY pyproject.toml constraints.txt README.md ./
COPY operator/ operator/
# The operator needs no Spark: install its package without pyspark to keep the image small.
RUN pip install --no-cache-dir --constraint constraints.txt kopf kubernetes boto3 pydantic prometheus-client pyyaml \
 && pip install --no-cache-dir --no-deps .
USER 10001:10001
ENTRYPOINT ["python", "-m", "ftspark.app.main"]
