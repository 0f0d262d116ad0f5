"""``python -m tools.chaos``: the chaos run (see ``tools/chaos/__init__.py``); exit status 1 when a
check failed."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from tools.chaos import run, table
from tools.chaos.stack import TARGETS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.chaos", description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0, help="load before and after each kill (default 20)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent writers, each its own member (default 8)")
    parser.add_argument("--targets", default=",".join(TARGETS), help=f"kill order (default {','.join(TARGETS)})")
    parser.add_argument("--rounds", type=int, default=1, help="times through the targets (default 1)")
    parser.add_argument("--home", type=Path, help="data folder of the stack (default: a temporary one, removed)")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    if not targets or set(targets) - set(TARGETS) or args.seconds <= 0 or args.clients < 1 or args.rounds < 1:
        parser.error(f"--targets takes some of {','.join(TARGETS)}; --seconds, --clients and --rounds must be positive")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    phases = run(args.seconds, args.clients, targets, args.rounds, args.home)
    print(table(phases))
    if args.json:
        print(json.dumps([p.as_json() for p in phases], indent=2))
    failed = [p.target for p in phases if not p.ok]
    print("chaos: every check passed" if not failed else f"chaos: checks FAILED after killing {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
