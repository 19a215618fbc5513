"""`deploy-tts plan`: the arithmetic, the committed price table, and no invented capacity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli import deploy_tts, plan
from cli.aws import CliError

runner = CliRunner()


def test_price_table_names_its_source_and_date() -> None:
    prices = plan.load_prices()
    assert prices["source"].startswith("https://") and prices["retrieved"]
    assert prices["usd_per_hour"]["ml.g5.xlarge"] > 0


@pytest.mark.parametrize(("sessions", "capacity", "instances", "target"), [
    (40, 12, 5, 9),    # target 9 (75 % of 12): 40 / 9 -> 5 instances
    (9, 12, 1, 9),     # exactly at the target: one instance
    (10, 12, 2, 9),
    (1, 1, 1, 1),      # a capacity of one still gets a target of one
])
def test_plan_arithmetic(sessions: int, capacity: int, instances: int, target: int) -> None:
    prices = {"source": "s", "retrieved": "d", "usd_per_hour": {"ml.g5.xlarge": 1.5}}
    result = plan.make_plan(sessions=sessions, instance_type="ml.g5.xlarge",
                            capacity=plan.Capacity(sessions=capacity, source="x"), prices=prices)
    assert (result.instances, result.scaling_target) == (instances, target)
    assert result.usd_per_hour == pytest.approx(1.5 * instances)
    assert result.usd_per_month == pytest.approx(1.5 * instances * 730)


def test_plan_cli_json_uses_the_committed_price() -> None:
    result = runner.invoke(deploy_tts.app, ["plan", "--sessions", "40", "--sessions-per-instance", "12", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    rate = plan.load_prices()["usd_per_hour"]["ml.g5.xlarge"]
    assert body["instances"] == 5 and body["usd_per_hour"] == pytest.approx(5 * rate)
    assert "retrieved" in body["price_source"]


def test_no_measured_figure_is_said_not_invented() -> None:
    result = runner.invoke(deploy_tts.app, ["plan", "--sessions", "10", "--instance-type", "ml.g6.xlarge"])
    assert result.exit_code != 0
    assert "no measured sessions-per-instance figure for ml.g6.xlarge" in result.output


def test_the_default_type_is_planned_from_the_labelled_estimate() -> None:
    """Until bench/results holds a measurement for ml.g5.xlarge, plan uses the stack's own
    estimate (its unmeasured scaling target) and says so."""
    if plan.measured_capacity("ml.g5.xlarge") is not None:
        pytest.skip("a measured figure exists; the estimate is no longer used")
    result = runner.invoke(deploy_tts.app, ["plan", "--sessions", "10", "--json"])
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["capacity_measured"] is False and "ESTIMATE" in body["capacity_source"]
    assert body["scaling_target"] == 8  # the same figure the stack's autoscaling uses unmeasured
    text = runner.invoke(deploy_tts.app, ["plan", "--sessions", "10"]).output
    assert "ESTIMATE" in text


def test_plan_respects_max_instances_and_the_quota() -> None:
    prices = {"source": "s", "retrieved": "d", "usd_per_hour": {}}
    result = plan.make_plan(sessions=40, instance_type="ml.g5.xlarge", capacity=plan.Capacity(sessions=12, source="x"),
                            prices=prices, max_instances=2, quota=4)
    assert result.instances == 5 and result.update_peak_instances == 8  # 5 + a rolling batch of 3
    (too_few, quota) = result.problems
    assert "maxInstances is 2" in too_few and "--max-instances 5" in too_few
    assert "quota is 4" in quota and "request 8" in quota
    fits = plan.make_plan(sessions=9, instance_type="ml.g5.xlarge", capacity=plan.Capacity(sessions=12, source="x"),
                          prices=prices, max_instances=2, quota=2)
    assert fits.problems == ()


def test_an_unpriced_instance_type_says_so() -> None:
    result = runner.invoke(deploy_tts.app, ["plan", "--sessions", "4", "--instance-type", "ml.c7i.xlarge",
                                            "--sessions-per-instance", "4"])
    assert result.exit_code == 0 and "no price known" in result.output


def test_measured_capacity_is_read_from_a_results_file(tmp_path: Path) -> None:
    fake = tmp_path / "capacity.json"
    fake.write_text(json.dumps({"timestamp": "2026-12-01T00:00:00+00:00",
                                "capacity": {"instance_type": "ml.g5.xlarge", "sessions": 16, "budget_ms": 1000}}))
    found = plan.measured_capacity("ml.g5.xlarge", (fake,))
    assert found is not None and found.sessions == 16 and "2026-12-01" in found.source
    assert plan.measured_capacity("ml.m5.xlarge", (fake,)) is None


def test_bad_sessions_is_a_clear_error() -> None:
    with pytest.raises(CliError, match="--sessions"):
        plan.make_plan(sessions=0, instance_type="ml.g5.xlarge", capacity=plan.Capacity(sessions=4, source="x"),
                       prices=plan.load_prices())
