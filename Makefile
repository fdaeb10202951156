# ftspark — the two commands: `make demo` and `make test`. See README.md.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export PYTHONPATH := $(CURDIR)/operator:$(CURDIR)/tools

.PHONY: help demo test verify bench soak lint types unit integration cluster-bin helm-bin alert-rules-bin s3-bin spark-jars local-recovery-jar class-data images own-image dev-cluster crds argocd deploy docs lock clean

help:
	@echo "make demo         start a local control plane + S3 and run ftspark through it"
	@echo "make test         lint, types and the whole test suite (what CI runs)"
	@echo "make cluster-bin  build etcd/kube-* once into ~/.cache/ftspark (cached by version)"
	@echo "make s3-bin       build the S3 server (Versity S3 Gateway) once into ~/.cache/ftspark"
	@echo "make images       the operator, Spark, S3 server and pause images as OCI archives, without Docker (cached)"
	@echo "make own-image    docs/own-image.md's user-style image on the other Spark line (the real-node tier's)"
	@echo "make dev-cluster  a local control plane in the foreground, with a kubeconfig"
	@echo "make bench        the operator's figures (1,000 jobs, failover, restarts, API calls; 100 to 5,000 jobs); recoveries on real nodes (driver kills beside plain Spark, node losses); S3 requests and seconds of a checkpoint, S3 10 ms away; task-local recovery's"
	@echo "make soak         two streaming jobs through 100 seeded random faults, exactly once (SOAK_FAULTS, SOAK_SEED)"
	@echo "make verify       the proofs too long for CI: make soak, then make bench (docs/testing.md says which change needs it)"
	@echo "make crds         regenerate crds/, the chart's copy and job policy, docs/reference.md, docs/troubleshooting.md and deploy/ from the models"

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip==25.3
	# pyspark 4.0.x comes as an sdist; pip keeps the built wheel in its cache for the next install.
	$(VENV)/bin/pip install --quiet --constraint constraints.txt --editable '.[operator,driver,spark,dev]'
	touch $@

venv: $(VENV)/.installed

cluster-bin:
	tools/kubebin/build.sh

helm-bin:
	tools/helm/build.sh

# The chart's alert rule tests' runner (tests/helm/alert_rules.test.yaml), cached by source hash.
alert-rules-bin:
	tools/alertrules/build.sh

# The S3 server of every tier and the demo (Versity S3 Gateway), cached by version.
s3-bin:
	tools/versitygw/build.sh

spark-jars:
	tools/spark_jars.sh

# Task-local recovery's FileSystem (jvm/local-recovery): Maven build with its JUnit tests, cached by source hash.
local-recovery-jar:
	tools/local_recovery_jar.sh

# The driver's and the executor's JVM class-data archives for this machine's classpath
# (ftspark/runtime/classdata.py), without and with the local-recovery jar; each named by the jars it was made
# with, so made again only when they change.
class-data: $(VENV)/.installed spark-jars local-recovery-jar
	for role in "" --executor; do \
	  $(PY) -m ftspark.runtime.classdata $$role --jars-dir "$$(tools/spark_jars.sh)" && \
	  $(PY) -m ftspark.runtime.classdata $$role --jars-dir "$$(tools/spark_jars.sh)" \
	    --with-jar "$$(tools/local_recovery_jar.sh)" || exit 1; \
	done

# The images as OCI archives in ~/.cache/ftspark/images, built with buildah on a Debian base from mmdebstrap;
# prints `<reference> <archive>` per image (for `ctr -n k8s.io images import`).
images: spark-jars local-recovery-jar
	tools/images/build.sh

# The real-node tier's user-style image (docs/own-image.md): examples/own-image/Dockerfile on a plain Spark of
# the other line of spark-lines.txt, cached like the others.
own-image: spark-jars
	tools/images/build.sh own-image >/dev/null

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check operator tests tools e2e
	$(VENV)/bin/ruff format --check operator tests tools e2e
	$(VENV)/bin/lint-imports

