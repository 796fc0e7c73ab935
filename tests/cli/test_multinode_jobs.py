"""Multi-node jobs through the CLI and the SDK's plan: N machines planned,
priced and budgeted (max_cost, the monthly budget), refused at plan time
where the provider cannot place the nodes (exit 2, naming those that can),
and the NODES column / nodes and instances in --json."""

from __future__ import annotations

import json
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpucloud import Client, SpecError
from gpucloud.cli import app
from gpucloud.config.settings import config_dir

SANDBOX_8X_H100 = Decimal("19.92")  # per hour, from the bundled sandbox catalog


def job_file(tmp_path: Path, **extra: str) -> str:
    lines = {"name": "mn", "image": "pytorch/pytorch:2.4.0",
             "command": '[sh, -c, "torchrun --node_rank=$NODE_RANK train.py"]',
             "resources": "{gpu: h100, gpu_count: 8}", "nodes": "2", "max_runtime": "1h",
             **extra}
    path = tmp_path / "mn.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in lines.items()))
    return str(path)


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def able(line: str) -> list[str]:
    """The providers an error line names as able to run the job (the list
    grows as adapters declare multi_node)."""
    return line.rsplit("providers that can: ", 1)[1].split(", ")


@pytest.fixture(autouse=True)
def long_jobs(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_JOB_SECONDS", "60")


def test_the_plan_of_two_nodes_prices_two_machines(tmp_path):
    result = cli("submit", job_file(tmp_path), "--provider", "sandbox", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.stdout)["plan"]
    assert plan["instances"] == 2
    assert Decimal(plan["estimate"]["total"]) == SANDBOX_8X_H100  # one machine, 1 h
    assert Decimal(plan["total"]) == 2 * SANDBOX_8X_H100
    assert Decimal(plan["total_per_hour"]) == 2 * SANDBOX_8X_H100
    text = cli("submit", job_file(tmp_path), "--provider", "sandbox", "--dry-run")
    assert "Nodes: 2 x 8x H100 (sandbox sim.8xH100 in" in text.stdout
    assert "x 2 machines = $39.84/h" in text.stdout and "$39.84 USD" in text.stdout


def test_max_cost_counts_every_node(tmp_path):
    # One machine for an hour ($19.92) fits $30; two ($39.84) do not.
    result = cli("submit", job_file(tmp_path, max_cost='"30"'), "--provider", "sandbox",
                 "--dry-run")
    assert result.exit_code == 7, result.output
    assert "estimate $39.84 over 1h" in result.stderr and "2 machines" in result.stderr
    one = cli("submit", job_file(tmp_path, max_cost='"30"', nodes="1"), "--provider",
              "sandbox", "--dry-run")
    assert one.exit_code == 0, one.output


def test_the_monthly_budget_counts_every_node_at_plan_and_after_launch(tmp_path):
    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "config.toml").write_text('[budget]\nmonthly = "50"\n')
    planned = cli("submit", job_file(tmp_path), "--provider", "sandbox", "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert "this request $39.84" in planned.stdout
    submitted = cli("submit", job_file(tmp_path), "--provider", "sandbox", "--yes", "--json")
    assert submitted.exit_code == 0, submitted.output
    # Both nodes bill until the deadline: one more machine-hour ($19.92) is over $50.
    more = cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox",
               "--auto-shutdown", "1h", "--yes")
    assert more.exit_code == 7, more.output
    assert "committed $39.84" in more.stderr


def test_a_provider_that_cannot_place_nodes_is_refused_naming_those_that_can(tmp_path):
    for args in (["--provider", "vastai"], []):
        path = job_file(tmp_path, **({} if args else {"provider": "vastai"}))
        result = cli("submit", path, *args, "--dry-run")
        assert result.exit_code == 2, result.output
        first, *rest = result.stderr.splitlines()
        assert first.startswith("error: a 2-node job cannot run on vastai: vastai has no "
                                "multi-node support; providers that can: ")
        assert "sandbox" in able(first) and "vastai" not in able(first)
        assert rest[0].startswith("hint: pick one with --provider") and "nodes: 1" in rest[0]
    as_json = cli("submit", job_file(tmp_path), "--provider", "vastai", "--dry-run", "--json")
    assert as_json.exit_code == 2
    assert json.loads(as_json.stdout)["error"]["code"] == "invalid_spec"


