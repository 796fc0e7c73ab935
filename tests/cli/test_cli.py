"""The CLI through typer's CliRunner: --json parsed, stderr empty, exit codes."""

import json
from decimal import Decimal

import pytest
from typer.testing import CliRunner

from gpucloud.cli import app


@pytest.fixture
def cli():
    runner = CliRunner()

    def invoke(*args, input=None):
        return runner.invoke(app, list(args), input=input)
    return invoke


def as_json(result):
    assert result.stderr == ""
    return json.loads(result.stdout)


def test_offers_without_credentials_lists_catalog_prices_from_several_providers(cli):
    result = cli("offers", "--gpu", "h100", "--count", "8", "--json")
    assert result.exit_code == 0
    data = as_json(result)
    offers = data["offers"]
    assert len({o["provider"] for o in offers}) >= 2
    assert all(o["source"] == "catalog" and o["gpu"] == "H100" and o["gpu_count"] == 8
               for o in offers)
    # cheapest first among the fully priced; those with an unknown part after them
    priced = [Decimal(o["price_per_hour"]) for o in offers if not o["unknown"]]
    assert priced == sorted(priced)
    marks = [bool(o["unknown"]) for o in offers]
    assert marks == sorted(marks)
    assert isinstance(offers[0]["price_per_hour"], str)


def test_offers_table_labels_catalog_prices(cli):
    result = cli("offers", "--gpu", "H100 80GB", "--count", "8")
    assert result.exit_code == 0
    assert "catalog 2026-11-30" in result.stdout and "lambda" in result.stdout


def test_unknown_gpu_suggests(cli):
    result = cli("offers", "--gpu", "h1000")
    assert result.exit_code == 2
    assert "did you mean H100" in result.stderr


def test_unknown_gpu_under_json_is_one_json_error(cli):
    data = as_json(cli("offers", "--gpu", "h1000", "--json"))
    assert data["error"]["exit_code"] == 2 and "H100" in data["error"]["message"]


@pytest.mark.parametrize("count", ["0", "-8"])
def test_bad_count_is_a_usage_error(cli, count):
    result = cli("offers", "--gpu", "h100", "--count", count)
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_estimate_json(cli):
    result = cli("estimate", "--gpu", "h100", "--count", "8", "--hours", "72h",
                 "--provider", "sandbox", "--json")
    data = as_json(result)
    assert Decimal(data["total"]) == Decimal(data["price_per_hour"]) * 72
    assert data["currency"] == "USD" and data["breakdown"][0]["component"] == "GPU instance"


def test_create_list_get_delete_roundtrip(cli):
    created = as_json(cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox",
                          "--auto-shutdown", "4h", "--yes", "--json"))
    instance = created["instance"]
    assert instance["ref"].startswith("sandbox/") and instance["simulated"] is True
    assert instance["shutdown_at"].endswith("Z")
    assert created["plan"]["estimate"]["hours"] == "4"
    assert [a["outcome"] for a in created["attempts"]] == ["created"]

    listed = as_json(cli("list", "--json"))
    assert instance["ref"] in [i["ref"] for i in listed["instances"]]
    got = as_json(cli("get", instance["ref"], "--json"))
    assert got["id"] == instance["id"]
    deleted = as_json(cli("delete", instance["ref"], "--yes", "--json"))
    assert deleted == {"deleted": [instance["ref"]], "failed": [], "warnings": []}


def test_create_prints_plan_before_creating(cli):
    result = cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox", "--yes")
    assert result.exit_code == 0
    out = result.stdout
    assert out.index("Plan:") < out.index("created sandbox/")
    assert "SIMULATED" in out and "Next cheapest" in out and "$19.92" in out


def test_json_without_yes_exits_8_and_creates_nothing(cli):
    data = as_json(cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox",
                       "--json"))
    assert data["error"]["exit_code"] == 8
    assert as_json(cli("list", "--json"))["instances"] == []


def test_declined_confirmation_creates_nothing(cli):
    result = cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox", input="n\n")
    assert result.exit_code == 8
    assert as_json(cli("list", "--json"))["instances"] == []


