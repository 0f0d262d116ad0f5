"""`recallatron up` as a user runs it: separate processes, the embedded database in its own data
folder, `ready`, grpcurl (list, describe, a Recall call with JSON, health), the CLI's --json output
and failure codes, /metrics, restart of a dead service, and a clean stop on SIGTERM.

The commands run in this process (tests/cli_runner.py), but for test_the_console_script_runs; the
tests share the session's system (conftest.shared_system), but for the two that kill a service and
stop the system, which have one of their own."""

import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
from cli_runner import at_gateway, recallatron
from conftest import ROOT, free_port, recallatron_up

from servicekit.limits import MAX_QUERY_CHARS

pytestmark = pytest.mark.system

GRPCURL = str(Path(sys.executable).parent / "grpcurl")


@pytest.fixture(scope="module")
def system(shared_system):
    """The session's shared system (tests/conftest.py): the tests here that take it only call it."""
    return shared_system


@pytest.fixture(scope="module")
def own_system(tmp_path_factory):
    """A system of this module's own, for the tests that kill one of its services and then stop it.
    The rank service's gRPC and metrics ports are set to 0, for `up` to choose (and keep across the
    restart test_dead_service_is_restarted forces)."""
    zero = {"RECALLATRON_RANK_ADDR": "127.0.0.1:0", "RECALLATRON_RANK_METRICS_PORT": "0"}
    with recallatron_up(tmp_path_factory.mktemp("home"), **zero) as system:
        yield system


def cli(system, *args, token=None, check=True):
    """``recallatron ARGS --gateway`` the system's, run in this process (tests/cli_runner.py) with the
    system's environment and member ``token``; the console script itself: test_the_console_script_runs."""
    return at_gateway(system["gateway"], *args, token=token or None, check=check, env=system["env"])


def grpcurl(system, *args, token=None, data=None):
    cmd = [GRPCURL, "-plaintext"]
    if token:
        cmd += ["-H", f"authorization: Bearer {token}"]
    if data is not None:
        cmd += ["-d", json.dumps(data)]
    out = subprocess.run(cmd + [system["gateway"], *args], capture_output=True, text=True, timeout=60)
    return out


def new_member(system) -> dict:
    """A new workspace and a member of it, made with the CLI: {"workspace", "token", "member_id"}."""
    ws = json.loads(cli(system, "workspace", "create", "cli tests", "--json").stdout)["workspace_id"]
    added = json.loads(cli(system, "member", "add", "--workspace", ws, "--json").stdout)
    assert added["token"].startswith("rct_") and added["member_id"]
    return {"workspace": ws, **added}


@pytest.fixture(scope="module")
def member(system):
    return new_member(system)


def test_operator_token_written_private(system):
    path = system["home"] / "operator-token"
    assert path.stat().st_mode & 0o077 == 0
    assert path.read_text().strip() not in (system["home"] / "logs" / "gateway.log").read_text()