def test_no_offer_on_a_provider_that_can_is_a_refusal_not_a_single_machine(tmp_path):
    # Offers there are (vastai's catalog sells 8x H100), but only where the
    # nodes cannot be placed: refused, naming why, before anything is sent.
    with Client(providers=["vastai"]) as client, pytest.raises(SpecError) as caught:
        client.plan_job(job_file(tmp_path), dry_run=True)
    assert "cannot run on vastai" in caught.value.message
    assert "sandbox" in able(caught.value.message)


def test_infiniband_needs_a_provider_that_places_the_nodes_itself(tmp_path, monkeypatch):
    from gpucloud.providers.lambdalabs.adapter import LambdaProvider

    # A "batch" provider launches separate machines: no InfiniBand promise.
    monkeypatch.setattr(LambdaProvider, "capabilities",
                        replace(LambdaProvider.capabilities, multi_node="batch"))
    fabric = job_file(tmp_path, placement="{interconnect: infiniband}")
    refused = cli("submit", fabric, "--provider", "lambda", "--dry-run")
    assert refused.exit_code == 2, refused.output
    assert ("lambda launches separate machines and cannot request or guarantee InfiniBand"
            in refused.stderr)
    named = able(refused.stderr.splitlines()[0])
    assert "sandbox" in named and "lambda" not in named  # batch cannot promise the fabric
    assert "interconnect: any" in refused.stderr
    assert cli("submit", fabric, "--provider", "sandbox", "--dry-run").exit_code == 0
    plain = cli("submit", job_file(tmp_path), "--provider", "lambda", "--dry-run")
    assert plain.exit_code == 0, plain.output  # without infiniband a batch provider plans


