"""deploy/ checked by tools and by running it.

- compose.yaml against the Compose specification's JSON schema, as vendored inside the pinned
  check-jsonschema (``--builtin-schema vendor.compose-spec``; no network);
- every Kubernetes manifest as each overlay of deploy/k8s renders it (`kubectl kustomize`, Debian's
  kubectl) against the API schemas of the pinned Kubernetes versions (kubernetes-validate, strict:
  unknown fields are errors; a kind it has no schema for is an error here, where its CLI only
  warns), plus what the manifests must carry: resource requests and limits, a
  HorizontalPodAutoscaler and a PodDisruptionBudget for each stateless service, the Prometheus
  scrape annotations naming the metrics port, headless Services for the internal services, and the
  several-servers overlay's database servers file;
- the four services started as compose would start them: each with exactly the environment
  compose.yaml gives it (on top of the image's RECALLATRON_* defaults from the Dockerfile), the
  Dockerfile's entrypoint, compose's start order and health checks (the probe script itself), host
  names mapped to 127.0.0.1 and every port to a free one, and the embedded PostgreSQL standing in
  for the ``postgres`` service; then they must become healthy and answer a recall.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import grpc
import kubernetes_validate
import kubernetes_validate.utils
import pytest
import yaml
from psycopg.conninfo import conninfo_to_dict
from recallatron.gateway.v1 import gateway_pb2 as g
from recallatron.gateway.v1 import gateway_pb2_grpc
from recallatron.memory.v1 import memory_pb2 as m

from client import bearer
from servicekit import clients
from servicekit.embedded_pg import EmbeddedPostgres

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
CHECK_JSONSCHEMA = str(Path(sys.executable).parent / "check-jsonschema")
# The oldest Kubernetes the manifests claim (native gRPC probes are GA from 1.27; deploy/README.md)
# and the newest whose schemas the pinned kubernetes-validate ships.
K8S_VERSIONS = ("1.27.0", "1.37.0")
STATELESS = ("gateway", "rank", "embed")
SERVICES = ("store", "embed", "rank", "gateway")
# HTTP front ends in the manifests besides the four gRPC services.
FRONT_ENDS = ("web", "mcp")
OVERLAYS = ("single-server", "several-servers")


def compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def rendered(overlay: str) -> list[dict]:
    """The documents ``kubectl kustomize`` renders for one overlay of deploy/k8s."""
    out = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY / "k8s" / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def manifests(overlay: str = "single-server") -> list[tuple[str, dict]]:
    """(overlay, document) for every document an overlay renders."""
    return [(overlay, doc) for doc in rendered(overlay)]


def check_compose(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [CHECK_JSONSCHEMA, "--builtin-schema", "vendor.compose-spec", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def k8s_errors(doc: dict) -> list[str]:
    """What is wrong with one manifest under each pinned version (empty when it validates)."""
    errors = []
    for version in K8S_VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{version}: {'.'.join(map(str, exc.path))}: {exc.message}")
        except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.utils.VersionNotSupportedError) as exc:
            errors.append(f"{version}: {exc.message}")
    return errors


# ---- Compose specification -------------------------------------------------------------------


def test_compose_file_matches_the_compose_specification():
    out = check_compose(DEPLOY / "compose.yaml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "validation done" in out.stdout


def test_compose_schema_refuses_a_misspelt_key(tmp_path):
    doc = compose()
    doc["services"]["store"]["healthcheck"]["intervall"] = doc["services"]["store"]["healthcheck"].pop("interval")
    bad = tmp_path / "compose.yaml"
    bad.write_text(yaml.safe_dump(doc))
    out = check_compose(bad)
    assert out.returncode == 1
    assert "intervall" in out.stdout + out.stderr


def test_compose_schema_refuses_a_wrong_type(tmp_path):
    doc = compose()
    doc["services"]["gateway"]["depends_on"] = "store"  # a string where a list or mapping belongs
    bad = tmp_path / "compose.yaml"
    bad.write_text(yaml.safe_dump(doc))
    out = check_compose(bad)
    assert out.returncode == 1
    assert "depends_on" in out.stdout + out.stderr


# ---- Kubernetes manifests --------------------------------------------------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_manifest_validates_against_the_pinned_kubernetes_versions(overlay):
    docs = manifests(overlay)
    assert len(docs) == 24  # 6 Deployments, 6 Services, 3 HPAs, 5 PDBs, 4 network policies
    assert {doc["metadata"]["namespace"] for _, doc in docs} == {"recallatron"}
    failures = {f"{name} {doc['kind']}/{doc['metadata']['name']}": k8s_errors(doc) for name, doc in docs}
    assert {k: v for k, v in failures.items() if v} == {}


def test_validation_refuses_an_unknown_field_and_an_unknown_kind():
    deployment = next(doc for _, doc in manifests() if doc["kind"] == "Deployment")
    typo = json.loads(json.dumps(deployment))
    typo["spec"]["replica"] = 2
    assert any("replica" in e for e in k8s_errors(typo)), k8s_errors(typo)
    wrong_group = {
        **next(doc for _, doc in manifests() if doc["kind"] == "HorizontalPodAutoscaler"),
        "apiVersion": "autoscaling/v9",
    }
    assert any("autoscaling/v9" in e for e in k8s_errors(wrong_group)), k8s_errors(wrong_group)


def _by_kind(kind: str, overlay: str = "single-server") -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for _, doc in manifests(overlay) if doc["kind"] == kind}


def test_containers_have_requests_limits_and_scrape_annotations():
    deployments = _by_kind("Deployment")
    assert set(deployments) == {f"recallatron-{s}" for s in (*SERVICES, *FRONT_ENDS)}
    for name, dep in deployments.items():
        pod = dep["spec"]["template"]
        for c in pod["spec"]["containers"]:
            for part in ("requests", "limits"):
                assert set(c["resources"][part]) == {"cpu", "memory"}, (name, part)
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                assert probe in c, (name, probe)
        if name.removeprefix("recallatron-") in FRONT_ENDS:
            continue
        notes = pod["metadata"]["annotations"]
        metrics_port = next(
            p["containerPort"] for c in pod["spec"]["containers"] for p in c["ports"] if p["name"] == "metrics"
        )
        assert notes == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(metrics_port),
            "prometheus.io/path": "/metrics",
        }, name
        env = {e["name"]: e.get("value") for c in pod["spec"]["containers"] for e in c["env"]}
        service = name.removeprefix("recallatron-")
        assert env[f"RECALLATRON_{service.upper()}_METRICS_PORT"] == str(metrics_port)


def test_stateless_services_autoscale_and_keep_a_pod_through_disruptions():
    deployments, hpas = _by_kind("Deployment"), _by_kind("HorizontalPodAutoscaler")
    pdbs = _by_kind("PodDisruptionBudget")
    assert set(hpas) == {f"recallatron-{s}" for s in STATELESS}
    assert set(pdbs) == {f"recallatron-{s}" for s in (*STATELESS, *FRONT_ENDS)}
    for name in (f"recallatron-{s}" for s in FRONT_ENDS):
        assert pdbs[name]["spec"]["minAvailable"] < deployments[name]["spec"]["replicas"], name
    for name, hpa in hpas.items():
        dep = deployments[name]
        assert hpa["apiVersion"] == "autoscaling/v2"
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        assert "replicas" not in dep["spec"], f"{name}: the autoscaler owns the replica count"
        assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
        pdb = pdbs[name]["spec"]
        assert pdb["selector"]["matchLabels"] == dep["spec"]["template"]["metadata"]["labels"]
        assert pdb["minAvailable"] < hpa["spec"]["minReplicas"], f"{name}: a budget no drain can satisfy"


def test_internal_services_are_headless_so_clients_reach_every_pod():
    """store, embed and rank resolve to every pod (clusterIP None), which their clients' round_robin
    spreads calls over (docs/scaling.md); the gateway, web screen and MCP server keep a cluster IP."""
    services = _by_kind("Service")
    assert {name for name, svc in services.items() if svc["spec"].get("clusterIP") == "None"} == {
        "recallatron-store",
        "recallatron-embed",
        "recallatron-rank",
    }
    assert set(services) == {f"recallatron-{s}" for s in (*SERVICES, *FRONT_ENDS)}


def test_the_several_servers_overlay_gives_the_store_its_servers_file_and_changes_nothing_else():
    single, several = ({(doc["kind"], doc["metadata"]["name"]): doc for _, doc in manifests(o)} for o in OVERLAYS)
    assert set(single) == set(several)
    changed = {key for key in single if single[key] != several[key]}
    assert changed == {("Deployment", "recallatron-store")}
    pod = several[("Deployment", "recallatron-store")]["spec"]["template"]["spec"]
    (store,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in store["env"]}
    path = env["RECALLATRON_DATABASE_SERVERS_FILE"]
    mounts = {m["name"]: m["mountPath"] for m in store["volumeMounts"]}
    assert path.startswith(mounts["database-servers"] + "/") and env["RECALLATRON_CONTROL_SERVER"] == "main"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["database-servers"]["secret"] == {"secretName": "recallatron-database-servers"}
    assert "DATABASE_URL" in env  # the control plane's server is still DATABASE_URL, from its Secret


# ---- the four services, started as compose starts them ----------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dockerfile_instructions(name: str) -> list[str]:
    """The arguments of every ``name`` instruction in deploy/Dockerfile (continuation lines joined)."""
    text = re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())
    return [line.split(None, 1)[1] for line in text.splitlines() if line.split(None, 1)[:1] == [name]]


def image_env(tmp: Path) -> dict[str, str]:
    """The image's RECALLATRON_* defaults (Dockerfile ENV), its /tmp standing for ``tmp``."""
    env = {}
    for args in dockerfile_instructions("ENV"):
        for word in shlex.split(args):
            key, _, value = word.partition("=")
            if key.startswith("RECALLATRON_"):
                env[key] = re.sub(r"^/tmp(?=/|$)", str(tmp), value)
    return env


