"""``recallatron hook claude-code``: per-turn recall as a Claude Code command hook (docs/agents.md,
"Claude Code hooks").

Claude Code runs the command with the hook's JSON on standard input (``hook_event_name``,
``session_id``, ``cwd``, ``transcript_path``; ``prompt`` for UserPromptSubmit, ``source`` for
SessionStart). What a hook prints on standard output with exit status 0 as
``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}`` is put in front of the
model; exit status 2 would block the user's prompt and any other would be reported as a failure, so
this command exits 0 whatever happens:

- UserPromptSubmit: the gateway's PromptContext of the prompt for RECALLATRON_TOKEN's member, with
  the session id as the session key (a memory already shown in the session at its current revision is
  not shown again); the block when it is not empty, else nothing.
- SessionStart: the context bundle (GetContext) when the workspace has it on, else nothing.
- any other event: nothing.

On any failure (input that is not the documented JSON, no token, a refused token, a gateway that is
down or slower than the deadline, a bad option) it prints nothing and appends one JSON line to
``$RECALLATRON_HOME/logs/hook.log``. One deadline (``--timeout``, RECALLATRON_HOOK_TIMEOUT_SECONDS,
default 1.5 s) covers reading the input, connecting and the call.

It runs before every turn, so it loads only what it needs: ``cli.main`` hands ``hook`` to ``run``
before importing any other command or the settings (pydantic), and this module imports gRPC, the
gateway's generated messages and a few small modules of ours, nothing of the store or the model.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import select
import sys
import time
from pathlib import Path

import grpc
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc

from cli import user_files
from client import bearer
from client.choices import PURPOSES
from servicekit import limits

# Most bytes of hook input read: Claude Code's input is a few hundred bytes plus the prompt, whose
# recall text is at most MAX_QUERY_CHARS characters (4 bytes each at most in UTF-8) anyway.
MAX_INPUT_BYTES = 1024 * 1024
# Claude Code shows a hook's added context whole up to about 10,000 characters (a preview beyond),
# so the block never exceeds it: at most 4 characters a token (servicekit/render.py), 2,500 tokens.
MAX_CONTEXT_CHARS = 10_000
DEFAULT_BUDGET, MIN_BUDGET, MAX_BUDGET = 600, 200, MAX_CONTEXT_CHARS // 4
DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS = 1.5, 60.0
TIMEOUT_VARIABLE = "RECALLATRON_HOOK_TIMEOUT_SECONDS"
# The longest log line's message: enough to say what failed, never the prompt.
MAX_MESSAGE_CHARS = 300
EVENTS = ("UserPromptSubmit", "SessionStart")


class Failure(Exception):
    """Why the hook added nothing: one log line, no output."""


class _Parser(argparse.ArgumentParser):
    """A usage error is a Failure, not exit status 2 (which would block the user's prompt)."""

    def error(self, message: str):
        raise Failure(f"usage: {message}")


def hook_parser(sub: argparse._SubParsersAction) -> None:
    """``recallatron hook claude-code``."""
    hook = sub.add_parser(
        "hook",
        help="harness hooks: recall for every user turn (Claude Code)",
        description="Run by an agent harness; see docs/agents.md, 'Claude Code hooks'.",
    )
    kinds = hook.add_subparsers(dest="harness", required=True)
    cc = kinds.add_parser(
        "claude-code",
        help="Claude Code's command hook: UserPromptSubmit and SessionStart",
        description="Reads the hook's JSON on stdin; prints hookSpecificOutput.additionalContext, or "
        "nothing; always exits 0 (failures go to $RECALLATRON_HOME/logs/hook.log).",
    )
    # Values are checked by ``Options.of`` (a bad one is logged), not by argparse.
    cc.add_argument("--budget", default=str(DEFAULT_BUDGET), help=f"most tokens added, {MIN_BUDGET}..{MAX_BUDGET}")
    cc.add_argument("--purpose", default="conversation", help=f"one of {', '.join(PURPOSES)}")
    cc.add_argument(
        "--timeout",
        default=None,
        help=f"seconds for the whole call, up to {MAX_TIMEOUT_SECONDS:g} (default {TIMEOUT_VARIABLE}, else "
        f"{DEFAULT_TIMEOUT_SECONDS})",
    )
    cc.add_argument("--gateway", default=None, help="gateway address (default RECALLATRON_GATEWAY_ADDR)")
    cc.set_defaults(handler=lambda args, _settings=None: claude_code(args))


class Options:
    """The checked options and environment of one hook call."""

    def __init__(self, budget: int, purpose: int, timeout: float, gateway: str, token: str) -> None:
        self.budget, self.purpose, self.timeout, self.gateway, self.token = budget, purpose, timeout, gateway, token

    @classmethod
    def of(cls, args: argparse.Namespace, environ=os.environ) -> Options:
        """Failure naming the option or variable that is wrong."""
        try:
            budget = int(args.budget)
        except ValueError:
            raise Failure(f"--budget: not an integer: {args.budget[:40]!r}") from None
        if not MIN_BUDGET <= budget <= MAX_BUDGET:
            raise Failure(f"--budget: {budget} is not in {MIN_BUDGET}..{MAX_BUDGET}")
        if args.purpose not in PURPOSES:
            raise Failure(f"--purpose: unknown {args.purpose[:40]!r}; choose from {', '.join(PURPOSES)}")
        if args.timeout is not None:
            timeout = _seconds("--timeout", args.timeout)
        elif environ.get(TIMEOUT_VARIABLE):
            timeout = _seconds(TIMEOUT_VARIABLE, environ[TIMEOUT_VARIABLE])
        else:
            timeout = DEFAULT_TIMEOUT_SECONDS
        token = environ.get("RECALLATRON_TOKEN", "")
        if not token:
            raise Failure("no token: set RECALLATRON_TOKEN in the hook's environment")
        # gRPC refuses such metadata with an error that quotes it: said here without the token.
        if not (token.isascii() and token.isprintable() and " " not in token and len(token) <= 4096):
            raise Failure("RECALLATRON_TOKEN is not a token (spaces, control or non-ASCII characters, or too long)")
        gateway = args.gateway or environ.get("RECALLATRON_GATEWAY_ADDR") or limits.GATEWAY_ADDR
        return cls(budget, PURPOSES[args.purpose], timeout, gateway, token)


def _seconds(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise Failure(f"{name}: not a number of seconds: {text[:40]!r}") from None
    if not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT_SECONDS):
        raise Failure(f"{name}: {text[:40]!r} is not in (0, {MAX_TIMEOUT_SECONDS:g}] seconds")
    return value


def _read(stream, deadline: float | None) -> bytes:
    """At most MAX_INPUT_BYTES + 1 bytes of ``stream``, up to its end or ``deadline`` (monotonic): a
    harness that never closes the hook's input must not hold the user's turn. A stream without a
    file descriptor (a test's bytes) is read as it is."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return stream.read(MAX_INPUT_BYTES + 1)
    chunks, size = [], 0
    while size <= MAX_INPUT_BYTES:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and (left <= 0 or not select.select([fd], [], [], left)[0]):
            raise Failure("the input was not closed before the deadline")
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_input(stream, deadline: float | None = None) -> dict:
    """The hook's JSON object from ``stream`` (bytes), reading at most MAX_INPUT_BYTES + 1 bytes, by
    ``deadline``."""
    raw = _read(stream, deadline)
    if len(raw) > MAX_INPUT_BYTES:
        raise Failure(f"input over {MAX_INPUT_BYTES} bytes")
    if not raw.strip():
        raise Failure("empty input")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise Failure(f"input is not JSON: {str(exc)[:100]}") from None
    if not isinstance(data, dict):
        raise Failure(f"input is a JSON {type(data).__name__}, not an object")
    return data


def _string(data: dict, field: str) -> str:
    value = data.get(field)
    if not isinstance(value, str):
        raise Failure(f"{field}: {'missing' if value is None else 'a ' + type(value).__name__ + ', not a string'}")
    return value


def respond(data: dict, options: Options, deadline: float) -> str | None:
    """The text to print for the hook input ``data`` (None: nothing). Failure when the call fails."""
    event = _string(data, "hook_event_name")
    if event not in EVENTS:
        raise Failure(f"event {event[:40]!r} is not one this hook handles ({', '.join(EVENTS)})")
    if event == "UserPromptSubmit":
        prompt = _string(data, "prompt")
        session = _string(data, "session_id")
        if not prompt.strip():
            return None
        # A longer prompt is recalled with its beginning rather than refused (a question's limit).
        request = g.PromptContextRequest(
            text=prompt[: limits.MAX_QUERY_CHARS],
            purpose=options.purpose,
            token_budget=options.budget,
            session_key=session,
        )
        text = _call(options, deadline, "PromptContext", request).text
    else:
        request = g.GetContextRequest(purpose=options.purpose, token_budget=options.budget)
        response = _call(options, deadline, "GetContext", request)
        text = response.text if response is not None else ""
    if not text:
        return None
    if len(text) > MAX_CONTEXT_CHARS:
        raise Failure(f"the gateway's block has {len(text)} characters, over {MAX_CONTEXT_CHARS}")
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}})


def _call(options: Options, deadline: float, method: str, request):
    """The gateway's answer to ``method``; None for a context bundle the workspace has off."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise Failure("the deadline passed before the call")
    channel = grpc.insecure_channel(options.gateway, options=[("grpc.enable_retries", 0)])
    try:
        stub = gateway_pb2_grpc.MemoryServiceStub(channel)
        return getattr(stub, method)(request, timeout=left, metadata=bearer(options.token))
    except grpc.RpcError as exc:
        if method == "GetContext" and _reason(exc) == "CONTEXT_BUNDLE_OFF":
            return None
        raise Failure(f"{method}: {exc.code().name}: {(exc.details() or '')[:200]}") from None
    finally:
        channel.close()


def _reason(exc: grpc.RpcError) -> str | None:
    """The ErrorInfo reason of a failed call (servicekit.errors.error_info reads it the same way, but
    importing that module loads the database driver)."""
    if exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
        return None
    from google.rpc import error_details_pb2
    from grpc_status import rpc_status

    status = rpc_status.from_call(exc)
    for detail in status.details if status else ():
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            return info.reason
    return None


def log_path(environ=os.environ) -> Path:
    """Where failures are logged: ``$RECALLATRON_HOME/logs/hook.log``."""
    return Path(environ.get("RECALLATRON_HOME") or limits.HOME) / "logs" / "hook.log"


def _log(event: object, session: object, message: str, started: float) -> None:
    """One JSON line; if even that fails, the line goes to stderr (never stdout, which the model reads)."""
    line = json.dumps(
        {
            "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds"),
            "command": "hook claude-code",
            "event": event[:MAX_MESSAGE_CHARS] if isinstance(event, str) else None,
            "session_id": session[:MAX_MESSAGE_CHARS] if isinstance(session, str) else None,
            "error": message[:MAX_MESSAGE_CHARS],
            "seconds": round(time.monotonic() - started, 3),
        }
    )
    try:
        user_files.append_private(log_path(), line)
    except OSError as exc:
        print(f"{line} (not logged: {exc.strerror})", file=sys.stderr)


