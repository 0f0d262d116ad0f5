"""The ``recallatron`` command: run the system, administer it, and use it as a client.

Each subcommand lives with its own parser function and handler (``serve``, ``up``,
``admin_commands``, ``memory_commands``, ``capture_command``, ``curation_commands``, ``context_commands``,
``expiry_commands``, ``history_commands``, ``hook_command``, ``portability_commands``, ``legacy_import``,
``mcp_command``, ``web_command``, ``evaluate``, ``calibrate``, ``inject_eval``); this module only puts the
parsers together in the order ``--help`` lists them and calls the chosen handler. Nothing imports it.

Exit status 0 on success, 1 when a call fails (the gRPC status code name and message go to
stderr), 2 for bad command-line usage.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

# gRPC's fork handlers off before grpc is first imported: this process forks only to exec
# (pg_ctl, pg_dump, pg_restore, the services), and with them on, grpcio 1.81 and later can crash
# such a child before its exec (an epoll poller restarted in it: grpc/grpc#43055).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")


def parsers() -> tuple:
    """Every subcommand's parser function, in the order ``--help`` lists them. The command modules are
    imported here, not at the top: ``recallatron hook`` runs before every turn of a model, and
    ``main`` hands it to cli.hook_command before any of them (or the settings) is loaded."""
    from cli import (
        admin_commands,
        capture_command,
        context_commands,
        curation_commands,
        entity_commands,
        expiry_commands,
        history_commands,
        hook_command,
        legacy_import,
        memory_commands,
        portability_commands,
    )
    from cli.calibrate import calibrate_parser
    from cli.evaluate import eval_parser
    from cli.inject_eval import calibrate_inject_parser
    from cli.mcp_command import mcp_parser
    from cli.serve import serve_parser
    from cli.up import up_parser
    from cli.web_command import web_parser

    return (
        serve_parser,
        up_parser,
        admin_commands.workspace_parser,
        admin_commands.member_parser,
        admin_commands.status_parser,
        admin_commands.rebuild_parser,
        *memory_commands.PARSERS,
        capture_command.capture_parser,
        *entity_commands.PARSERS,
        *curation_commands.PARSERS,
        *context_commands.PARSERS,
        hook_command.hook_parser,
        *expiry_commands.PARSERS,
        mcp_parser,
        web_parser,
        history_commands.history_parser,
        portability_commands.export_parser,
        admin_commands.load_parser,
        portability_commands.import_parser,
        legacy_import.legacy_parser,
        eval_parser,
        calibrate_parser,
        calibrate_inject_parser,
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand; each leaf sets ``handler(args, settings) -> exit status``."""
    p = argparse.ArgumentParser(prog="recallatron", description="Durable memory for AI agents.")
    sub = p.add_subparsers(dest="command", required=True)
    for add in parsers():
        add(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``recallatron`` console script."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["hook"]:
        from cli import hook_command

        return hook_command.run(argv[1:])
    from servicekit import settings as settings_mod

    args = build_parser().parse_args(argv)
    # A command that only calls the gateway logs warnings only, from its first line on (the
    # services' own INFO lines are theirs; the command lowers the level again when it connects).
    quiet = getattr(args.handler, "quiet_logs", False)
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    try:
        return args.handler(args, settings_mod.load())
    except BrokenPipeError:
        # The reader of stdout went away (`recallatron recall ... | head`): stop quietly, as other Unix
        # tools do. stdout is pointed at /dev/null so the interpreter's final flush does not raise
        # again (the recipe of the Python docs, "Note on SIGPIPE").
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command killed by a broken pipe
    except KeyboardInterrupt:  # Ctrl-C: one line, not a traceback of whatever call was waiting
        print("recallatron: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT


if __name__ == "__main__":
    sys.exit(main())
