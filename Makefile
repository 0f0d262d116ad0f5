# Recallatron: `make demo` runs the main job on real data; `make test` runs the tests.
PY := .venv/bin/python
PIP := .venv/bin/pip
DATA ?= ../shared/eval/locomo/conv-26

.PHONY: setup proto proto-check demo test clean

setup: .venv/.installed

.venv/.installed: requirements.txt requirements-dev.txt pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PIP) install --quiet --disable-pip-version-check -r requirements-dev.txt
	$(PIP) install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

# The one pinned command that generates the Python protobuf code into gen/ (committed).
proto: setup
	$(PY) -m tools.protogen

# Fails when gen/ is stale against proto/.
proto-check: setup
	$(PY) -m tools.protogen --check

demo: setup
	$(PY) -m cli.demo --data $(DATA)

test: setup proto-check
	$(PY) -m pytest -q tests

clean:
	rm -rf .venv .recallatron
