"""What every gateway command does alike: the caller's credential from the options, the call
through ``client.Gateway`` with a failure printed, and output as text or JSON."""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

import grpc
from google.protobuf import json_format

from client import Gateway
from servicekit.errors import error_info
from servicekit.settings import Settings


def member_token(args) -> str:
    """The caller's token from --token or RECALLATRON_TOKEN; exits with a message when neither is set."""
    token = args.token or os.environ.get("RECALLATRON_TOKEN")
    if not token:
        raise SystemExit("no token: pass --token or set RECALLATRON_TOKEN (`recallatron member add` prints one)")
    return token


def operator_token(args, default_path: Path) -> str:
    """The operator credential from --operator-token or the data folder (``default_path``, absolute:
    the message names the very file read, whatever the current folder)."""
    if getattr(args, "operator_token", None):
        return args.operator_token
    try:
        return default_path.read_text().strip()
    except OSError as exc:
        raise SystemExit(
            f"no operator credential at {default_path} ({exc.strerror}): pass --operator-token, or run "
            "`recallatron up` with the same RECALLATRON_HOME (it writes the file there; "
            "RECALLATRON_OPERATOR_TOKEN_FILE names another)"
        ) from None


def to_json(message) -> str:
    """Protobuf JSON with proto field names and every field, defaults included."""
    return json_format.MessageToJson(
        message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True, indent=2
    )


def emit(message, as_json: bool, text: str) -> None:
    """Prints ``message`` as protobuf JSON, or ``text`` for people."""
    print(to_json(message) if as_json else text)


# The flags that set a request field the gateway may name in an error, where the names differ.
FLAGS = {
    "occurred_after": "--after",
    "occurred_before": "--before",
    "start_time": "--since/--after",
    "end_time": "--until/--before",
    "reference_time": "--reference-time",
    "as_of": "--as-of",
    "known_at": "--known-at",
    "valid_from": "--valid-from",
    "occurred_at": "--occurred-at",
    "at": "--at",
}


def fail(exc: grpc.RpcError) -> int:
    """Prints the status code name and message of a failed call, and the flag behind the field it
    names when they differ; returns exit status 1."""
    info = error_info(exc)
    flag = FLAGS.get(info.metadata.get("field", "")) if info is not None else None
    hint = f" (the field of {flag})" if flag else ""
    print(f"{exc.code().name}: {exc.details()}{hint}", file=sys.stderr)
    return 1


def workspace_problem(exc: grpc.RpcError, workspace: str) -> str | None:
    """The message, naming the id, for a call about ``workspace`` that failed NOT_FOUND (the store
    answers a missing and a malformed workspace id alike: NOT_FOUND, store_service/control/plane.py), else
    None. For commands whose first call is the workspace's (import, import-legacy)."""
    if exc.code() != grpc.StatusCode.NOT_FOUND:
        return None
    return f"--workspace {workspace}: no such workspace ({exc.code().name}: {exc.details()})"


def dump(obj) -> str:
    """Plain JSON for non-protobuf output."""
    return json.dumps(obj, indent=2, sort_keys=True)


def gateway_command(
    handler: Callable[[Gateway, argparse.Namespace], int],
) -> Callable[[argparse.Namespace, Settings], int]:
    """Turns ``handler(gateway, args) -> exit status`` into a command ``(args, settings) -> exit status``.

    The command connects to --gateway (default ``settings.gateway_addr``) with the operator
    credential when the parser has --operator-token, else with the member token (SystemExit with a
    message when there is none); only warnings are logged; a failed call prints its status code name
    and message to stderr and returns 1 (``fail``); the channel is always closed."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace, settings: Settings) -> int:
        logging.getLogger().setLevel(logging.WARNING)
        operator = "operator_token" in vars(args)
        token = operator_token(args, settings.operator_token_path) if operator else member_token(args)
        gw = Gateway(args.gateway or settings.gateway_addr, token)
        try:
            return handler(gw, args)
        except grpc.RpcError as exc:
            return fail(exc)
        finally:
            gw.close()

    run.quiet_logs = True  # main() logs warnings only from the start (see cli.main)
    return run