types: $(VENV)/.installed
	$(VENV)/bin/mypy

# Lint and types first: a style error fails in a minute, not after the builds. Then the builds two at a time,
# the two longest first (cold: kubebin's Go build beside the images, each about 8-10 min; the small Go builds
# and the class data follow in whichever slot frees first; own-image last, as it waits for the image cache's
# lock). images: the real-node tier runs them (tests/realnodes); building them first keeps pytest's timings
# honest.
test: $(VENV)/.installed lint types
	$(MAKE) --no-print-directory -j2 cluster-bin images s3-bin helm-bin alert-rules-bin class-data own-image
	$(PY) -m pytest

# What is too long for the gate, one after the other (each prints its tables).
verify: soak bench

unit: $(VENV)/.installed
	$(PY) -m pytest tests/unit

integration: $(VENV)/.installed cluster-bin s3-bin
	$(PY) -m pytest tests/integration tests/contract

# The long soak; CI runs a short seeded one (e2e/test_soak.py). Prints the table of faults and figures.
SOAK_FAULTS ?= 100
SOAK_SEED ?= 14
soak: $(VENV)/.installed cluster-bin s3-bin spark-jars
	$(PY) -m ftspark_dev.scenarios.soak --faults $(SOAK_FAULTS) --seed $(SOAK_SEED)

crds: $(VENV)/.installed helm-bin
	$(PY) -m ftspark.crd FaultTolerantSparkJob > crds/ftspark.io_faulttolerantsparkjobs.yaml
	$(PY) -m ftspark.crd ScheduledSparkJob > crds/ftspark.io_scheduledsparkjobs.yaml
	cp crds/*.yaml helm/ftspark-operator/crds/
	$(PY) -m ftspark.admission > helm/ftspark-operator/templates/job-policy.yaml
	$(PY) -m ftspark_dev.generate.reference
	$(PY) -m ftspark_dev.generate.troubleshooting
	$(PY) -m ftspark_dev.generate.bundle "$$(tools/helm/build.sh)"

dev-cluster: $(VENV)/.installed cluster-bin
	$(PY) -m ftspark_dev.cluster

# Recoveries on real nodes (root, like the real-node tier): driver kills beside plain Spark and node losses
# with the test plane's 20 s node grace period, then node losses with Kubernetes' default, 50 s.
bench: $(VENV)/.installed cluster-bin s3-bin spark-jars local-recovery-jar class-data images helm-bin
	$(PY) -m ftspark_dev.benches.operator_figures --curve 100,5000
	$(PY) -m ftspark_dev.scenarios.recovery --nodes real --kills 5 --node-losses 3
	$(PY) -m ftspark_dev.scenarios.recovery --nodes real --kills 0 --node-losses 3 --silent-node-losses 3 --node-grace 50
	$(PY) -m ftspark_dev.benches.checkpoint_requests --delays 0,10 --batches 12 --restarts 3
	$(PY) -m ftspark_dev.benches.local_recovery --keys 2000000 --payload 200 --files 8
	$(PY) -m ftspark_dev.worlds.local_recovery --keys 2000000 --payload 200 --files 8

demo: $(VENV)/.installed cluster-bin helm-bin s3-bin spark-jars
	$(PY) -m ftspark_dev.scenarios.demo

deploy: $(VENV)/.installed helm-bin
	$(PY) -m ftspark_dev.generate.bundle "$$(tools/helm/build.sh)"

docs: $(VENV)/.installed
	$(PY) -m ftspark_dev.generate.reference
	$(PY) -m ftspark_dev.generate.troubleshooting

argocd: $(VENV)/.installed
	$(PY) -m ftspark_dev.generate.argocd

lock: $(VENV)/.installed
	{ echo "# Exact versions for every install (make venv). Regenerate with: make lock"; \
	  $(VENV)/bin/pip freeze --exclude-editable | grep -v '^ftspark'; } > constraints.txt

clean:
	rm -rf $(VENV) .dev-cluster .demo .mypy_cache .ruff_cache .pytest_cache
