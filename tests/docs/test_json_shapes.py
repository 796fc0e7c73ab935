"""Every command's --json top-level keys are what README's "JSON output" table
says: the test reads the table, so the two cannot drift."""

from __future__ import annotations

import json

from pathlib import Path

import httpx
import pytest
import respx
from typer.testing import CliRunner

from gpucloud.cli import app
from tests import _fake_ssh
from tests.docs._readme import instance_fields, json_table

KEY = "sk-json-shape-0123456789"
LAMBDA_VM = "0920582c7ff041399e34823a0be62549"  # the spec's Instance example
JOB = str(Path(__file__).resolve().parents[2] / "examples" / "train-job.yaml")
# How each documented command is run (in this order: later ones use the machine
# "shape" that `create` makes; {ref} is its provider/id).
RUNS = {
    "offers": ["offers", "--gpu", "h100", "--count", "8"],
    "estimate": ["estimate", "--gpu", "h100", "--provider", "sandbox"],
    "create --dry-run": ["create", "--gpu", "h100", "--provider", "sandbox", "--dry-run"],
    "create": ["create", "--gpu", "h100", "--provider", "sandbox", "--name", "shape", "--yes"],
    "list": ["list"],
    "get": ["get", "shape"],
    # ssh needs a machine with an ssh connection: the Lambda VM answered below.
    "ssh --print": ["ssh", f"lambda/{LAMBDA_VM}", "--print"],
    "ssh -- CMD": ["ssh", f"lambda/{LAMBDA_VM}", "--", "nvidia-smi", "-L"],
    "ssh-config --print": ["ssh-config", "--print"],
    "doctor": ["doctor", "shape", "--skip-burn"],
    "doctor --nccl": ["doctor", "shape", "--nccl"],
    "top --count 1": ["top", "shape", "--count", "1"],
    "extend": ["extend", "shape", "--by", "1h", "--yes"],
    "reap": ["reap", "--dry-run"],
    "reap --install": ["reap", "--install"],
    "reap --install kubernetes": ["reap", "--install", "kubernetes"],
    "stop": ["stop", "shape"],
    "start": ["start", "shape", "--yes"],
    "delete": ["delete", "{ref}", "--yes"],
    "submit --dry-run": ["submit", JOB, "--provider", "sandbox", "--dry-run"],
    "submit": ["submit", JOB, "--provider", "sandbox", "--yes"],
    "jobs list": ["jobs", "list"],
    "jobs get": ["jobs", "get", "llama-finetune"],
    "jobs logs": ["jobs", "logs", "llama-finetune"],
    "jobs cancel": ["jobs", "cancel", "llama-finetune", "--yes"],
    "queue submit": ["queue", "submit", JOB],
    "queue status": ["queue", "status"],
    "queue dead": ["queue", "dead"],
    "queue logs": ["queue", "logs", "{task}"],
    "queue cancel": ["queue", "cancel", "{task}", "--yes"],
    "queue stop": ["queue", "stop"],
    "schema job": ["schema", "job"],
    "completion bash": ["completion", "bash"],
    "worker": ["worker", "--idle", "1s", "--queue", "json-shape"],
    "queue workers add --dry-run": ["queue", "workers", "add", "1", "--gpu", "h100",
                                    "--provider", "sandbox", "--redis",
                                    "rediss://:pw@redis.example.com:6380", "--dry-run"],
    "queue workers add": ["queue", "workers", "add", "1", "--gpu", "h100", "--provider",
                          "sandbox", "--redis", "rediss://:pw@redis.example.com:6380", "--yes"],
    "volumes create": ["volumes", "create", "shape-data", "--size-gb", "10", "--provider",
                       "sandbox", "--region", "sim-east-1", "--yes"],
    "volumes list": ["volumes", "list"],
    "volumes delete": ["volumes", "delete", "shape-data", "--yes"],
    "state show": ["state", "show"],
    "reconcile": ["reconcile"],
    "costs": ["costs"],
    "providers": ["providers"],
    "gpus": ["gpus"],
    "auth login": ["auth", "login", "lambda", "--from-env"],
    "auth status": ["auth", "status"],
    "auth logout": ["auth", "logout", "lambda"],
    "any command that fails": ["get", "sandbox/sbx-not-there"],
}


@pytest.fixture
def lambda_accepts_the_key(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", KEY)
    _fake_ssh.install(tmp_path / "bin", monkeypatch)  # `ssh -- CMD` runs no real ssh
    vm = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "lambda" /
                     "get_instance_200.json").read_text())
    vm["data"]["status"] = "active"
    for secret in ("HF_TOKEN", "WANDB_API_KEY"):  # the example job's secrets
        monkeypatch.setenv(secret, f"{secret.lower()}-json-shape-value")
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        router.get("https://cloud.lambda.ai/api/v1/ssh-keys").mock(
            return_value=httpx.Response(200, json={"data": []}))
        router.get(f"https://cloud.lambda.ai/api/v1/instances/{LAMBDA_VM}").mock(
            return_value=httpx.Response(200, json=vm))
        router.get("https://cloud.lambda.ai/api/v1/instances").mock(
            return_value=httpx.Response(200, json={"data": []}))
        router.get("https://cloud.lambda.ai/api/v1/instance-types").mock(
            return_value=httpx.Response(200, json={"data": {}}))
        router.get("https://cloud.lambda.ai/api/v1/file-systems").mock(  # reap's volume check
            return_value=httpx.Response(200, json={"data": []}))
        yield


def test_the_table_covers_every_command():
    table = json_table()
    assert set(table) == set(RUNS)
    top = CliRunner().invoke(app, ["--help"]).stdout.split("Commands:")[1].split("\n\n")[0]
    commands = {line.split()[0] for line in top.splitlines() if line.startswith("  ")
                and not line.startswith("   ")}
    documented = {name.split()[0] for name in table}
    assert commands - {"auth"} <= documented


def test_every_json_shape_is_the_documented_one(lambda_accepts_the_key):
    table = json_table()
    runner = CliRunner()
    ref = task = None
    for name, args in RUNS.items():
        args = [ref if a == "{ref}" else task if a == "{task}" else a for a in args]
        # After `--` the words are the remote command's: --json goes before it.
        cut = args.index("--") if "--" in args else len(args)
        result = runner.invoke(app, [*args[:cut], "--json", *args[cut:]])
        assert result.stderr == "", (name, result.stderr)
        data = json.loads(result.stdout)
        expected = table[name] if table[name] is not None else instance_fields()
        assert set(data) == expected, (name, sorted(data))
        if name == "any command that fails":
            assert result.exit_code != 0 and set(data["error"]) == {
                "code", "message", "hint", "exit_code"}
        else:
            assert result.exit_code == 0, (name, result.stdout)
        if name == "create":
            ref = data["instance"]["ref"]
            assert set(data["instance"]) == instance_fields()
        if name == "queue submit":
            task = data["tasks"][0]["id"]