def claude_code(args: argparse.Namespace, stdin=None, stdout=None) -> int:
    """Handles one hook call; always 0."""
    started = time.monotonic()
    data: dict = {}
    try:
        try:
            timeout = Options.of(args).timeout
        except Failure:  # reported below, once the input says which event it was
            timeout = DEFAULT_TIMEOUT_SECONDS
        data = read_input(stdin if stdin is not None else sys.stdin.buffer, started + timeout)
        options = Options.of(args)
        output = respond(data, options, started + options.timeout)
        if output is not None:
            out = stdout if stdout is not None else sys.stdout
            out.write(output)
            out.flush()
    except Exception as exc:  # noqa: BLE001 - whatever fails, the user's turn goes on without memories
        message = str(exc) if isinstance(exc, Failure) else f"{type(exc).__name__}: {exc}"
        _log(data.get("hook_event_name"), data.get("session_id"), message, started)
    return 0


def parse(argv: list[str]) -> argparse.Namespace:
    """The arguments after ``recallatron hook``; Failure for a usage error."""
    parser = _Parser(prog="recallatron")
    hook_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["hook", *argv])


def run(argv: list[str]) -> int:
    """``recallatron hook ...`` as ``cli.main`` hands it over (without loading the other commands)."""
    started = time.monotonic()
    try:
        args = parse(argv)
    except Failure as exc:
        _log(None, None, str(exc), started)
        return 0
    return args.handler(args)
