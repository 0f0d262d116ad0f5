"""The ``recallatron`` command line run in this process, for tests: ``recallatron(*argv, env=...)``
calls ``cli.main.main(argv)`` and answers what ``subprocess.run(..., capture_output=True, text=True)``
answered (a ``CompletedProcess`` with the exit status, stdout and stderr), without starting an
interpreter and importing grpc, protobuf and pydantic again for every call (about 1-2 s each here).

This is the one module allowed to import ``cli.main`` (tests/test_cli_imports.py): it is the command
line's entry point, and tests use it the way the console script does.

What a process would have kept to itself is set for the call and put back after it: the variables
the command reads (``RECALLATRON_*`` and ``DATABASE_URL``) are exactly ``env``'s, the settings are
parsed afresh (``settings.load`` caches them), stdin is empty (or ``input``), stdout and stderr are
captured, the root logger's handlers and level are the command's own (``main`` configures logging
to stderr, and a gateway command lowers it to warnings), and an uncaught exception prints its
traceback to stderr with exit status 1, as the interpreter does.

Tests that need a real separate process keep ``subprocess``:
- tests/test_cli.py ``test_the_console_script_runs`` runs the installed ``recallatron`` script (the
  entry point itself);
- ``recallatron up`` and ``recallatron serve`` (signal handlers, child processes, a process to kill
  or stop, settings read at start-up: tests/conftest.py, test_cli.py, test_startup.py, test_logs.py,
  test_signals.py, test_lifecycle_signals.py, test_deploy.py);
- output into a closed pipe (test_cli.py: the BrokenPipeError path points the process's stdout at
  /dev/null);
- ``recallatron hook`` (test_hook.py): a process Claude Code starts per turn, with a deadline on a
  stdin that may never close, and a check of what the process imports;
- ``recallatron mcp`` over stdio or HTTP (test_mcp.py, test_mcp_http.py, test_render_hostile.py): a
  server that an MCP client starts and talks to as a process;
- ``recallatron import-legacy`` killed half way, two runs at once, and a bounded wait on a read that
  never ended (test_import_legacy.py).
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import traceback
from contextlib import contextmanager

from cli import main as cli_main
from servicekit import settings


def command_variables(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` the command line reads: RECALLATRON_* and DATABASE_URL."""
    return {k: v for k, v in env.items() if k.startswith("RECALLATRON_") or k == "DATABASE_URL"}


@contextmanager
def command_environment(env: dict[str, str]):
    """os.environ with its command variables replaced by ``env``'s for the block, then restored. Only
    the variables that differ are set or removed (the in-process services' threads read the rest)."""
    saved = dict(os.environ)
    set_environment(saved, command_variables(saved) | command_variables(env), command_variables(env))
    settings.load.cache_clear()
    try:
        yield
    finally:
        set_environment(dict(os.environ), set(os.environ) | set(saved), saved)
        settings.load.cache_clear()


def set_environment(now: dict[str, str], names, wanted: dict[str, str]) -> None:
    """Makes each of ``names`` in os.environ what it is in ``wanted`` (absent when not there)."""
    for name in names:
        if name not in wanted:
            os.environ.pop(name, None)
        elif now.get(name) != wanted[name]:
            os.environ[name] = wanted[name]


@contextmanager
def own_logging():
    """The root logger without handlers for the block (so ``main``'s basicConfig logs to the captured
    stderr, as in a process), then its handlers and level as they were."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers = []
    try:
        yield
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers = handlers
        root.setLevel(level)


def text_stream(errors: str) -> io.TextIOWrapper:
    """A UTF-8 text stream over bytes, as a process's piped stdout or stderr (with ``.buffer``)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors=errors, newline="\n", write_through=True)


def read_back(stream: io.TextIOWrapper) -> str:
    """What was written to ``stream``, decoded as ``subprocess.run(text=True)`` decodes a pipe
    (universal newlines)."""
    stream.flush()
    data = stream.buffer.getvalue()
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="strict", newline=None).read()


def exit_status(exc: SystemExit, stderr) -> int:
    """The status a process would exit with on ``exc`` (a message goes to stderr and means 1)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=stderr)
    return 1


def recallatron(*argv: str, env: dict[str, str] | None = None, input: str = "") -> subprocess.CompletedProcess:
    """``recallatron ARGV`` run in this process with the command variables of ``env`` (none when
    None) and ``input`` on stdin; its exit status, stdout and stderr (text)."""
    stdout, stderr = text_stream("surrogateescape"), text_stream("backslashreplace")
    stdin = io.TextIOWrapper(io.BytesIO(input.encode()), encoding="utf-8")
    streams = sys.stdin, sys.stdout, sys.stderr
    with command_environment(env or {}), own_logging():
        sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
        try:
            code = exit_status(SystemExit(cli_main.main(list(argv))), stderr)
        except SystemExit as exc:
            code = exit_status(exc, stderr)
        except Exception:
            traceback.print_exc(file=stderr)
            code = 1
        finally:
            sys.stdin, sys.stdout, sys.stderr = streams
    return subprocess.CompletedProcess(["recallatron", *argv], code, read_back(stdout), read_back(stderr))


def at_gateway(
    gateway: str, *argv: str, token: str | None = None, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``recallatron ARGV --gateway GATEWAY`` in this process, with ``env`` and member ``token`` as
    RECALLATRON_TOKEN (when not None); with ``check``, asserts it exited 0 (showing its stderr)."""
    out = recallatron(
        *argv, "--gateway", gateway, env=(env or {}) | ({} if token is None else {"RECALLATRON_TOKEN": token})
    )
    if check:
        assert out.returncode == 0, out.stderr
    return out