def test_the_console_script_runs(system, member):
    """The installed ``recallatron`` entry point, in a process of its own as a user runs it (every
    other command here runs in this process): a memory written and read back, --json on stdout."""
    script = Path(sys.executable).parent / "recallatron"
    env = dict(system["env"], RECALLATRON_TOKEN=member["token"])

    def run(*args: str) -> dict:
        out = subprocess.run(
            [script, *args, "--gateway", system["gateway"], "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    mem = run("remember", "The console script wrote this osprey note.")["memory"]
    assert run("read", mem["id"])["memory"]["body"] == "The console script wrote this osprey note."
    assert subprocess.run([script, "read"], env=env, capture_output=True, text=True, timeout=120).returncode == 2


def test_remember_read_recall_with_json(system, member):
    out = cli(
        system,
        "remember",
        "--kind",
        "fact",
        "--title",
        "Pets",
        "--audience",
        "member",
        "Maria's parrot is called Captain and speaks Portuguese.",
        "--json",
        token=member["token"],
    )
    mem = json.loads(out.stdout)["memory"]
    assert mem["kind"] == "KIND_FACT" and mem["audience"] == "AUDIENCE_MEMBER" and mem["revision"] == "1"
    read = json.loads(cli(system, "read", mem["id"], "--json", token=member["token"]).stdout)["memory"]
    assert read["body"] == "Maria's parrot is called Captain and speaks Portuguese."
    resp = json.loads(cli(system, "recall", "parrot", "--mode", "lexical", "--json", token=member["token"]).stdout)
    # Every field is printed, defaults included.
    assert resp["dense_available"] is True and resp["reranked"] is False
    assert resp["items"][0]["memory"]["id"] == mem["id"] and resp["items"][0]["dense_rank"] == 0
    assert resp["counts"] == {"lexical": 1, "dense": 0, "fused": 1, "returned": 1}
    text = cli(system, "recall", "parrot", token=member["token"]).stdout
    assert "dense_available=" in text and "reranked=false" in text and mem["id"] in text


def test_cli_failures_print_the_status_code(system, member):
    out = cli(system, "read", "00000000-0000-0000-0000-000000000000", token=member["token"], check=False)
    assert out.returncode == 1 and out.stderr.startswith("NOT_FOUND:")
    out = cli(system, "remember", "  ", token=member["token"], check=False)
    assert out.returncode == 1 and out.stderr.startswith("INVALID_ARGUMENT:")
    out = cli(system, "recall", "x", token="rct_bogus", check=False)
    assert out.returncode == 1 and out.stderr.startswith("UNAUTHENTICATED:")
    out = cli(system, "recall", "x", "--mode", "fuzzy", token=member["token"], check=False)
    assert out.returncode == 2  # argparse usage error


def test_stored_text_cannot_write_lines_or_control_the_terminal(system, member):
    """Text output shows stored text as it is when it prints as itself, else quoted: a body, title,
    earlier revision, entity name or history turn with a line break, an escape sequence or a bidi
    control can neither start a line that passes for our output nor reach the terminal raw."""
    tok = member["token"]
    forged = "[00000000-0000-0000-0000-000000000000] revision 9 | fact, told by member 1"
    body = f"kestrel ledger\n{forged}\x1b]0;owned\x07\u202e"
    mem = json.loads(
        cli(system, "remember", "--title", "t\u2028x", "--about", "Kes\u2029trel", body, "--json", token=tok).stdout
    )["memory"]
    cli(system, "correct", mem["id"], "--revision", "1", f"kestrel ledger fixed\r\n{forged}", token=tok)
    cli(system, "history", "append", "--chat", "c\nhat", f"kestrel turn\n{forged}\x1b[2J", token=tok)
    outputs = [
        cli(system, "read", mem["id"], "--history", token=tok).stdout,
        cli(system, "recall", "kestrel ledger", "--mode", "lexical", token=tok).stdout,
        cli(system, "entities", "Kes\u2029trel", token=tok).stdout,
        cli(system, "history", "search", "kestrel", token=tok).stdout,
    ]
    for out in outputs:
        assert not any(ch in out for ch in "\x1b\x07\u202e\u2028\u2029\r"), out
        assert not any(line.lstrip().startswith("[0000") for line in out.splitlines()), out
    read, recalled, entities, history = outputs
    assert '"kestrel ledger fixed\\r\\n[00000000' in read and '"kestrel ledger\\n[00000000' in read
    assert "\\u001b]0;owned\\u0007\\u202e" in read and '"t\\u2028x"' in read
    assert mem["id"] in recalled and '"kestrel ledger fixed\\r\\n' in recalled
    assert '"Kes\\u2029trel"' in entities
    assert '"c\\nhat"' in history and '"kestrel turn\\n[00000000' in history and "\\u001b[2J" in history
    plain = cli(system, "remember", "plain kestrel words", "--json", token=tok).stdout
    plain_id = json.loads(plain)["memory"]["id"]
    assert "\n  plain kestrel words\n" in cli(system, "read", plain_id, token=tok).stdout + "\n"


def test_remember_about_a_name_says_how_the_name_found_its_entity(system, member):
    tok = member["token"]
    name = f"Skerry {uuid.uuid4().hex[:6]}"
    first = cli(system, "remember", "--about", name, "A skerry off the coast.", token=tok).stdout
    (created,) = re.findall(rf"entity {name}: new ([0-9a-f-]{{36}})", first)
    again = cli(system, "remember", "--about", name.upper(), "The skerry again.", token=tok).stdout
    assert f"entity {name.upper()}: the one you can see, {created}" in again
    as_json = json.loads(cli(system, "remember", "--about", name, "Once more.", "--json", token=tok).stdout)
    assert as_json["memory"]["entity_resolutions"] == [
        {"name": name, "entity_id": created, "outcome": "ENTITY_RESOLUTION_OUTCOME_LINKED", "other_entity_ids": []}
    ]
    assert "the one you can see" not in cli(system, "read", as_json["memory"]["id"], token=tok).stdout


def test_entities_merge_unmerge_and_duplicates(system, member):
    tok = member["token"]
    tag = uuid.uuid4().hex[:6]
    full, short = f"Jonas Berg{tag}", f"J. Berg{tag}"
    a = json.loads(cli(system, "remember", "--about", full, "Jonas plays cello.", "--json", token=tok).stdout)
    cli(system, "remember", "--about", full, "Jonas moved to Oslo.", token=tok)
    b = json.loads(cli(system, "remember", "--about", short, "J. Berg called.", "--json", token=tok).stdout)
    a_id, b_id = (x["memory"]["entity_resolutions"][0]["entity_id"] for x in (a, b))
    review = cli(system, "entities", "duplicates", token=tok).stdout
    assert f"merge: recallatron entities merge {b_id} --into {a_id}" in review
    assert f"0.60  initials\n  {a_id}  {full}\n      2 memories about it you can read\n" in review
    merged = cli(system, "entities", "merge", b_id, "--into", a_id, "--reason", "same man", token=tok).stdout
    assert merged == f"merged {b_id} into {a_id}\nundo: recallatron entities unmerge {b_id}\n"
    shown = cli(system, "entities", short, token=tok).stdout
    assert shown.startswith(f"{a_id}  {full}\n    also known as {short}\n    3 memories about it you can read\n")
    assert f"    merged {b_id} by member {member['member_id']} at " in shown and shown.endswith(": same man\n")
    assert f"merge {b_id}" not in cli(system, "entities", "duplicates", token=tok).stdout
    again = cli(system, "entities", "merge", b_id, "--into", a_id, token=tok, check=False)
    assert again.returncode == 1 and again.stderr.startswith("FAILED_PRECONDITION:")
    assert cli(system, "entities", "unmerge", b_id, token=tok).stdout == f"unmerged {b_id} from {a_id}\n"
    assert cli(system, "entities", "--name", short, token=tok).stdout.startswith(f"{b_id}  {short}\n    1 memory ")
    assert cli(system, "entities", "--name", "duplicates", token=tok).stdout == "no entities\n"
    for bad in (("merge", b_id), ("unmerge",), ("duplicates", "x"), ()):
        out = cli(system, "entities", *bad, token=tok, check=False)
        assert out.returncode == 2 and out.stderr.startswith("usage error:"), bad


def test_remember_and_supersede_state_relations_and_attributes(system, member):
    tok = member["token"]
    tag = uuid.uuid4().hex[:6]
    maria = f"Maria{tag}"
    out = cli(
        system,
        "remember",
        "--relation", maria, "works_at", "Nutrifax Ltd",
        "--attribute", maria, "school", "Crawford Bay\nSchool",
        "Maria works at Nutrifax.",
        "--json",
        token=tok,
    )  # fmt: skip
    mem = json.loads(out.stdout)["memory"]
    shown = cli(system, "read", mem["id"], token=tok).stdout
    assert f"\n  states {maria} works_at Nutrifax Ltd\n" in shown
    assert f'\n  states {maria} school = "Crawford Bay\\nSchool"' in shown  # stored text with a line break: quoted
    newer = cli(
        system, "supersede", mem["id"], "--revision", "1", "--relation", maria, "works_at", "Acme", "Now at Acme.",
        token=tok,
    ).stdout  # fmt: skip
    assert f"\n  states {maria} works_at Acme" in newer and f"\n  about {maria} (" in newer
    assert newer.count(f"\n  entity {maria}: ") == 1  # named twice in one write: said once
    bad = cli(system, "remember", "--relation", maria, "Works At", "Acme", "x", token=tok, check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("INVALID_ARGUMENT: relations[0].predicate must be")


def test_entity_page_and_recall_about_a_name(system, member):
    tok = member["token"]
    tag = uuid.uuid4().hex[:6]
    ola = f"Ola{tag}"
    first = json.loads(
        cli(
            system, "remember", "--relation", ola, "works_at", "Kvarken", "--attribute", ola, "grade", "9",
            f"{tag} Ola works at Kvarken.", "--json", token=tok,
        ).stdout
    )["memory"]  # fmt: skip
    cli(system, "remember", "--about", f"Someone{tag}", f"{tag} unrelated note", token=tok)
    out = cli(system, "entity", ola, token=tok).stdout
    ola_id = first["relations"][0]["subject_id"]
    assert out.startswith(f"{ola_id}  {ola}\n    1 memory about it you can read\nattributes:\n")
    source = f"(memory {first['id']}, by member {member['member_id']}, valid from "
    assert f"\n  grade = 9  {source}" in out
    assert f"\nrelations:\n  works_at Kvarken ({first['relations'][0]['object_id']})  {source}" in out
    then = cli(system, "entity", ola, "--as-of", "2020-01-01", token=tok).stdout
    assert "\nas of 2020-01-01 00:00 UTC: the attributes and relations of the memories valid then\n" in then
    assert "\nattributes: none\nrelations: none\n" in then
    assert f"\ntimeline: 1 shown of 1, the latest said first\n  {first['id']}  revision 1" in out
    about = cli(system, "recall", tag, "--mode", "lexical", "--about", ola, "--json", token=tok).stdout
    assert [it["memory"]["id"] for it in json.loads(about)["items"]] == [first["id"]]
    # The arms that did not run give no score: "-", not a 0.000 that reads as measured.
    text = cli(system, "recall", tag, "--mode", "lexical", "--about", ola, token=tok).stdout
    assert " dense_rank=- cosine=- fused=" in text and " rerank=-  " in text
    none = cli(system, "recall", tag, "--about", f"Nobody{tag}", token=tok, check=False)
    assert none.returncode == 1 and none.stderr.startswith(f"NOT_FOUND: no entity named Nobody{tag}")
    missing = cli(system, "entity", f"Nobody{tag}", token=tok, check=False)
    assert missing.returncode == 1 and missing.stderr.startswith("NOT_FOUND: no entity of that id or name")


def test_lifecycle_commands(system, member):
    tok = member["token"]
    mem = json.loads(
        cli(system, "remember", "--about", "Captain", "The parrot eats sunflower seeds.", "--json", token=tok).stdout
    )["memory"]
    fixed = json.loads(
        cli(system, "correct", mem["id"], "--revision", "1", "The parrot eats millet.", "--json", token=tok).stdout
    )["memory"]
    assert fixed["revision"] == "2"
    stale = cli(system, "correct", mem["id"], "--revision", "1", "again", token=tok, check=False)
    assert stale.returncode == 1 and stale.stderr.startswith("ABORTED:") and "current 2" in stale.stderr
    history = cli(system, "read", mem["id"], "--history", token=tok).stdout
    assert "revision 1 by member " in history and "sunflower" in history and "about Captain" in history
    derived = json.loads(
        cli(system, "derive", "--source", mem["id"], "Diet summary: millet.", "--json", token=tok).stdout
    )["memory"]
    assert derived["origin"] == "ORIGIN_DERIVED"
    new = json.loads(
        cli(
            system,
            "supersede",
            mem["id"],
            "--revision",
            "2",
            "--kind",
            "fact",
            "The parrot now eats pellets.",
            "--json",
            token=tok,
        ).stdout
    )["memory"]
    assert new["kind"] == "KIND_FACT"
    again = cli(system, "supersede", mem["id"], "--revision", "2", "x", token=tok, check=False)
    assert again.stderr.startswith("FAILED_PRECONDITION:")
    gone = json.loads(cli(system, "forget", mem["id"], "--reason", "test", "--json", token=tok).stdout)
    assert gone["forgotten_ids"] == [mem["id"], derived["id"]]
    assert cli(system, "read", derived["id"], token=tok, check=False).stderr.startswith("NOT_FOUND:")
    ents = json.loads(cli(system, "entities", "captain", "--json", token=tok).stdout)["entities"]
    assert ents == []  # its only memory is forgotten


def test_grpcurl_list_describe_call_and_health(system, member):
    listed = grpcurl(system, "list")
    assert listed.returncode == 0, listed.stderr
    for svc in (
        "recallatron.gateway.v1.MemoryService",
        "recallatron.gateway.v1.AdminService",
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
    ):
        assert svc in listed.stdout
    described = grpcurl(system, "describe", "recallatron.gateway.v1.MemoryService")
    assert "rpc Recall" in described.stdout and "rpc Forget" in described.stdout
    msg = grpcurl(system, "describe", "recallatron.gateway.v1.RecallResponse")
    assert "dense_available" in msg.stdout and "reranked" in msg.stdout
    call = grpcurl(
        system,
        "recallatron.gateway.v1.MemoryService/Recall",
        token=member["token"],
        data={"query": "parrot", "purpose": "PURPOSE_CONVERSATION", "top_k": 5},
    )
    assert call.returncode == 0, call.stderr
    assert "Pets" in [it["memory"].get("title") for it in json.loads(call.stdout)["items"]]
    health = grpcurl(system, "grpc.health.v1.Health/Check")
    assert json.loads(health.stdout) == {"status": "SERVING"}
    denied = grpcurl(system, "recallatron.gateway.v1.MemoryService/Recall", data={"query": "parrot"})
    assert "Unauthenticated" in denied.stderr


def test_status_command_reports_backlog_and_dependencies(system):
    status = json.loads(cli(system, "status", "--json").stdout)
    deps = {d["name"]: d["serving"] for d in status["dependencies"]}
    assert deps["store"] and deps["embed"] and deps["rank"] and deps["reranker"] is False
    assert int(status["embedding_backlog"]) >= 0


def test_metrics_endpoints(system, member):
    cli(system, "recall", "parrot", token=member["token"])
    gw = urllib.request.urlopen(f"http://127.0.0.1:{system['metrics']['gateway']}/metrics").read().decode()
    assert (
        'grpc_server_handled_total{grpc_code="OK",grpc_method="Recall",'
        'grpc_service="recallatron.gateway.v1.MemoryService",grpc_type="unary"}'
    ) in gw
    assert "grpc_server_handling_seconds_bucket" in gw and "recallatron_dependency_up" in gw
    assert member["token"] not in gw and member["member_id"] not in gw and "parrot" not in gw
    store = urllib.request.urlopen(f"http://127.0.0.1:{system['metrics']['store']}/metrics").read().decode()
    assert "recallatron_embedding_backlog" in store


def test_up_chooses_and_prints_the_ports_set_to_0(own_system):
    """Ports set to 0 are chosen by `up` before it starts the services: printed with the variable
    that would fix each, on the ready line (every metrics port), and served there."""
    chosen = next(line for line in own_system["output"] if "ports chosen" in line)
    found = re.fullmatch(
        r"recallatron: ports chosen for those set to 0: rank 127\.0\.0\.1:(\d+) \(RECALLATRON_RANK_ADDR\), "
        r"rank metrics 127\.0\.0\.1:(\d+) \(RECALLATRON_RANK_METRICS_PORT\)",
        chosen,
    )
    assert found, chosen
    rank, metrics = map(int, found.groups())
    others = own_system["metrics"]
    ready = own_system["output"][-1]
    assert (
        f"metrics on 127.0.0.1 ports rank {metrics}, embed {others['embed']}, store {others['store']}, "
        f"gateway {others['gateway']}, "
    ) in ready, ready
    page = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10).read().decode()
    assert "grpc_server_started_total" in page
    assert grpcurl({"gateway": f"127.0.0.1:{rank}"}, "grpc.health.v1.Health/Check").stdout.count("SERVING") == 1


def test_dead_service_is_restarted(own_system):
    system, member = own_system, new_member(own_system)
    # A memory the recall finds, so that it needs the rank service (nothing found calls no ranking).
    cli(system, "remember", "Maria's parrot is called Captain.", token=member["token"])
    pid_file = system["home"] / "run" / "rank.pid"
    old = int(pid_file.read_text())
    os.kill(old, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if cli(system, "recall", "parrot", token=member["token"], check=False).returncode == 0:
            break
        time.sleep(1)
    assert cli(system, "recall", "parrot", token=member["token"]).returncode == 0
    assert int(pid_file.read_text()) != old


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    """A two-corpus dataset in the evaluation format (demo/README.md), and an off-topic one."""
    root = tmp_path_factory.mktemp("data")
    topics = {
        "c1": [
            "The lighthouse keeper polishes the lens every morning.",
            "Tomatoes need six hours of sun.",
            "The ferry to the island leaves at noon.",
            "Our cat sleeps on the radiator.",
        ],
        "c2": [
            "The violinist tuned her instrument backstage.",
            "Snow closed the mountain pass overnight.",
            "The bakery sells rye bread on Fridays.",
            "A comet will be visible next week.",
        ],
    }
    questions = {
        "c1": [("Who polishes the lighthouse lens?", 0), ("When does the ferry leave?", 2)],
        "c2": [("What closed the mountain pass?", 1), ("Which day is rye bread sold?", 2)],
    }
    for corpus, bodies in topics.items():
        (root / "on" / corpus).mkdir(parents=True)
        (root / "on" / corpus / "memories.jsonl").write_text(
            "".join(
                json.dumps({"id": f"{corpus}-{i}", "title": "", "body": b, "occurred_at": None, "metadata": {}}) + "\n"
                for i, b in enumerate(bodies)
            )
        )
        (root / "on" / corpus / "queries.jsonl").write_text(
            "".join(
                json.dumps({"id": f"{corpus}/q{i}", "question": q, "relevant_ids": [f"{corpus}-{r}"], "category": 1})
                + "\n"
                for i, (q, r) in enumerate(questions[corpus])
            )
        )
    (root / "off").mkdir()
    (root / "off" / "memories.jsonl").write_text(json.dumps({"id": "x", "title": "", "body": "unused"}) + "\n")
    (root / "off" / "queries.jsonl").write_text(
        "".join(
            json.dumps({"id": f"off/{i}", "question": q, "relevant_ids": []}) + "\n"
            for i, q in enumerate(["Protein folding kinetics in E. coli", "Mitochondrial DNA mutation rates"])
        )
    )
    return root


def _workspace_names(system) -> list[str]:
    listed = json.loads(cli(system, "workspace", "list", "--page-size", "200", "--json").stdout)
    return [w["name"] for w in listed["workspaces"]]


def test_eval_on_a_tiny_dataset(system, tiny_data):
    before = _workspace_names(system)
    out = json.loads(cli(system, "eval", "--dataset", str(tiny_data / "on"), "--json").stdout)
    assert _workspace_names(system) == before  # its two corpus workspaces deleted at the end
    kept = cli(system, "eval", "--dataset", str(tiny_data / "on" / "c1"), "--keep", "--json")
    made = [name for name in _workspace_names(system) if name not in before]
    assert len(made) == 1 and made[0].startswith("eval c1") and "kept workspace " in kept.stderr
    cli(system, "workspace", "delete", made[0], "--yes")
    assert set(out["per_corpus"]) == {"c1", "c2"} and out["overall"]["queries"] == 4
    assert out["overall"]["recall@5"] == 1.0 and out["overall"]["mrr"] == 1.0 and out["overall"]["ndcg@10"] == 1.0
    assert set(out["overall"]) == {"recall@5", "recall@10", "recall@50", "ndcg@10", "mrr", "queries"}
    table = cli(system, "eval", "--dataset", str(tiny_data / "on" / "c1")).stdout
    assert "recall@10" in table and "c1" in table
    ablate = json.loads(cli(system, "eval", "--dataset", str(tiny_data / "on"), "--ablate", "--json").stdout)
    assert set(ablate["ablation"]) == {"lexical", "dense", "hybrid"}  # no cross-encoder here: no re-rank column
    assert ablate["rerank"] == "hybrid+rerank: not run, the re-ranker is unavailable (not configured)"
    assert ablate["ablation"]["hybrid"]["overall"]["mrr"] == 1.0
    missing = cli(system, "eval", "--dataset", str(tiny_data / "nope"), check=False)
    assert missing.returncode != 0 and "no memories.jsonl" in missing.stderr


def test_eval_reads_time_words_and_questions_kept_apart_from_their_memories(system, tmp_path):
    """``--memories-from``: a folder of questions only (as eval/time-scoped/) takes each corpus's
    memories from the same-named folder elsewhere; ``--time-words`` runs the mode with and without the
    questions' time words, each question's ``reference_time`` read from its line."""
    said = {"t1-0": "2024-01-10T10:00:00", "t1-1": "2024-03-10T10:00:00", "t1-2": "2024-05-10T10:00:00"}
    bodies = {"t1-0": "The ferry left at noon.", "t1-1": "The ferry left at one.", "t1-2": "The ferry left at two."}
    (tmp_path / "memories" / "t1").mkdir(parents=True)
    (tmp_path / "memories" / "t1" / "memories.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "title": "", "body": bodies[i], "occurred_at": said[i], "metadata": {}}) + "\n"
            for i in said
        )
    )
    (tmp_path / "questions" / "t1").mkdir(parents=True)
    questions = [
        {"id": "q1", "question": "When did the ferry leave in March 2024?", "relevant_ids": ["t1-1"]},
        {
            "id": "q2",
            "question": "When did the ferry leave last month?",
            "relevant_ids": ["t1-2"],
            "reference_time": "2024-06-15T12:00:00Z",
        },
    ]
    (tmp_path / "questions" / "t1" / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    args = ["eval", "--dataset", str(tmp_path / "questions"), "--memories-from", str(tmp_path / "memories")]
    out = json.loads(cli(system, *args, "--time-words", "--json").stdout)
    assert set(out["time_words"]) == {"hybrid", "hybrid, no time"}
    read = out["time_words"]["hybrid"]["overall"]
    assert read["queries"] == 2 and read["mrr"] == 1.0 and read["recall@5"] == 1.0
    assert out["time_words"]["hybrid, no time"]["overall"]["queries"] == 2
    elsewhere = ["eval", "--dataset", str(tmp_path / "questions"), "--memories-from", str(tmp_path)]
    missing = cli(system, *elsewhere, check=False)
    assert missing.returncode != 0 and "its memories" in missing.stderr and "are missing" in missing.stderr


def test_eval_counts_refused_questions_and_goes_on(system, tiny_data, tmp_path):
    """Questions the gateway refuses (one over MAX_QUERY_CHARS, one blank: INVALID_ARGUMENT) are counted
    by status code, as is one whose reference_time is no time; the others are still asked and scored,
    and the exit status is 1 after the full output."""
    corpus = tmp_path / "c3"
    corpus.mkdir()
    (corpus / "memories.jsonl").write_text((tiny_data / "on" / "c1" / "memories.jsonl").read_text())
    refused = [
        {
            "id": "c3/long",
            "question": "When does the ferry leave? " + "x" * MAX_QUERY_CHARS,
            "relevant_ids": ["c1-2"],
            "category": 2,
        },
        {"id": "c3/blank", "question": "   ", "relevant_ids": ["c1-0"], "category": 2},
        # An offset of a day or more (a break-it review: a traceback ended the run).
        {
            "id": "c3/offset",
            "question": "When does the ferry leave?",
            "relevant_ids": ["c1-2"],
            "category": 2,
            "reference_time": "2024-03-10T12:00:00+24:00",
        },
    ]
    (corpus / "queries.jsonl").write_text(
        (tiny_data / "on" / "c1" / "queries.jsonl").read_text() + "".join(json.dumps(q) + "\n" for q in refused)
    )
    out = cli(system, "eval", "--dataset", str(corpus), "--json", check=False)
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert report["refused"] == {"INVALID_ARGUMENT": 3}
    assert "c3/offset" in out.stderr and "reference_time: not an ISO 8601 time" in out.stderr
    assert report["overall"]["queries"] == 2 and report["overall"]["mrr"] == 1.0
    assert report["per_corpus"]["c3"]["queries"] == 2 and list(report["per_category"]) == ["1"]
    assert "3 of 5 questions refused" in out.stderr
    assert f"question c3/long: INVALID_ARGUMENT: query is longer than {MAX_QUERY_CHARS} characters" in out.stderr
    assert "question c3/blank: INVALID_ARGUMENT: query must not be empty" in out.stderr
    text = cli(system, "eval", "--dataset", str(corpus), check=False)
    assert text.returncode == 1 and "c3" in text.stdout
    assert "refused: 3 of 5 questions (INVALID_ARGUMENT 3); the metrics are over the 2 answered" in text.stdout
    ablate = cli(system, "eval", "--dataset", str(corpus), "--ablate", "--json", check=False)
    assert ablate.returncode == 1
    reports = json.loads(ablate.stdout)["ablation"]
    assert {name: r["refused"] for name, r in reports.items()} == {
        name: {"INVALID_ARGUMENT": 3} for name in ("lexical", "dense", "hybrid")
    }
    assert all(r["overall"]["queries"] == 2 for r in reports.values())
    table = cli(system, "eval", "--dataset", str(corpus), "--ablate", check=False).stdout
    for name in ("lexical", "dense", "hybrid"):
        assert f"{name}: refused: 3 of 5 questions (INVALID_ARGUMENT 3)" in table
    clean = json.loads(cli(system, "eval", "--dataset", str(tiny_data / "on" / "c1"), "--json").stdout)
    assert clean["refused"] == {} and clean["overall"]["queries"] == 2


def test_calibrate_floor_on_a_tiny_dataset(system, tiny_data):
    out = json.loads(
        cli(
            system,
            "calibrate-floor",
            "--dataset",
            str(tiny_data / "on"),
            "--off-topic",
            str(tiny_data / "off"),
            "--json",
        ).stdout
    )
    assert out["counts"] == {"on_topic_pairs": 4, "lost_pairs": 0, "off_topic_queries": 4, "adversarial_queries": 0}
    assert len(out["curve"]) == 101 and out["curve"][0]["fit_off_topic_blocked"] == 0.0
    assert out["curve"][-1]["held_out_on_topic_kept"] == 0.0
    if out["rule_satisfiable"]:
        assert out["chosen"]["fit_on_topic_kept"] == 1.0 and out["chosen"]["fit_off_topic_blocked"] >= 0.95


def test_load_stores_good_rows_and_reports_failed_ones(system, member, tmp_path):
    """`load` goes through RememberBatch: a bad row fails alone, is counted and shown on stderr, exit 1."""
    rows = [
        {
            "id": "ok-1",
            "title": "Harbour",
            "body": "The harbour master rings the brass bell at dusk.",
            "occurred_at": "2023-05-08T13:56:00",
            "metadata": {},
        },
        {"id": "bad-1", "title": "", "body": "   ", "occurred_at": None, "metadata": {}},
        {
            "id": "ok-2",
            "title": "",
            "body": "Fishermen mend their nets on the quay every Tuesday.",
            "occurred_at": None,
            "metadata": {},
        },
        {"id": "bad-2", "title": "t" * 1001, "body": "A title far too long.", "occurred_at": None, "metadata": {}},
    ]
    path = tmp_path / "memories.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = cli(system, "load", "--workspace", member["workspace"], str(path), "--json", check=False)
    assert out.returncode == 1
    assert json.loads(out.stdout) == {"loaded": 2}
    assert "2 of 4 rows failed" in out.stderr
    assert "row bad-1: INVALID_ARGUMENT: body must not be empty or blank" in out.stderr
    assert "row bad-2: INVALID_ARGUMENT: title is longer than 1000 characters" in out.stderr
    resp = json.loads(
        cli(system, "recall", "harbour brass bell", "--mode", "lexical", "--json", token=member["token"]).stdout
    )
    assert resp["items"][0]["memory"]["body"] == "The harbour master rings the brass bell at dusk."
    assert resp["items"][0]["memory"]["occurred_at"] == "2023-05-08T13:56:00Z"
    (tmp_path / "good.jsonl").write_text(json.dumps(rows[2] | {"id": "ok-3"}) + "\n")
    out = cli(system, "load", "--workspace", member["workspace"], str(tmp_path / "good.jsonl"))
    assert out.stdout.strip() == "loaded 1 memories" and "failed" not in out.stderr


def test_load_rows_of_the_wrong_shape_fail_alone_and_the_rest_land(system, member, tmp_path):
    """Found by a new user: rows that are JSON but not dataset rows (no id, a bad or numeric
    occurred_at, an array, a number as body) crashed `load` with a traceback after 500 rows were
    written. Each now fails alone, named by its id or line, and every good row lands once."""
    good = [{"id": f"g{i}", "title": "", "body": f"Quay note number {i} about the ferry."} for i in range(600)]
    bad = [
        {"title": "", "body": "No id at all."},
        {"id": "b-date", "body": "A bad date.", "occurred_at": "not-a-date"},
        {"id": "b-epoch", "body": "An epoch date.", "occurred_at": 1700000000},
        [1, 2],
        {"id": "b-num", "body": 12345},
        {"id": True, "body": "A boolean id."},
    ]
    lines = [json.dumps(r) for r in good[:300] + bad + good[300:]]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = cli(system, "load", "--workspace", member["workspace"], str(path), "--json", check=False)
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    assert json.loads(out.stdout) == {"loaded": 600}
    assert "6 of 606 rows failed" in out.stderr
    assert "row at line 301: INVALID_ARGUMENT: a row needs an id" in out.stderr
    assert (
        "row b-date: INVALID_ARGUMENT: occurred_at: not an ISO 8601 time between years 1 and 9999: 'not-a-date'"
        in out.stderr
    )
    assert "row b-epoch: INVALID_ARGUMENT: occurred_at must be a string" in out.stderr
    assert "row at line 304: INVALID_ARGUMENT: a row must be a JSON object, not list" in out.stderr
    assert "row b-num: INVALID_ARGUMENT: body must be a string" in out.stderr
    listed = json.loads(
        cli(
            system, "recall", "quay note ferry", "--mode", "lexical", "--top-k", "5", "--json", token=member["token"]
        ).stdout
    )
    assert listed["counts"]["lexical"] > 0
    # A time before year 1 once in UTC (a break-it review: OverflowError, the whole batch lost).
    early = tmp_path / "early.jsonl"
    early.write_text(
        json.dumps({"id": "b-year0", "body": "Before year one.", "occurred_at": "0001-01-01T00:00:00+01:00"})
        + "\n"
        + json.dumps({"id": "g-after", "body": "A quay note after the early one."})
        + "\n"
    )
    out = cli(system, "load", "--workspace", member["workspace"], str(early), "--json", check=False)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    assert json.loads(out.stdout) == {"loaded": 1}
    assert "row b-year0: INVALID_ARGUMENT: occurred_at: not an ISO 8601 time between years 1 and 9999" in out.stderr
    for missing in ("nowhere.jsonl", ""):
        gone = cli(system, "load", "--workspace", member["workspace"], str(tmp_path / missing), check=False)
        assert gone.returncode != 0 and "Traceback" not in gone.stderr
        assert ("no such file" if missing else "a folder, not a file") in gone.stderr


def test_output_into_a_closed_pipe_stops_quietly(system, member, tmp_path):
    """`recallatron list | head -1` (here: a pipe whose reader has gone) must not end in a
    BrokenPipeError traceback (a new user saw one)."""
    path = tmp_path / "many.jsonl"
    path.write_text(
        "".join(json.dumps({"id": f"p{i}", "body": f"Pipe line {i} of the harbour log."}) + "\n" for i in range(300))
    )
    cli(system, "load", "--workspace", member["workspace"], str(path))
    env = dict(system["env"], RECALLATRON_TOKEN=member["token"])
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write meets EPIPE
    try:
        writer = subprocess.run(
            [sys.executable, "-m", "cli.main", "list", "--page-size", "300", "--gateway", system["gateway"]],
            cwd=ROOT,
            env=env,
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert "Traceback" not in writer.stderr and "BrokenPipeError" not in writer.stderr, writer.stderr
    assert writer.returncode in (0, 141)


def test_up_serves_the_web_screen(system, member):
    """`up` started `recallatron web` on RECALLATRON_WEB_ADDR over its gateway: the login page, and a
    sign-in as a member that reaches the gateway (a bad token comes back UNAUTHENTICATED)."""
    base = f"http://{system['web']}"
    assert urllib.request.urlopen(f"{base}/healthz").read() == b"ok"
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    page = browser.open(f"{base}/login").read().decode()
    assert "Member token" in page
    csrf = re.search(r'name="csrftoken" value="([^"]+)"', page).group(1)

    def sign_in(token: str) -> str:
        form = urllib.parse.urlencode({"csrftoken": csrf, "token": token}).encode()
        try:
            return browser.open(f"{base}/login", data=form).read().decode()
        except urllib.error.HTTPError as exc:
            return exc.read().decode()

    assert "UNAUTHENTICATED: " in sign_in("rct_not-a-token")
    assert "<h1>Search</h1>" in sign_in(member["token"])  # signed in, redirected to the search page
    assert (system["home"] / "run" / "web.pid").exists()


def test_up_refuses_when_the_web_port_is_taken(tmp_path):
    """Something listening on RECALLATRON_WEB_ADDR: `up` says so and starts nothing."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        env.update({"RECALLATRON_HOME": str(tmp_path), "RECALLATRON_WEB_ADDR": f"127.0.0.1:{port}"})
        for name in ("gateway", "store", "embed", "rank"):
            env[f"RECALLATRON_{name.upper()}_ADDR"] = f"127.0.0.1:{free_port()}"
        out = subprocess.run(
            [sys.executable, "-m", "cli.main", "up"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
    assert out.returncode == 1 and f"already in use: web (127.0.0.1:{port}; RECALLATRON_WEB_ADDR)" in out.stderr
    assert not (tmp_path / "run").exists()


def test_web_command_usage_errors(tmp_path):
    out = recallatron("web", "--addr", "nowhere", env={"RECALLATRON_HOME": str(tmp_path)})
    assert out.returncode == 2 and "expected HOST:PORT" in out.stderr
    out = recallatron("web", env={"RECALLATRON_WEB_ADDR": "127.0.0.1:99999"})
    assert out.returncode == 1 and "RECALLATRON_WEB_ADDR" in out.stderr


def test_children_die_with_a_killed_supervisor(tmp_path, pg):
    """Even a SIGKILLed `up` leaves no service behind (the children ask for SIGTERM on parent death)."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env.update({"RECALLATRON_HOME": str(tmp_path), "PYTHONUNBUFFERED": "1", "DATABASE_URL": pg})
    for name in ("gateway", "store", "embed", "rank"):
        env[f"RECALLATRON_{name.upper()}_ADDR"] = f"127.0.0.1:{free_port()}"
        env[f"RECALLATRON_{name.upper()}_METRICS_PORT"] = "0"
    env["RECALLATRON_WEB_ADDR"] = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "up"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pid_file = tmp_path / "run" / "rank.pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    rank = int(pid_file.read_text())
    time.sleep(2)
    assert proc.poll() is None  # the supervisor is still running when it is killed
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(rank, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(rank, 0)


def test_sigterm_stops_everything(own_system):
    system = own_system
    proc = system["proc"]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "recallatron stopped" in out
    for name in ("gateway", "store", "embed", "rank", "web"):
        pid = int((system["home"] / "run" / f"{name}.pid").read_text())
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert grpcurl(system, "list").returncode != 0
