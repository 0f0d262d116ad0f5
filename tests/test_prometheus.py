"""A real Prometheus (Debian's `prometheus`, installed by `make setup`) scrapes a `recallatron up`
stack with the jobs and metric paths of deploy/prometheus.yml, its targets moved to the stack's
metrics ports; the test reads its HTTP API: the four targets are up, the metrics have the values the
known calls must give, and calls from 200 different members add no series (no id, name or text in a
label). Prometheus missing fails the test."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
import yaml
from conftest import ROOT, SERVICES, free_port
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m

from client import bearer
from servicekit import clients
from servicekit.settings import Settings

pytestmark = pytest.mark.system

DEPLOY = ROOT / "deploy"
MISSING = "00000000-0000-4000-8000-000000000000"
PARROTS = ("Maria's parrot is called Captain.", "The parrot sleeps in a cage by the window.")


def derived_config(ports: dict[str, int]) -> dict:
    """deploy/prometheus.yml with each target moved from its service's default metrics port to the
    stack's, a 1 s scrape interval, and the rule files found by absolute path."""
    doc = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    default = {f"127.0.0.1:{Settings.model_fields[f'{s}_metrics_port'].default}": s for s in SERVICES}
    doc["global"] = {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
    doc["rule_files"] = [str(DEPLOY / f) for f in doc["rule_files"]]
    for job in doc["scrape_configs"]:
        for group in job["static_configs"]:
            assert all(default[t] == group["labels"]["service"] for t in group["targets"]), group
            group["targets"] = [f"127.0.0.1:{ports[default[t]]}" for t in group["targets"]]
    return doc


class Prometheus:
    """The HTTP API of a running Prometheus."""

    def __init__(self, url: str) -> None:
        self.url = url

    def get(self, path: str, **params) -> dict:
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f"{self.url}{path}?{query}", timeout=30) as resp:
            body = json.load(resp)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[tuple[dict, float]]:
        """An instant query: (labels, value) of each series."""
        return [(r["metric"], float(r["value"][1])) for r in self.get("/api/v1/query", query=expr)["result"]]

    def value(self, expr: str) -> float:
        """The value of an expression that yields one series (0.0 when it yields none)."""
        result = self.query(expr)
        assert len(result) <= 1, result
        return result[0][1] if result else 0.0

    def wait_scraped(self, after: float, timeout: float = 30.0) -> None:
        """Waits until every target has been scraped by a scrape that began after ``after`` (epoch s)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            stamps = [v for _, v in self.query('timestamp(up{job="recallatron"})')]
            if len(stamps) == len(SERVICES) and min(stamps) > after:
                return
            time.sleep(0.2)
        raise AssertionError(f"no scrape of every target after {after} within {timeout}s")

    def scraped_now(self) -> None:
        self.wait_scraped(time.time())


@pytest.fixture(scope="module")
def system(shared_system):
    """The session's shared system (tests/conftest.py), which these tests only call and read."""
    return shared_system