def test_dry_run_creates_nothing(cli):
    data = as_json(cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox",
                       "--dry-run", "--json"))
    assert data["dry_run"] is True and data["plan"]["offer"]["provider"] == "sandbox"
    assert as_json(cli("list", "--json"))["instances"] == []


def test_max_cost_refuses_with_its_exit_code(cli):
    result = cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox",
                 "--auto-shutdown", "10h", "--max-cost", "100", "--yes")
    assert result.exit_code == 7
    assert result.stderr.startswith("error: estimate $199.20 over 10h exceeds --max-cost $100")
    assert "hint:" in result.stderr


def test_create_wait_reports_running(cli):
    data = as_json(cli("create", "--gpu", "l40s", "--provider", "sandbox", "--yes", "--wait",
                       "--json"))
    assert data["instance"]["status"] == "running"


def test_no_capacity_exit_code(cli, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_EXHAUST", "all")
    data = as_json(cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox",
                       "--yes", "--json"))
    assert data["error"]["exit_code"] == 6 and data["error"]["code"] == "no_capacity"


def test_missing_credentials_say_what_to_set(cli):
    result = cli("create", "--gpu", "h100", "--count", "8", "--provider", "lambda", "--yes")
    assert result.exit_code == 3
    assert "GPUCLOUD_LAMBDA_API_KEY" in result.stderr and "Traceback" not in result.output


def test_missing_credentials_anywhere(cli):
    data = as_json(cli("create", "--gpu", "h100", "--count", "8", "--yes", "--json"))
    assert data["error"]["exit_code"] == 3
    assert "--provider sandbox" in data["error"]["hint"]


def test_get_unknown_instance_is_not_found(cli):
    cli("list")  # make sure the sandbox db exists
    data = as_json(cli("get", "sandbox/sbx-doesnotexist", "--json"))
    assert data["error"]["exit_code"] == 5


@pytest.mark.parametrize("ref", ["/x", "sandbox/"])
def test_malformed_ref(cli, ref):
    result = cli("delete", ref, "--yes")
    assert result.exit_code == 2 and "provider/id" in result.stderr


def test_a_name_no_machine_has_is_not_found(cli):
    result = cli("delete", "nope", "--yes")  # a bare word is a name or an id prefix
    assert result.exit_code == 5 and "provider/id" in result.stderr


def test_unknown_provider_suggests(cli):
    result = cli("offers", "--gpu", "h100", "--provider", "lamda")
    assert result.exit_code == 2 and "lambda" in result.stderr


def test_providers_json(cli, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "k-123")
    data = as_json(cli("providers", "--json"))
    by_name = {p["name"]: p for p in data["providers"]}
    assert by_name["lambda"]["credentials"] is True
    assert by_name["lambda"]["source"] == "env:GPUCLOUD_LAMBDA_API_KEY"
    assert by_name["sandbox"]["simulated"] is True
    assert "k-123" not in json.dumps(data)


def test_providers_show_what_each_adapter_can_do(cli, tmp_path, monkeypatch):
    # A catalog-only provider (a price file, no adapter) has no capabilities.
    from gpucloud.config.settings import config_dir

    extra = config_dir() / "providers"
    extra.mkdir(parents=True, exist_ok=True)
    (extra / "acme.toml").write_text('name = "acme"\ndisplay_name = "Acme"\n'
                                     'api_base = "https://acme.example"\n'
                                     'instance_types = []\n')
    data = as_json(cli("providers", "--json"))
    caps = {p["name"]: p["capabilities"] for p in data["providers"]}
    assert caps["shadeform"]["native_shutdown"] is True  # auto_delete
    assert caps["vastai"]["self_guard"] is True and caps["vastai"]["native_shutdown"] is False
    assert caps["verda"]["spot"] is True and caps["lambda"]["spot"] is False
    assert set(caps["lambda"]) == {"spot", "stop_start", "custom_disk", "needs_ssh_key",
                                   "native_shutdown", "self_guard", "multi_node", "volumes",
                                   "shared_volumes", "multi_node_retries", "jobs"}
    # Lambda's and Verda's volumes mount on every node of a job they launch node by node.
    assert caps["lambda"]["shared_volumes"] is True and caps["verda"]["shared_volumes"] is True
    assert caps["hyperstack"]["shared_volumes"] is False
    assert caps["lambda"]["jobs"] is True and caps["hyperstack"]["jobs"] is False
    assert caps["sandbox"]["multi_node_retries"] is True
    assert caps["kubernetes"]["multi_node_retries"] is False
    assert caps.get("acme", "missing") is None
    table = cli("providers").stdout
    assert "deadline held by provider" in table and "CAPABILITIES" in table


