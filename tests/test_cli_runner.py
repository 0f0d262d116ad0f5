"""tests/cli_runner.py, which runs the command line in the tests' process: it answers what a process
would have (exit status, stdout, stderr) and leaves this process as it found it."""

import logging
import os
import sys

from cli_runner import recallatron

from servicekit import settings


def test_usage_errors_and_exit_messages_read_as_from_a_process():
    out = recallatron("recall")
    assert (out.returncode, out.stdout) == (2, "") and out.stderr.startswith("usage: recallatron recall")
    # settings.load's SystemExit carries a message: a process prints it and exits 1.
    out = recallatron("web", env={"RECALLATRON_WEB_ADDR": "127.0.0.1:99999"})
    assert out.returncode == 1 and out.stderr.startswith("invalid configuration:\n  RECALLATRON_WEB_ADDR")


def test_a_run_leaves_the_environment_settings_streams_and_logging_as_they_were(monkeypatch):
    monkeypatch.setenv("RECALLATRON_WEB_ADDR", "127.0.0.1:8123")
    monkeypatch.delenv("RECALLATRON_HOME", raising=False)
    settings.load.cache_clear()
    cached = settings.load()
    root = logging.getLogger()
    before = dict(os.environ), root.handlers[:], root.level, (sys.stdin, sys.stdout, sys.stderr)
    # The run sees only its own command variables, parsed afresh: not this process's cached settings.
    out = recallatron("web", env={"RECALLATRON_WEB_ADDR": "nowhere", "RECALLATRON_HOME": "/nonexistent"})
    assert out.returncode == 1 and "RECALLATRON_WEB_ADDR" in out.stderr
    after = dict(os.environ), root.handlers[:], root.level, (sys.stdin, sys.stdout, sys.stderr)
    assert after == before
    assert settings.load() is not cached and settings.load().web_addr == "127.0.0.1:8123"