def entrypoint(service: dict | None = None) -> list[str]:
    """The service's entrypoint (its own, else the Dockerfile's ENTRYPOINT), with the installed
    ``recallatron`` script run from this checkout."""
    if service is not None and "entrypoint" in service:
        exe, *rest = service["entrypoint"]
    else:
        (args,) = dockerfile_instructions("ENTRYPOINT")
        exe, *rest = json.loads(args)
    assert exe == "recallatron"
    return [sys.executable, "-m", "cli.main", *rest]


class Mapping:
    """Turns a compose environment into this machine's: service host names to 127.0.0.1, each
    port to a free one (the same port number maps to the same free port everywhere), secrets to
    files in a folder, and the ``postgres`` service's URL to the embedded server's."""

    def __init__(self, doc: dict, database_url: str, secrets: Path) -> None:
        self.hosts = set(doc["services"])
        self.ports: dict[int, int] = {}
        self.database_url, self.secrets = database_url, secrets

    def port(self, number: int | str) -> int:
        return self.ports.setdefault(int(number), free_port())

    def value(self, service: dict, key: str, value: str) -> str:
        if key == "DATABASE_URL":
            url = urlsplit(value)
            assert url.hostname == "postgres" and url.scheme == "postgresql", value
            assert conninfo_to_dict(self.database_url)["dbname"] == url.path.lstrip("/"), "control database name"
            return self.database_url
        assert "${" not in value, f"{key}: unexpected interpolation in {value!r}"
        if key.endswith("_METRICS_PORT"):
            return str(self.port(value))
        if value.startswith("/run/secrets/"):
            name = value.removeprefix("/run/secrets/")
            assert name in service.get("secrets", []), f"{key} names secret {name!r}, not given to the service"
            return str(self.secrets / name)
        host, sep, port = value.rpartition(":")
        if sep and port.isdigit() and (host in self.hosts or host == "0.0.0.0"):
            return f"{'127.0.0.1' if host in self.hosts else host}:{self.port(port)}"
        return value

    def args(self, service: dict) -> list[str]:
        """The service's command, a listen address in it (``0.0.0.0:PORT``) mapped."""
        return [
            f"0.0.0.0:{self.port(arg.rpartition(':')[2])}" if re.fullmatch(r"0\.0\.0\.0:\d+", arg) else arg
            for arg in service["command"]
        ]

    def env(self, service: dict) -> dict[str, str]:
        return {k: self.value(service, k, str(v)) for k, v in service.get("environment", {}).items()}

    def health_command(self, service: dict) -> list[str]:
        """The service's compose health check as a command here (its port argument mapped)."""
        kind, exe, *args = service["healthcheck"]["test"]
        assert kind == "CMD" and exe == "python"
        return [sys.executable, *args[:-1], str(self.port(args[-1]))]


