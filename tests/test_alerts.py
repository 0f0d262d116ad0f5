"""deploy/alerts.yml checked by Prometheus's own tool: `promtool check rules`, the rule unit tests in
deploy/alerts_test.yml (`promtool test rules`), and deploy/prometheus.yml loading the rules. promtool
comes from Debian's `prometheus` package (`make setup` installs it); without it these tests fail."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
ALERTS = {
    "RecallatronEmbedderDown",
    "RecallatronEmbeddingBacklogGrowing",
    "RecallatronErrorRatioHigh",
    "RecallatronRecallLatencyHigh",
    "RecallatronBreakerOpen",
}


def promtool(*args: str, cwd: Path = DEPLOY) -> subprocess.CompletedProcess:
    """Runs promtool; fails the test (never skips) when it is not installed."""
    exe = shutil.which("promtool")
    assert exe, "promtool not found: `make setup` installs Debian's prometheus package (apt-get install prometheus)"
    return subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def alert_names(path: Path) -> list[str]:
    return [r["alert"] for grp in yaml.safe_load(path.read_text())["groups"] for r in grp["rules"] if "alert" in r]


def test_rules_pass_promtool_check():
    out = promtool("check", "rules", "alerts.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 5 rules found" in out.stdout


def test_rule_unit_tests_pass():
    out = promtool("test", "rules", "alerts_test.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_prometheus_config_loads_the_rules():
    out = promtool("check", "config", "prometheus.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "1 rule files found" in out.stdout and "SUCCESS: 5 rules found" in out.stdout


def test_every_alert_has_a_firing_and_a_quiet_unit_test():
    assert set(alert_names(DEPLOY / "alerts.yml")) == ALERTS
    cases = [
        case for t in yaml.safe_load((DEPLOY / "alerts_test.yml").read_text())["tests"] for case in t["alert_rule_test"]
    ]
    fired = {c["alertname"] for c in cases if c["exp_alerts"]}
    quiet = {c["alertname"] for c in cases if not c["exp_alerts"]}
    assert fired == ALERTS and quiet == ALERTS


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("expr", "rate(recallatron_embedding_backlog) > 0", "expected type range vector"),  # the range is missing
        ("fro", "2m", "fro"),  # a misspelt `for`
    ],
)
def test_a_broken_rule_is_refused(tmp_path, field, value, message):
    rules = yaml.safe_load((DEPLOY / "alerts.yml").read_text())
    rules["groups"][0]["rules"][0][field] = value
    bad = tmp_path / "alerts.yml"
    bad.write_text(yaml.safe_dump(rules))
    out = promtool("check", "rules", str(bad))
    assert out.returncode != 0
    assert message in out.stdout + out.stderr


def test_a_wrong_expectation_fails_the_unit_tests(tmp_path):
    """The unit tests can fail: expecting the embedder alert while it is still pending is an error."""
    tests = yaml.safe_load((DEPLOY / "alerts_test.yml").read_text())
    tests["rule_files"] = [str(DEPLOY / "alerts.yml")]
    pending = tests["tests"][0]["alert_rule_test"][0]
    assert pending["alertname"] == "RecallatronEmbedderDown" and pending["exp_alerts"] == []
    pending["exp_alerts"] = tests["tests"][0]["alert_rule_test"][1]["exp_alerts"]
    wrong = tmp_path / "alerts_test.yml"
    wrong.write_text(yaml.safe_dump(tests))
    out = promtool("test", "rules", str(wrong), cwd=tmp_path)
    assert out.returncode != 0
    assert "FAILED" in out.stdout + out.stderr and "RecallatronEmbedderDown" in out.stdout + out.stderr
