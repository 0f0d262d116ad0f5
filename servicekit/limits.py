"""Limits and defaults more than one service reads, each defined here once (README.md, "Configuration").

The gateway checks a request first and the store again (it may be called directly), so both read
the same numbers; the settings take their defaults from here, and the CLI may import them too.
"""

from __future__ import annotations

import datetime

# Width of an embedding: all-MiniLM-L6-v2 gives 384-d vectors (its model card), and the store's
# ``memory_embedding.embedding`` column is ``vector(384)`` (migrations/workspace/0001_initial.sql).
DIMENSIONS = 384

# Longest recall question, in characters (README.md, "Configuration": limits).
MAX_QUERY_CHARS = 32_768

# Results of a recall: ``top_k`` 0 means DEFAULT_TOP_K; above MAX_TOP_K is INVALID_ARGUMENT.
DEFAULT_TOP_K = 10
MAX_TOP_K = 200

# Fused candidates the permission walk visits at most, in fused order (README.md, "How recall
# works", step 5); the rank service's default and what the gateway asks for.
WALK_LIMIT = 500

# Rows each retrieval arm contributes before fusion (RECALLATRON_CANDIDATE_LIMIT), and the most a
# candidate query of the store returns.
CANDIDATE_LIMIT = 100
MAX_CANDIDATE_LIMIT = 1_000

# Seconds recall waits for the query embedding and for the re-ranker before it degrades
# (RECALLATRON_EMBED_DEADLINE_SECONDS, RECALLATRON_RERANK_DEADLINE_SECONDS).
EMBED_DEADLINE_SECONDS = 2.0
RERANK_DEADLINE_SECONDS = 3.0

# Seconds an internal call may take when its caller set no deadline and the call names no timeout of
# its own (RECALLATRON_INTERNAL_DEADLINE_SECONDS; servicekit.deadlines). Generous: an admin call such
# as RebuildEmbeddings over many workspaces is legitimately slow, and a frozen dependency is cut
# short by its circuit breaker after the first failures, not by this.
INTERNAL_DEADLINE_SECONDS = 30.0

# Seconds a service given SIGTERM lets its in-flight calls finish before it cancels them
# (RECALLATRON_SHUTDOWN_GRACE_SECONDS). Below `recallatron up`'s 15 s before SIGKILL, and below
# Kubernetes' default terminationGracePeriodSeconds of 30.
SHUTDOWN_GRACE_SECONDS = 10.0
# How long a connection closed for its age (RECALLATRON_GRPC_MAX_CONNECTION_AGE_SECONDS) lets the
# calls still on it finish: longer than any call the services make or accept, the longest being a
# workspace move (store_service/control/moves.py, COPY_TIMEOUT_SECONDS: an hour), so an age never
# cuts a call short.
MAX_CONNECTION_AGE_GRACE_SECONDS = 3_900.0

# Passed rows the cross-encoder scores (RECALLATRON_RERANK_TOP_N).
RERANK_TOP_N = 50

# Memories in one RememberBatch at most (the store checks it; imports send batches of this size).
MAX_REMEMBER_BATCH = 500

# History turns in one AppendHistory at most (the store checks it; imports send batches of this size).
MAX_HISTORY_BATCH = 500

# Texts in one call to the embed service at most (EmbedDocuments, EmbedQueries, Rerank), so also the
# most memories per embedding-job batch and the most rows the re-ranker scores.
MAX_EMBED_BATCH = 256

# Memories per embedding-job batch (RECALLATRON_EMBED_BATCH_SIZE).
EMBED_BATCH_SIZE = 128

# Largest gRPC message a server accepts and a channel sends or receives (gRPC's default is 4 MiB):
# a full RememberBatch, MAX_REMEMBER_BATCH bodies of up to 64 KiB, must fit.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# Between the services a message may be larger by what the gateway adds to what it accepted (the
# caller, derived fields): a request the gateway takes is never refused on the way to the store.
INTERNAL_MESSAGE_BYTES = MAX_MESSAGE_BYTES + 1024 * 1024

# Entities, and memories, in one ImportMemories call at most (AdminService; store_service/intake/imports.py).
MAX_IMPORT_BATCH = 500

# The data folder and the gateway's address when RECALLATRON_HOME / RECALLATRON_GATEWAY_ADDR are
# unset (the settings' defaults; `recallatron hook` reads them without loading the settings).
HOME = ".recallatron"
GATEWAY_ADDR = "localhost:50051"

# A body of at most 64 KiB of UTF-8 bounds one memory's analysis, postings and embedding input; a
# title and a request id are counted in characters. The store refuses more; a client checks first.
MAX_BODY_BYTES = 65_536
MAX_TITLE_CHARS = 1_000
MAX_REQUEST_ID_CHARS = 200

# How far ahead of the store's clock a time said to be past (an imported memory's created, updated,
# occurred and replaced times; a history turn's time) may lie: the clocks of two machines disagree
# by seconds, a time written in local time without its offset by hours; a day holds both. A memory
# dated further ahead would head every newest-first list and never reach the expiry gate.
MAX_FUTURE_SKEW = datetime.timedelta(days=1)

# Token budgets of the context bundle (GetContext's token_budget: 0 means the default) and of
# PromptContext's block. The gateway refuses a budget outside MIN..MAX; the MCP server states and
# checks the same bounds in its get_context tool.
CONTEXT_DEFAULT_BUDGET = 1_500
CONTEXT_MIN_BUDGET = 200  # the opening and closing lines take about 150 tokens
CONTEXT_MAX_BUDGET = 100_000
PROMPT_DEFAULT_BUDGET = 600
PROMPT_MIN_BUDGET = 100  # the opening and closing lines take up to 97 tokens
PROMPT_MAX_BUDGET = 2_500  # at CHARS_PER_TOKEN (servicekit.render), 10,000 characters: what a harness shows whole

# What one memory write may carry (Remember, Correct, ImportMemories; the store refuses more, and
# `recallatron import` and `import-legacy` check a file against the same numbers before sending it):
# entity mentions and the length of an entity's name, a reason, the sources of a derived memory, an
# import key, and an imported memory's earlier revisions.
MAX_MENTIONS = 32
MAX_NAME_CHARS = 200
MAX_REASON_CHARS = 1_000
MAX_SOURCES = 100
MAX_KEY_CHARS = 200
MAX_REVISIONS = 100

# A history turn's chat id and session id, in characters (AppendHistory, ImportHistory).
MAX_CHAT_ID_CHARS = 200
MAX_SESSION_ID_CHARS = 200
