# Recallatron: `make demo` runs the whole system on the demo conversation (demo/); `make test` runs the tests.
PY := .venv/bin/python
PIP := .venv/bin/pip
# The demo conversation, in the repository (demo/README.md: what it is, its source and licence).
DATA ?= demo

BUF_VERSION := 1.75.0
BUF := .tools/node_modules/.bin/buf
# format-N follows EXPORT_FORMAT in servicekit/embedding_input.py (default_path there).
ONNX_MODEL := .venv/share/recallatron/all-MiniLM-L6-v2/format-2/model.onnx

.PHONY: setup prometheus chromium kubectl proto proto-check proto-lint lint demo test check screenshots clean bench chaos

setup: .venv/.installed $(ONNX_MODEL) prometheus chromium kubectl

# promtool (the alert-rule checks in `make test`) and prometheus come from Debian's `prometheus`
# package, installed when promtool is missing: as root directly, otherwise through sudo.
# --no-install-recommends leaves out prometheus-node-exporter, which the project does not use.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
prometheus:
	@command -v promtool >/dev/null || { \
	  command -v apt-get >/dev/null || { echo "promtool missing and no apt-get: install Prometheus 2.x (promtool on PATH)" >&2; exit 1; }; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; }

# The web screen's browser tests (tests/test_web_*.py) drive Debian's `chromium` through Playwright for
# Python: Playwright cannot download its own browser here, so the system one is installed when missing.
chromium:
	@command -v chromium >/dev/null || { \
	  command -v apt-get >/dev/null || { echo "chromium missing and no apt-get: install Chromium (chromium on PATH)" >&2; exit 1; }; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; }

# The Kubernetes overlays (deploy/k8s/overlays) are rendered by `kubectl kustomize` in the tests
# (tests/test_deploy.py); Debian's kubectl (package kubernetes-client) is installed when missing.
kubectl:
	@command -v kubectl >/dev/null || { \
	  command -v apt-get >/dev/null || { echo "kubectl missing and no apt-get: install kubectl (kubectl on PATH)" >&2; exit 1; }; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client; }

.venv/.installed: requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PIP) install -qq --disable-pip-version-check -r requirements-dev.txt
	$(PIP) install -qq --disable-pip-version-check --no-deps -e .
	touch $@

# The bi-encoder exported to ONNX from the packaged MiniLM weights (offline, verified against
# sentence-transformers; a no-op when current). The embed service exports it at start if missing.
$(ONNX_MODEL): .venv/.installed embed_service/export_onnx.py servicekit/embedding_input.py
	$(PY) -m embed_service.export_onnx
	touch $@

# The one pinned command that generates the Python protobuf code into gen/ (committed).
proto: setup
	$(PY) -m tools.protogen

# Fails when gen/ is stale against proto/.
proto-check: setup
	$(PY) -m tools.protogen --check

# buf lint (STANDARD rules) and buf format on proto/; buf ships as an npm package.
$(BUF):
	mkdir -p .tools && cd .tools && npm install --silent --no-audit --no-fund @bufbuild/buf@$(BUF_VERSION) >/dev/null

proto-lint:
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory $(BUF) && $(BUF) lint && $(BUF) format -d --exit-code && echo "buf lint and format: clean"; \
	else echo "npm not found: buf lint skipped"; fi

demo: setup
	$(PY) -m cli.demo --data $(DATA)

# ruff lint and format check (configuration and justified exceptions in pyproject.toml).
lint: setup
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# Two workers (pytest-xdist), each test file whole on one worker (its module fixtures stay shared), in
# collection order (xdist would otherwise start with the files of most tests): the two halves of the
# leak property go first (tests/conftest.py), one to each worker, then the other files.
TEST_WORKERS ?= 2

test: setup proto-check proto-lint lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

# The inner loop (under 5 minutes here): lint, then every test that runs in this process (unit tests,
# the in-process stack, the command line in-process), the property tests at 20 examples; not those
# marked system, browser, cluster or slow (pyproject.toml). CI runs `make test`, which runs everything.
check: setup lint
	RECALLATRON_PROPERTY_EXAMPLES=20 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		-m "not system and not browser and not cluster and not slow" tests

# docs/screenshots/*.png (docs/web.md shows them), taken by the browser tests of the pages they show;
# a test run alone writes none.
screenshots: setup
	RECALLATRON_SCREENSHOTS=docs/screenshots $(PY) -m pytest -q -p no:cacheprovider tests/test_web_pages.py tests/test_web_review.py

# Recall latency, ingest and drain at 10k and 100k memories (bench/RESULTS.md); 1M: make bench SIZES=1000000
SIZES ?= 10000,100000
bench: setup
	$(PY) -m bench.run --sizes $(SIZES) $(BENCH_ARGS)

# kill -9 of the store, the gateway, the embed service and PostgreSQL, in turn, under a write load of 8
# clients on a `recallatron up` of its own; prints per kill what was acknowledged and found after the
# restart, what stayed forgotten, half-written rows and recovery times (tools/chaos). Exit 1 on a failed check.
CHAOS_SECONDS ?= 20
chaos: setup
	$(PY) -m tools.chaos --seconds $(CHAOS_SECONDS) $(CHAOS_ARGS)

clean:
	rm -rf .venv .recallatron