def test_volumes_on_many_nodes_need_a_provider_that_mounts_one_volume_on_each(tmp_path):
    """A batch provider whose volumes mount on many machines (Lambda's and
    Verda's shared filesystems) can run a multi-node job with volumes; one
    whose volumes could not (or that has none) is refused, naming those."""
    shared = job_file(tmp_path, volumes="[{name: datasets, mount: /data}]")
    for provider in ("hyperstack", "shadeform", "ssh"):
        refused = cli("submit", shared, "--provider", provider, "--dry-run")
        assert refused.exit_code == 2, refused.output
        first = refused.stderr.splitlines()[0]
        assert f"{provider} launches separate machines and cannot mount one volume on " \
               "every node" in first
        assert {"lambda", "verda", "sandbox"} <= set(able(first))
        assert provider not in able(first)
    # Lambda plans it from the catalog (no credentials: nothing to look the volume up in).
    planned = cli("submit", shared, "--provider", "lambda", "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert "2 nodes of" in planned.stdout


def test_list_and_get_show_the_nodes(tmp_path):
    made = cli("submit", job_file(tmp_path), "--provider", "sandbox", "--yes", "--json")
    job = json.loads(made.stdout)["job"]
    assert job["nodes"] == 2 and len(job["instances"]) == 2
    listed = cli("jobs", "list")
    header, row = listed.stdout.splitlines()[:2]
    assert header.split()[:5] == ["REF", "NAME", "STATUS", "NODES", "GPUS"]
    assert row.split()[4] == "2"  # after "(simulated)"
    got = json.loads(cli("jobs", "get", job["ref"], "--json").stdout)
    assert got["nodes"] == 2
    assert [i["ref"] for i in got["instances"]] == [i["ref"] for i in job["instances"]]
    assert got["instance"]["ref"] == got["instances"][0]["ref"]
    text = cli("jobs", "get", job["ref"]).stdout
    assert "8x H100 per node" in text
    nodes = next(line for line in text.splitlines() if line.startswith("nodes"))
    assert nodes.split(None, 1)[1].startswith("2: 0 sandbox/") and ", 1 sandbox/" in nodes


def test_the_launch_is_admitted_for_every_node(tmp_path):
    """The budget is checked again when the job is sent (the plan may be old):
    the intent commits both nodes, not one."""
    from gpucloud import BudgetExceededError

    config_dir().mkdir(parents=True, exist_ok=True)
    (config_dir() / "config.toml").write_text('[budget]\nmonthly = "50"\n')
    path = job_file(tmp_path)
    with Client(providers=["sandbox"]) as client:
        plan = client.plan_job(path, provider="sandbox")  # $39.84 of $50: fits now
        client.create(gpu="h100", count=8, provider="sandbox", auto_shutdown="1h")  # $19.92
        with pytest.raises(BudgetExceededError, match=r"this request \$39\.84"):
            client.submit(path, provider="sandbox", plan=plan)
        assert client.jobs() == []


def test_reconcile_counts_every_node_as_the_jobs_not_as_orphans(tmp_path):
    made = cli("submit", job_file(tmp_path), "--provider", "sandbox", "--yes", "--json")
    job = json.loads(made.stdout)["job"]
    report = cli("reconcile", "--terminate-orphans", "--yes", "--json")
    assert report.exit_code == 0, report.output
    doc = json.loads(report.stdout)
    assert doc["orphans"] == [] and doc["terminated"] == []
    listed = json.loads(cli("list", "--json").stdout)["instances"]
    assert {i["id"]: i["status"] for i in listed} == {
        i["id"]: "running" for i in job["instances"]}


def test_cancel_ends_every_node_in_the_cost_ledger(tmp_path):
    from gpucloud.config.settings import state_db_path
    from gpucloud.safety.journal import Journal
    from gpucloud.safety.ledger import Ledger

    made = cli("submit", job_file(tmp_path), "--provider", "sandbox", "--yes", "--json")
    job = json.loads(made.stdout)["job"]
    cancelled = cli("jobs", "cancel", job["ref"], "--yes", "--json")
    assert cancelled.exit_code == 0, cancelled.output
    assert json.loads(cancelled.stdout)["job"]["status"] == "cancelled"
    nodes = [("sandbox", i["id"]) for i in job["instances"]]
    latest = Ledger(Journal(state_db_path())).latest(nodes)
    assert sorted(latest) == sorted(nodes)
    assert {row.event for row in latest.values()} == {"terminated"}  # billing ends for both


def test_a_plan_made_for_one_machine_does_not_submit_a_multi_node_job(tmp_path):
    path = job_file(tmp_path)
    with Client(providers=["sandbox"]) as client:
        (tmp_path / "one").mkdir()
        one = client.plan_job(job_file(tmp_path / "one", nodes="1"), provider="sandbox")
        with pytest.raises(SpecError, match="the plan is for 1 machine"):
            client.submit(path, provider="sandbox", plan=one)
        assert client.jobs() == []


def test_a_one_node_job_is_planned_only_where_a_job_runs_to_completion(tmp_path):
    """Hyperstack, Shadeform and Fluidstack make machines for use over SSH and
    run no job's container: a one-node job is refused when planned (a dry run
    included), naming the providers that can, not at submit."""
    one = job_file(tmp_path, nodes="1")
    for provider in ("hyperstack", "shadeform", "fluidstack"):
        refused = cli("submit", one, "--provider", provider, "--dry-run")
        assert refused.exit_code == 2, refused.output
        first = refused.stderr.splitlines()[0]
        assert first.startswith(f"error: a one-node job cannot run on {provider}: ")
        assert "sandbox" in able(first) and provider not in able(first)
    # Offers there are (the catalog's), but none where the job can run.
    with Client(providers=["hyperstack"]) as client, pytest.raises(SpecError) as caught:
        client.plan_job(one, dry_run=True)
    assert "one-node job cannot run on hyperstack" in caught.value.message
    # The same provider still takes a multi-node job (launched as a batch).
    assert cli("submit", job_file(tmp_path), "--provider", "hyperstack",
               "--dry-run").exit_code == 0
