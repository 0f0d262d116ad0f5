"""Command-line pieces shared by the subcommands: argument types and the gateway options (the enum
choices themselves are ``client.choices``)."""

from __future__ import annotations

import argparse

from client.choices import PURPOSES


def purposes(text: str) -> list[int]:
    """The ``--purposes`` type: comma-separated purpose names -> proto values (blanks skipped, at least one name).

    argparse.ArgumentTypeError naming the unknown purpose and the choices (a usage error, exit 2)."""
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:  # "" or "," would otherwise mean the default, all four: a narrow token asked for, a wide one given
        raise argparse.ArgumentTypeError(f"names no purpose; choose from {', '.join(PURPOSES)}")
    try:
        return [PURPOSES[p] for p in names]
    except KeyError as exc:
        raise argparse.ArgumentTypeError(
            f"unknown purpose {exc.args[0]!r}; choose from {', '.join(PURPOSES)}"
        ) from None


def int32(text: str, bits: int = 32) -> int:
    """The argparse type of an integer the request carries as int32 (or as a signed integer of
    ``bits`` bits): a usage error outside its range (the server judges the range the field allows)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise argparse.ArgumentTypeError(f"out of range: {text}")
    return value


def int64(text: str) -> int:
    """The argparse type of an integer the request carries as int64 (a revision): as ``int32``."""
    return int32(text, 64)


def gateway_options(parser: argparse.ArgumentParser, operator: bool = False, purpose: bool = True) -> None:
    """Adds --gateway and --json, and either --operator-token (operator commands) or --token and, unless
    ``purpose`` is false (history commands: history has no purpose), --purpose.

    Whether a parsed command has ``operator_token`` decides which credential ``command.gateway_command`` sends."""
    parser.add_argument("--gateway", default=None, help="gateway address (default RECALLATRON_GATEWAY_ADDR)")
    parser.add_argument("--json", action="store_true", help="print the response as protobuf JSON")
    if operator:
        parser.add_argument("--operator-token", help="operator credential (default: the data folder's)")
    else:
        parser.add_argument("--token", help="member token (default RECALLATRON_TOKEN)")
        if purpose:
            parser.add_argument("--purpose", default="conversation", choices=PURPOSES)