def seconds(text: str) -> float:
    """A compose duration of whole seconds ("10s")."""
    assert re.fullmatch(r"\d+s", text), text
    return float(text[:-1])


def health_budget(check: dict) -> float:
    """How long compose lets a service take to become healthy: start_period + retries x (interval + timeout)."""
    return seconds(check.get("start_period", "0s")) + check["retries"] * (
        seconds(check["interval"]) + seconds(check["timeout"])
    )


def start_order(services: dict) -> list[str]:
    """Services in an order where each comes after everything it depends on."""
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"dependency cycle: {' -> '.join(path + (name,))}"
        if name not in order:
            for dep in services[name].get("depends_on", {}):
                visit(dep, path + (name,))
            order.append(name)

    for name in services:
        visit(name, ())
    return order


@pytest.fixture(scope="module")
def compose_stack(tmp_path_factory):
    doc = compose()
    tmp = tmp_path_factory.mktemp("compose")
    secrets = tmp / "secrets"
    secrets.mkdir()
    (secrets / "operator_token").write_text("rco_compose_test_operator\n")
    assert set(doc["secrets"]) == {"operator_token"}
    pg = EmbeddedPostgres(tmp / "pg")  # stands for the `postgres` service (healthy once it answers)
    mapping = Mapping(doc, pg.control_url, secrets)
    base = {k: v for k, v in os.environ.items() if not k.startswith("RECALLATRON_") and k != "DATABASE_URL"}
    procs: dict[str, subprocess.Popen] = {}
    logs: dict[str, Path] = {}
    healthy = {"postgres"}

    def wait_healthy(name: str) -> None:
        service = doc["services"][name]
        deadline = time.monotonic() + health_budget(service["healthcheck"])
        probe = mapping.health_command(service)
        while time.monotonic() < deadline:
            assert procs[name].poll() is None, (
                f"{name} exited {procs[name].returncode}:\n{logs[name].read_text()[-3000:]}"
            )
            if subprocess.run(probe, capture_output=True, timeout=30, check=False).returncode == 0:
                healthy.add(name)
                return
            time.sleep(seconds(service["healthcheck"]["interval"]) / 10)
        raise AssertionError(
            f"{name} not healthy within {health_budget(service['healthcheck']):.0f}s:\n{logs[name].read_text()[-3000:]}"
        )

    try:
        for name in start_order(doc["services"]):
            if name == "postgres":
                continue
            service = doc["services"][name]
            for dep, cond in service.get("depends_on", {}).items():
                assert cond["condition"] in ("service_healthy", "service_started"), (name, dep)
                if cond["condition"] == "service_healthy" and dep not in healthy:
                    wait_healthy(dep)
            env = {**base, **image_env(tmp / name), **mapping.env(service)}
            logs[name] = tmp / f"{name}.log"
            with logs[name].open("wb") as log:
                procs[name] = subprocess.Popen(
                    entrypoint(service) + mapping.args(service),
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        for name in procs:
            if name not in healthy:
                wait_healthy(name)
        yield {
            "doc": doc,
            "mapping": mapping,
            "procs": procs,
            "logs": logs,
            "operator": (secrets / "operator_token").read_text().strip(),
        }
    finally:
        for name in reversed(list(procs)):
            if procs[name].poll() is None:
                procs[name].send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        pg.stop()


@pytest.mark.system
@pytest.mark.cluster
def test_mapping_covers_every_variable_compose_sets(compose_stack):
    """Nothing was left pointing at a container path, a compose host name or a compose port."""
    doc, mapping = compose_stack["doc"], compose_stack["mapping"]
    assert set(mapping.ports) == {50051, 50052, 50053, 50054, 9451, 9452, 9453, 9454, 8080, 8765}
    for name in (*SERVICES, *FRONT_ENDS):
        for key, value in mapping.env(doc["services"][name]).items():
            assert not re.search(r"\b(store|embed|rank|gateway|postgres):\d", value), (name, key, value)
            assert "/run/secrets" not in value, (name, key)


@pytest.mark.system
@pytest.mark.cluster
def test_the_compose_services_become_healthy_and_answer_a_recall(compose_stack):
    mapping = compose_stack["mapping"]
    channel = clients.channel(f"127.0.0.1:{mapping.port(50051)}")
    try:
        op = bearer(compose_stack["operator"])
        admin, memory = gateway_pb2_grpc.AdminServiceStub(channel), gateway_pb2_grpc.MemoryServiceStub(channel)
        workspace = admin.CreateWorkspace(g.CreateWorkspaceRequest(name="compose"), metadata=op).workspace_id
        token = admin.AddMember(g.AddMemberRequest(workspace_id=workspace, role=m.ROLE_MEMBER), metadata=op).token
        md = bearer(token)
        wanted = memory.Remember(
            g.RememberRequest(
                purpose=m.PURPOSE_CONVERSATION,
                kind=m.KIND_FACT,
                title="Pets",
                audience=m.AUDIENCE_WORKSPACE,
                body="Maria's parrot is called Captain.",
            ),
            metadata=md,
        ).memory
        memory.Remember(
            g.RememberRequest(
                purpose=m.PURPOSE_CONVERSATION,
                kind=m.KIND_NOTE,
                title="Travel",
                audience=m.AUDIENCE_WORKSPACE,
                body="The team flies to Lisbon in March.",
            ),
            metadata=md,
        )
        deadline = time.monotonic() + 120
        while admin.GetStatus(g.GetStatusRequest(), metadata=op).embedding_backlog != 0:
            assert time.monotonic() < deadline, "embedding backlog did not drain"
            time.sleep(0.2)
        status = {d.name: d.serving for d in admin.GetStatus(g.GetStatusRequest(), metadata=op).dependencies}
        assert status["store"] and status["embed"] and status["rank"], status
        resp = memory.Recall(
            g.RecallRequest(query="what is the name of Maria's bird?", purpose=m.PURPOSE_CONVERSATION, top_k=2),
            metadata=md,
        )
        assert resp.dense_available
        assert resp.items[0].memory.id == wanted.id
        assert resp.items[0].memory.body == "Maria's parrot is called Captain."
        with pytest.raises(grpc.RpcError) as refused:  # and a bad call gets its status, not a crash
            memory.Recall(g.RecallRequest(query="parrot", purpose=m.PURPOSE_CONVERSATION), metadata=op)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    finally:
        channel.close()


@pytest.mark.system
@pytest.mark.cluster
def test_the_web_screen_and_the_mcp_server_answer_as_compose_starts_them(compose_stack):
    """The front ends compose adds: the screen's sign-in page over the compose gateway, and the MCP
    endpoint refusing a request without a member token (401), as it must."""
    mapping = compose_stack["mapping"]
    with urllib.request.urlopen(f"http://127.0.0.1:{mapping.port(8080)}/healthz", timeout=10) as resp:
        assert resp.status == 200
    with urllib.request.urlopen(f"http://127.0.0.1:{mapping.port(8080)}/", timeout=10) as resp:
        assert resp.status == 200 and "token" in resp.read().decode().lower()
    request = urllib.request.Request(
        f"http://127.0.0.1:{mapping.port(8765)}/mcp",
        data=b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}',
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 401


@pytest.mark.system
@pytest.mark.cluster
def test_every_metric_the_alerts_use_is_exported(compose_stack):
    """deploy/alerts.yml names only metrics that the running services publish on their metrics ports."""
    mapping = compose_stack["mapping"]
    rules = yaml.safe_load((DEPLOY / "alerts.yml").read_text())
    exprs = " ".join(r["expr"] for grp in rules["groups"] for r in grp["rules"])
    used = set(re.findall(r"\b((?:recallatron|grpc_server)_[a-z_]+)\b", exprs))
    assert {"recallatron_dependency_up", "grpc_server_handling_seconds_bucket"} <= used
    exported = ""
    for port in (9451, 9452, 9453, 9454):
        with urllib.request.urlopen(f"http://127.0.0.1:{mapping.port(port)}/metrics", timeout=10) as resp:
            exported += resp.read().decode()
    names = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", exported, re.MULTILINE))
    assert used - names == set()