@pytest.fixture(scope="module")
def prometheus(system, tmp_path_factory):
    exe = shutil.which("prometheus")
    assert exe, "prometheus is not installed: `make setup` installs Debian's prometheus package"
    tmp = tmp_path_factory.mktemp("prometheus")
    (tmp / "prometheus.yml").write_text(yaml.safe_dump(derived_config(system["metrics"])))
    port = free_port()
    with (tmp / "prometheus.log").open("wb") as out:
        proc = subprocess.Popen(
            [
                exe,
                f"--config.file={tmp / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp / "prometheus.log").read_text()
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "prometheus not ready:\n" + (tmp / "prometheus.log").read_text()
            time.sleep(0.2)
        yield Prometheus(url)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class Client:
    """An operator and gRPC stubs on the stack's gateway."""

    def __init__(self, system) -> None:
        self.channel = clients.channel(system["gateway"])
        self.admin = gateway_pb2_grpc.AdminServiceStub(self.channel)
        self.memory = gateway_pb2_grpc.MemoryServiceStub(self.channel)
        self.op = bearer((system["home"] / "operator-token").read_text().strip())

    def workspace(self, name: str) -> str:
        return self.admin.CreateWorkspace(g.CreateWorkspaceRequest(name=name), metadata=self.op).workspace_id

    def member(self, workspace: str) -> tuple[str, tuple]:
        """(member id, call metadata) of a new member."""
        added = self.admin.AddMember(g.AddMemberRequest(workspace_id=workspace, role=m.ROLE_MEMBER), metadata=self.op)
        return added.member_id, bearer(added.token)

    def remember(self, md, body: str, audience=m.AUDIENCE_WORKSPACE) -> m.Memory:
        req = g.RememberRequest(purpose=m.PURPOSE_CONVERSATION, kind=m.KIND_NOTE, body=body, audience=audience)
        return self.memory.Remember(req, metadata=md).memory

    def recall(self, md, query: str, mode=m.RECALL_MODE_UNSPECIFIED) -> g.RecallResponse:
        req = g.RecallRequest(query=query, purpose=m.PURPOSE_CONVERSATION, mode=mode)
        return self.memory.Recall(req, metadata=md)

    def wait_backlog_empty(self) -> None:
        deadline = time.monotonic() + 120
        while self.admin.GetStatus(g.GetStatusRequest(), metadata=self.op).embedding_backlog:
            assert time.monotonic() < deadline, "embedding backlog did not drain"
            time.sleep(0.2)


@pytest.fixture(scope="module")
def client(system):
    c = Client(system)
    yield c
    c.channel.close()


def test_the_four_targets_of_the_deploy_config_are_up(prometheus, system):
    deadline = time.monotonic() + 30
    while True:
        targets = prometheus.get("/api/v1/targets", state="active")["activeTargets"]
        health = {t["labels"]["service"]: t["health"] for t in targets}
        if set(health.values()) == {"up"} or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert health == dict.fromkeys(SERVICES, "up"), targets
    assert {t["scrapeUrl"] for t in targets} == {f"http://127.0.0.1:{system['metrics'][s]}/metrics" for s in SERVICES}
    assert {t["labels"]["job"] for t in targets} == {"recallatron"}
    assert prometheus.value('sum(up{job="recallatron"})') == 4.0
    assert {r["name"] for g_ in prometheus.get("/api/v1/rules")["groups"] for r in g_["rules"]} >= {
        "RecallatronEmbedderDown",
        "RecallatronEmbeddingBacklogGrowing",
    }


def _counter(prometheus, name: str, **labels) -> float:
    """The sum over a counter's (or histogram part's) series matching ``labels``."""
    selector = ",".join(f'{k}="{v}"' for k, v in {"job": "recallatron", **labels}.items())
    return prometheus.value(f"sum({name}{{{selector}}})")


def test_known_calls_give_known_values(prometheus, client):
    ws = client.workspace("prometheus")
    _, md = client.member(ws)
    prometheus.scraped_now()
    docs = {
        k: _counter(prometheus, f"recallatron_embed_batch_size_{k}", operation="documents") for k in ("sum", "count")
    }
    for body in PARROTS:
        client.remember(md, body)
    client.wait_backlog_empty()
    watched = {
        "hybrid": (
            "recallatron_recalls_total",
            {"mode": "hybrid", "lexical": "true", "dense": "true", "reranked": "false"},
        ),
        "lexical": (
            "recallatron_recalls_total",
            {"mode": "lexical", "lexical": "true", "dense": "false", "reranked": "false"},
        ),
        "recalls": ("recallatron_recalls_total", {}),
        "gw_not_found": (
            "grpc_server_handled_total",
            {"service": "gateway", "grpc_method": "Read", "grpc_code": "NOT_FOUND"},
        ),
        "store_not_found": (
            "grpc_server_handled_total",
            {"service": "store", "grpc_method": "Read", "grpc_code": "NOT_FOUND"},
        ),
        "recall_ok": ("grpc_server_handled_total", {"service": "gateway", "grpc_method": "Recall", "grpc_code": "OK"}),
        "queries": ("recallatron_embed_batch_size_count", {"operation": "queries"}),
        "query_texts": ("recallatron_embed_batch_size_sum", {"operation": "queries"}),
        "query_seconds": ("recallatron_embed_batch_seconds_count", {"operation": "queries"}),
        **{
            f"{stage}_{part}": (f"recallatron_recall_candidates_{part}", {"stage": stage})
            for stage in ("lexical", "dense", "walked")
            for part in ("count", "sum")
        },
    }
    prometheus.scraped_now()
    before = {key: _counter(prometheus, name, **labels) for key, (name, labels) in watched.items()}
    hybrid = [client.recall(md, "parrot") for _ in range(3)]
    lexical = [client.recall(md, "parrot cage", m.RECALL_MODE_LEXICAL) for _ in range(2)]
    with pytest.raises(Exception) as missing:
        client.memory.Read(g.ReadRequest(id=MISSING), metadata=md)
    assert missing.value.code().name == "NOT_FOUND"
    prometheus.scraped_now()
    delta = {key: _counter(prometheus, name, **labels) - before[key] for key, (name, labels) in watched.items()}
    assert all(r.dense_available and r.counts.lexical and r.counts.dense for r in hybrid), hybrid
    assert delta["hybrid"] == 3 and delta["lexical"] == 2 and delta["recalls"] == 5
    assert delta["gw_not_found"] == 1 and delta["store_not_found"] == 1 and delta["recall_ok"] == 5
    assert delta["queries"] == 3 and delta["query_texts"] == 3 and delta["query_seconds"] == 3
    # Every row is readable here, so each arm's candidates are the rows of that arm that passed.
    assert delta["lexical_count"] == 5 and delta["lexical_sum"] == sum(r.counts.lexical for r in hybrid + lexical)
    assert delta["dense_count"] == 3 and delta["dense_sum"] == sum(r.counts.dense for r in hybrid)
    assert delta["walked_count"] == 5 and delta["walked_sum"] == sum(r.counts.fused for r in hybrid + lexical)
    assert {k: v for k, v in delta.items() if v < 0} == {}
    # The two new texts were embedded (in one batch or two), and nothing waits any more.
    assert _counter(prometheus, "recallatron_embed_batch_size_sum", operation="documents") - docs["sum"] == 2
    assert _counter(prometheus, "recallatron_embed_batch_size_count", operation="documents") - docs["count"] in (1, 2)
    assert _counter(prometheus, "recallatron_embedding_backlog") == 0
    assert _counter(prometheus, "recallatron_embedding_oldest_job_age_seconds") == 0
    # The store's pools (RECALLATRON_DB_POOL_MAX 4 each): the control pool and this test's workspace.
    pool = {
        labels["pool"]: value
        for labels, value in prometheus.query('recallatron_db_pool_max_connections{job="recallatron"}')
    }
    opened = {
        labels["pool"]: value for labels, value in prometheus.query('recallatron_db_pools_open{job="recallatron"}')
    }
    assert opened["control"] == 1 and opened["workspace"] >= 1
    assert pool == {"control": 4.0, "workspace": 4.0 * opened["workspace"]}
    assert _counter(prometheus, "recallatron_db_pool_connections", pool="control") >= 1
    assert _counter(prometheus, "recallatron_db_pool_requests_waiting") == 0
    assert _counter(prometheus, "recallatron_dependency_up", dependency="embed") == 1


def _default_install_series() -> dict[str, float]:
    """The re-ranker's series of a default install as deploy/alerts_test.yml feeds them to promtool
    (instance default:9451, each a constant "VxN"): metric name -> value."""
    out = {}
    for case in yaml.safe_load((DEPLOY / "alerts_test.yml").read_text())["tests"]:
        for series in case["input_series"]:
            if 'instance="default:9451"' in series["series"]:
                value, _, _ = series["values"].partition("x")
                out[series["series"].partition("{")[0]] = float(value)
    return out


def test_a_default_install_has_no_reranker_and_no_outage(prometheus, client):
    """`recallatron up` with nothing configured has no cross-encoder: recalls are not degraded, the
    breaker alert is not even pending, and the re-ranker's series are those deploy/alerts_test.yml
    gives promtool for a default install (its quiet case)."""
    ws = client.workspace("default re-ranker")
    _, md = client.member(ws)
    for body in PARROTS:
        client.remember(md, body)
    client.wait_backlog_empty()
    prometheus.scraped_now()
    before = _counter(prometheus, "recallatron_recall_degraded_total", stage="rerank")
    answers = [client.recall(md, "parrot") for _ in range(3)]
    assert [(r.reranked, r.dense_available, len(r.items)) for r in answers] == [(False, True, 2)] * 3
    with pytest.raises(Exception) as empty:  # bad input answers nothing and counts nothing
        client.recall(md, "")
    assert empty.value.code().name == "INVALID_ARGUMENT"
    prometheus.scraped_now()
    assert _counter(prometheus, "recallatron_recall_degraded_total", stage="rerank") == before
    exported = {
        name: prometheus.query(f'{name}{{job="recallatron", service="gateway", dependency="reranker"}}')
        for name in ("recallatron_breaker_open", "recallatron_dependency_configured", "recallatron_dependency_up")
    }
    assert {name: [v for _, v in got] for name, got in exported.items()} == {
        "recallatron_breaker_open": [0.0],
        "recallatron_dependency_configured": [0.0],
        "recallatron_dependency_up": [0.0],
    }
    assert _default_install_series() == {name: got[0][1] for name, got in exported.items()}
    # The rules are evaluated every second here: an alert whose expression held would be pending.
    assert prometheus.query('ALERTS{alertname="RecallatronBreakerOpen"}') == []
    assert _counter(prometheus, "recallatron_dependency_configured", dependency="embed") == 1


def _routine(client, workspace: str, i: int) -> str:
    """What each member does: joins, remembers, recalls, reads a missing memory; returns its id."""
    member, md = client.member(workspace)
    client.remember(md, f"Member {i} keeps a private note about the harbour.", audience=m.AUDIENCE_MEMBER)
    assert client.recall(md, "parrot").counts.fused >= 2
    with pytest.raises(Exception) as missing:
        client.memory.Read(g.ReadRequest(id=MISSING), metadata=md)
    assert missing.value.code().name == "NOT_FOUND"
    return member


def _series(prometheus) -> dict[str, float]:
    return {r["__name__"]: v for r, v in prometheus.query('count by (__name__) ({job="recallatron"})')}


def test_two_hundred_members_add_no_series(prometheus, client):
    ws = client.workspace("series")
    _, md = client.member(ws)
    for body in PARROTS:
        client.remember(md, body)
    members = [_routine(client, ws, 0)]  # every label value these calls use now exists
    client.wait_backlog_empty()
    prometheus.scraped_now()
    before = _series(prometheus)
    recalls = _counter(prometheus, "recallatron_recalls_total")
    members += [_routine(client, ws, i) for i in range(1, 201)]
    client.wait_backlog_empty()
    prometheus.scraped_now()
    assert len(set(members)) == 201
    assert _counter(prometheus, "recallatron_recalls_total") - recalls == 200  # the calls were seen
    assert _series(prometheus) == before
    values = {v for s in prometheus.get("/api/v1/series", **{"match[]": '{job="recallatron"}'}) for v in s.values()}
    assert not {v for v in values if any(x in v for x in (*members, ws, "harbour", "parrot", "private note"))}
