"""The bench's building blocks end to end on a tiny workspace (no timed assertions).

``recallatron up`` on a temporary data folder and free ports; a miniature eval set in the shared eval
data's layout, built from the repository's demo conversation (demo/; so the core is small and the
recipe reaches repeated rows at 120 memories); the workspace built through the gateway, copies given
reused vectors, rebuilt never (a second ``ensure`` reuses it); a copied row read, corrected and
forgotten through the gateway; the measurement and the ingest probe run, and the tables rendered.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from recallatron.embed.v1 import embed_pb2, embed_pb2_grpc
from recallatron.gateway.v1 import gateway_pb2 as g

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_data import tiny_eval, write_jsonl

import client
from bench import corpus, drain_bench, measure, run, workspace
from bench.stack import Stack
from servicekit import clients
from store_service.database import new_db_name


def free_port_base() -> int:
    """A base such that base+1..base+5 (four services and the web screen) are free on loopback."""
    for base in range(51_000, 60_000, 10):
        try:
            for n in range(1, 6):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", base + n))
            return base
        except OSError:
            continue
    raise AssertionError("no free ports")


@pytest.mark.system
def test_bench_end_to_end(tmp_path, encoder):
    eval_dir = tiny_eval(tmp_path / "eval")
    core, filler = corpus.core_and_filler(eval_dir)
    questions = list(corpus.questions(eval_dir))
    assert len(core) == 60 + len({k for q in questions if q.source == "scifact" for k in q.relevant})
    assert questions and all(k in {r.key for r in core} for q in questions for k in q.relevant)
    size, max_unique = 120, 80
    assert corpus.repeats_from(size, eval_dir, max_unique) == 80
    assert corpus.row(80, eval_dir, max_unique) == corpus.row(len(core), eval_dir, max_unique)
    assert len({r.body for r in filler}) == len(filler)

    stack = Stack.start(tmp_path / "home", free_port_base())
    try:
        assert stack.startup_seconds > 0
        gw = client.Gateway(stack.addrs["gateway"], stack.operator_token())
        ch = clients.channel(stack.addrs["embed"])
        version = embed_pb2_grpc.EmbedServiceStub(ch).GetModelInfo(embed_pb2.GetModelInfoRequest()).input_version
        ch.close()
        entry = workspace.ensure(stack, gw, size, eval_dir=eval_dir, max_unique=max_unique, input_version=version)
        assert entry["complete"] and entry["built_now"] and entry["done"] == size
        assert entry.get("reuse_path") == "worker" and "reuse" not in entry  # the product copied the vectors
        assert set(entry["core_ids"]) == {r.key for r in core}
        assert workspace.workspace_counts(stack, entry["workspace_id"]) == {"rows": size, "vectors": size, "jobs": 0}
        again = workspace.ensure(stack, gw, size, eval_dir=eval_dir, max_unique=max_unique, input_version=version)
        assert not again["built_now"] and again["workspace_id"] == entry["workspace_id"]

        # A copy carries exactly its source's vector, and is a memory like any other.
        conninfo = stack.pg_conninfo(new_db_name(uuid.UUID(entry["workspace_id"])))
        with psycopg.connect(conninfo, autocommit=True) as conn:
            copy_id, same = conn.execute(
                """SELECT m.id, e.embedding = s_e.embedding FROM memory m
                     JOIN memory_embedding e ON e.memory_id = m.id
                     JOIN memory s ON s.title = m.title AND s.body = m.body AND s.id <> m.id
                     JOIN memory_embedding s_e ON s_e.memory_id = s.id
                    WHERE m.request_id LIKE %s""",
                (f"%bench-{size - 1}",),
            ).fetchone()
        assert same
        md = client.bearer(entry["token"])
        mem = gw.memory.Read(g.ReadRequest(id=str(copy_id)), metadata=md).memory
        assert mem.body == corpus.row(size - 1, eval_dir, max_unique).body
        fixed = gw.memory.Correct(
            g.CorrectRequest(id=mem.id, expected_revision=mem.revision, body=mem.body + " (corrected)"), metadata=md
        ).memory
        assert fixed.revision == mem.revision + 1
        assert gw.memory.Forget(g.ForgetRequest(id=mem.id, reason="bench test"), metadata=md).forgotten_ids == [mem.id]
        entry["core_ids"] = again["core_ids"]

        result = measure.measure_workspace(stack, entry, encoder, questions[:3], clients_n=2, rounds=1)
        single = result["single"]
        assert single["questions"] == 3
        assert set(single["modes"]) == {"lexical", "dense", "hybrid"}
        for mode in single["modes"].values():
            assert mode["recall"]["n"] == 3 and mode["floor"]["n"] == 3 and mode["recall"]["p50"] > 0
            assert mode["dense_unavailable"] == 0
        assert single["modes"]["hybrid"]["hit_at_10"] > 0
        assert set(single["parts"]) == {
            "embed",
            "lexical_sql",
            "dense_sql",
            "EmbedQueries",
            "DenseCandidates",
            "LexicalCandidates",
        }
        assert {m["recall"]["n"] for m in result["concurrent"].values()} == {3}
        # CPU per recall of every process, the clients too (the kernel counts CPU in 10 ms ticks, so
        # over 3 recalls one process may show none; all of them together cannot).
        cpu = [phase["cpu_ms_per_recall"] for phase in result["concurrent"].values()]
        assert all(set(c) == {"gateway", "store", "embed", "rank", "postgres", "bench clients"} for c in cpu)
        assert all(0 <= v < 10_000 for c in cpu for v in c.values()) and sum(sum(c.values()) for c in cpu) > 0
        assert set(result["memory_mib"]) == {"gateway", "store", "embed", "rank", "postgres (PSS)"}
        assert all(v > 0 for v in result["memory_mib"].values())

        probe = measure.ingest_probe(stack, gw, encoder, 20, eval_dir)
        assert probe["rows"] == 20 and probe["drain"]["rows"] == 20 and probe["encode_rate"] > 0

        # The drain bench: vectors of memories with a text of their own deleted, queued again by
        # RebuildEmbeddings, drained by the store's worker, and the same texts encoded here.
        with psycopg.connect(conninfo, autocommit=True) as conn:
            sample = drain_bench._sample(conn, 10)
            assert len({(title, body) for _, title, body in sample}) == 10
            drained = drain_bench.round_(stack, gw, conn, sample, encoder)
            assert (
                conn.execute(
                    "SELECT count(*) FROM memory_embedding WHERE memory_id = ANY(%s::uuid[])", ([s[0] for s in sample],)
                ).fetchone()[0]
                == 10
            )
        assert drained["queued"] == 10 and drained["drain"]["rows"] == 10 and drained["encode_rate"] > 0
        assert drained["drain_vs_encode"] > 0 and set(drained["cpu_seconds"]) >= {"embed", "store", "postgres"}
        gw.close()
    finally:
        stack.stop()
    result["workspace"] = entry
    text = run.tables(
        {
            "sizes": {str(size): result},
            "probe": probe,
            "startup": {"fresh": stack.startup_seconds, "existing": stack.startup_seconds},
        }
    )
    assert "| 120 memories |" in text and "hybrid" in text
    assert "CPU per recall in the concurrent run" in text and "| 120 | hybrid | " in text


def test_gateway_ab_names_bad_arguments(tmp_path, monkeypatch):
    """Bad input to ``bench.gateway_ab`` is named before anything starts."""
    import pytest

    from bench import gateway_ab

    cases = [
        (["--other", str(tmp_path)], "is not a Recallatron checkout"),
        (["--other", str(ROOT), "--modes", "hybrid,bogus"], "--modes takes hybrid, lexical, dense"),
        (["--other", str(ROOT), "--modes", ","], "--modes takes"),
        (["--other", str(ROOT), "--home", str(tmp_path), "--size", "77"], "no built workspace of 77 in"),
        (["--other", str(ROOT), "--home", str(tmp_path), "--size", "77"], "bench.run --sizes 77 --build-only"),
    ]
    for argv, message in cases:
        monkeypatch.setattr(sys, "argv", ["gateway_ab", *argv])
        with pytest.raises(SystemExit, match=message):
            gateway_ab.main()


def test_drain_bench_and_gateway_ab_refuse_counts_below_one(tmp_path, monkeypatch, capsys):
    """Counts of 0 or less (rows, rounds, clients, a size) are refused with exit 2 before anything
    starts; a --json folder that is not there, and a size never built, before the stack starts."""
    import pytest

    from bench import drain_bench, gateway_ab

    for argv, message in (
        (["--rows", "0"], "must be 1 or more"),
        (["--rows", "-5"], "must be 1 or more"),
        (["--rounds", "0"], "must be 1 or more"),
        (["--size", "0"], "must be 1 or more"),
        (["--rows", "x"], "not a whole number"),
    ):
        with pytest.raises(SystemExit) as stopped:
            drain_bench.main(argv)
        assert stopped.value.code == 2 and message in capsys.readouterr().err
    for argv in (["--clients", "0"], ["--clients", "-3"], ["--rounds", "0"]):
        monkeypatch.setattr(sys, "argv", ["gateway_ab", "--other", str(ROOT), *argv])
        with pytest.raises(SystemExit) as stopped:
            gateway_ab.main()
        assert stopped.value.code == 2 and "must be 1 or more" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="--json: no folder"):
        drain_bench.main(["--home", str(tmp_path), "--json", str(tmp_path / "absent" / "out.json")])
    with pytest.raises(SystemExit, match="bench.run --sizes 4321 --build-only"):
        drain_bench.main(["--home", str(tmp_path), "--size", "4321"])


def test_lexical_ab_and_ingest_bench_name_bad_arguments(tmp_path, monkeypatch, capsys):
    """Bad input to ``bench.lexical_ab`` and ``bench.ingest_bench`` is named (exit 2) before anything
    starts; ``--single 0`` crashed the ingest bench on an empty median before it was allowed."""
    import pytest

    from bench import ingest_bench, lexical_ab

    cases = [
        (ingest_bench, ["--threads", "0"], "--threads >= 1"),
        (ingest_bench, ["--batch-size", "501"], "--batch-size 1..500"),
        (ingest_bench, ["--single", "-1"], "must be >= 0"),
        (lexical_ab, ["--home", str(tmp_path)], "no workspace of 1,000,000 memories"),
        (lexical_ab, ["--home", str(tmp_path), "--size", "77"], "no workspace of 77 memories"),
        (lexical_ab, ["--rounds", "0"], "--rounds must be at least 1"),
    ]
    for module, argv, message in cases:
        monkeypatch.setattr(sys, "argv", [module.__name__, *argv])
        with pytest.raises(SystemExit) as stopped:
            module.main()
        assert stopped.value.code == 2
        assert message in capsys.readouterr().err


def test_bench_run_refuses_no_passes(capsys):
    """``bench.run --passes 0`` would measure nothing: refused (exit 2), as a word or a negative is."""
    import pytest

    from bench import run

    for value, message in (("0", "must be 1 or more, got 0"), ("-2", "got -2"), ("two", "not a whole number: 'two'")):
        with pytest.raises(SystemExit) as stopped:
            run.main(["--passes", value])
        assert stopped.value.code == 2
        assert message in capsys.readouterr().err


# Every entry that reads the eval data by default: `make bench` runs the first.
EVAL_READERS = [
    "bench.run",
    "bench.ingest_bench",
    "bench.embed_bench",
    "bench.recall_path_bench",
    "bench.entity_expansion",
    "tools.lexical_parity",
    "tools.fusion_ablation",
]


def test_without_the_eval_data_the_bench_says_where_it_comes_from_and_exits_1(tmp_path):
    """The eval data is not in the repository: with BENCH_EVAL_DIR naming an empty folder, one that
    does not exist, or one without SciFact, ``python -m bench.run`` (``make bench``) and every other
    entry that reads it by default stop before starting anything, exit 1, and say what is missing,
    where the data comes from and how to name its folder: no traceback, nothing on stdout."""
    (tmp_path / "empty").mkdir()
    write_jsonl(tmp_path / "no-scifact" / "locomo" / "conv-1" / "memories.jsonl", [{"id": "D1:1", "body": "x"}])
    cases = [
        ("empty", "no conversation folder in locomo/", EVAL_READERS),
        ("absent", "the folder does not exist", ["bench.run"]),
        (
            "no-scifact",
            "no locomo/conv-1/queries.jsonl, scifact/memories.jsonl, scifact/queries.jsonl",
            ["bench.run"],
        ),
    ]
    for name, missing, entries in cases:
        folder = tmp_path / name
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{ROOT / 'gen'}", "BENCH_EVAL_DIR": str(folder)}
        for entry in entries:
            done = subprocess.run(
                [sys.executable, "-m", entry], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
            )
            assert (done.returncode, done.stdout) == (1, ""), (entry, done.stderr)
            assert "Traceback" not in done.stderr, (entry, done.stderr)
            lines = done.stderr.splitlines()
            assert lines[0] == f"bench: no eval data in {folder}: {missing}.", (entry, lines)
            for said in (
                "locomo/<conversation>/memories.jsonl, queries.jsonl  LoCoMo, github.com/snap-research/LoCoMo",
                "scifact/memories.jsonl, queries.jsonl                SciFact, github.com/allenai/scifact (as in",
                "The folder is $BENCH_EVAL_DIR, else .bench/eval in this checkout (git-ignored). Write them in",
                "  BENCH_EVAL_DIR=/path/to/eval make bench",
                "  ln -s /path/to/eval .bench/eval",
            ):
                assert any(said in line for line in lines), (entry, said, lines)
    assert not (tmp_path / "absent").exists()