def test_gpus_lists_canonical_names(cli):
    data = as_json(cli("gpus", "--json"))
    assert {"H100", "A100-40GB", "A100-80GB"} <= {g["name"] for g in data["gpus"]}


@pytest.fixture
def tty(monkeypatch):
    from gpucloud.cli.commands import instance as instance_cmds

    monkeypatch.setattr(instance_cmds, "_interactive", lambda: True)


def test_confirmation_prompt_yes_creates(cli, tty):
    result = cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox", input="y\n")
    assert result.exit_code == 0 and "Create this machine at $19.92/hour" in result.stderr
    assert len(as_json(cli("list", "--json"))["instances"]) == 1


def test_confirmation_prompt_no_declines(cli, tty):
    result = cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox", input="n\n")
    assert result.exit_code == 8 and "declined" in result.stderr
    assert as_json(cli("list", "--json"))["instances"] == []


def test_end_of_input_at_the_prompt_is_an_interruption(cli, tty):
    result = cli("create", "--gpu", "h100", "--count", "8", "--provider", "sandbox", input="")
    assert result.exit_code == 130 and "Traceback" not in result.output
    assert as_json(cli("list", "--json"))["instances"] == []


def test_several_machines(cli):
    data = as_json(cli("create", "--gpu", "h100", "--provider", "sandbox", "--instances", "2",
                       "--auto-shutdown", "1h", "--max-cost", "10", "--yes", "--json"))
    assert data["instance"] is None and len(data["instances"]) == 2
    assert data["plan"]["instances"] == 2
    assert Decimal(data["plan"]["total"]) == 2 * Decimal(data["plan"]["estimate"]["total"])
    over = as_json(cli("create", "--gpu", "h100", "--provider", "sandbox", "--instances", "3",
                       "--auto-shutdown", "2h", "--max-cost", "10", "--yes", "--json"))
    assert over["error"]["exit_code"] == 7  # 3 x 2 h x $2.49 > $10, though one would fit


def test_wait_timeout_still_reports_the_machine(cli, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_SANDBOX_BOOT_SECONDS", "3600")
    monkeypatch.setattr("time.sleep", lambda s: None)
    data = as_json(cli("create", "--gpu", "h100", "--provider", "sandbox", "--yes", "--wait",
                       "--timeout", "5", "--json"))
    assert data["error"]["exit_code"] == 9
    [machine] = data["instances"]
    assert machine["status"] == "pending" and machine["ref"].startswith("sandbox/")


def test_delete_goes_on_after_a_failure(cli):
    made = as_json(cli("create", "--gpu", "h100", "--provider", "sandbox", "--yes", "--json"))
    ref = made["instance"]["ref"]
    data = as_json(cli("delete", "sandbox/sbx-missing", ref, "--yes", "--json"))
    assert data["error"]["exit_code"] == 5 and data["deleted"] == [ref]
    assert as_json(cli("get", ref, "--json"))["status"] in ("terminating", "terminated")


def test_stop_where_unsupported_is_a_clear_error(cli, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "lambda-key")  # refused before any request
    data = as_json(cli("stop", "lambda/0920582c", "--json"))
    assert data["error"]["exit_code"] == 2 and "cannot stop" in data["error"]["message"]
    assert "gpucloud delete" in data["error"]["hint"]
