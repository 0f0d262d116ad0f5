"""The benches (bench/RESULTS.md)."""

import os

# gRPC's fork handlers off before grpc is first imported, as in cli/main.py (why: there).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
