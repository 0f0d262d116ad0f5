"""Command-line pieces shared by the subcommands: argument types and the gateway options (the enum
choices themselves are ``client.choices``)."""

from __future__ import annotations

import argparse
import datetime

from google.protobuf import timestamp_pb2

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


def iso_instant(text: str) -> datetime.datetime:
    """An ISO 8601 time as an aware UTC datetime (UTC when it names no offset); ValueError naming the
    rule for anything else, an offset beyond a day or one that moves it outside years 1..9999 included.
    The one reading of a time the command line has: its flags, a dataset's ``occurred_at``, an eval
    question's ``reference_time``."""
    try:
        if "\x00" in text:
            raise ValueError("NUL")
        when = datetime.datetime.fromisoformat(text.strip())
        # OverflowError: an offset that moves the instant outside years 1..9999 in UTC.
        return (when if when.tzinfo else when.replace(tzinfo=datetime.UTC)).astimezone(datetime.UTC)
    except (ValueError, OverflowError):
        raise ValueError(
            f"not an ISO 8601 time between years 1 and 9999: {text!r} (e.g. 2026-03-02T08:00:00Z)"
        ) from None


def instant(text: str) -> timestamp_pb2.Timestamp:
    """The argparse type of a time (``iso_instant``); a usage error otherwise."""
    out = timestamp_pb2.Timestamp()
    try:
        out.FromDatetime(iso_instant(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return out


def valid_from_option(
    parser: argparse.ArgumentParser,
    what: str = "when the claim became true",
    default: str = "--occurred-at, else the time of writing",
) -> None:
    """``--valid-from T`` (a write's ``valid_from``)."""
    parser.add_argument(
        "--valid-from",
        type=instant,
        metavar="T",
        help=f"{what}: an ISO 8601 date or date-time, UTC unless it names an offset (default: {default})",
    )


class Once(argparse.Action):
    """Stores an option given under several names (``--since``/``--after``) and refuses it given twice:
    otherwise the last one would win without a word."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{' and '.join(self.option_strings)} name one option: give it once")
        setattr(namespace, self.dest, values)


def window_options(parser: argparse.ArgumentParser, what: str = "memories said") -> None:
    """``--after`` and ``--before``: a time window (``occurred_after`` and ``occurred_before``)."""
    parser.add_argument(
        "--after",
        type=instant,
        help=f"only {what} at or after this time: an ISO 8601 date or date-time, UTC unless it names an offset",
    )
    parser.add_argument("--before", type=instant, help=f"only {what} before this time")
    parser.add_argument(
        "--as-of",
        type=instant,
        metavar="T",
        help="what held at T: memories whose validity covers T, superseded and invalidated ones included",
    )
    parser.add_argument(
        "--known-at",
        type=instant,
        metavar="T",
        help="what was known at T: memories written by then and current then, with their text of then",
    )


def in_time(args: argparse.Namespace) -> dict:
    """The window fields of ``window_options`` as request keyword arguments (unset ones left out)."""
    fields = {
        "occurred_after": args.after,
        "occurred_before": args.before,
        "as_of": args.as_of,
        "known_at": args.known_at,
    }
    return {name: value for name, value in fields.items() if value is not None}
