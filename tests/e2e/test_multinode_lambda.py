"""A two-node job on Lambda (multi_node "batch"), respx answering at the
HTTP transport from the contract fixtures (test_lambda_client.FakeLambda):
when the second node's launch meets Lambda's own insufficient-capacity
reply, the node already made is terminated (the terminate request is seen)
and the submit fails with no capacity, exit 6 in the CLI; no node is tried
in another region."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import respx
from typer.testing import CliRunner

from gpucloud import Client
from gpucloud.cli import app
from gpucloud.errors import InsufficientCapacityError, SpecError

from .test_lambda_client import KEY, PUBKEY, SPEC, FakeLambda, fixture
from tests.e2e import _fake_ssh
from tests.openapi_check import validate_request

SECRET = "hf_multinode_lambda_0f3c9a"
JOB = {"name": "pair", "image": "busybox", "nodes": 2, "command": ["python", "train.py"],
       "resources": {"gpu": "h100", "gpu_count": 8}, "max_runtime": "2h"}


class OneNodeOnly(FakeLambda):
    """Lambda with room for one machine: every launch after the first is
    refused with the API's insufficient-capacity reply."""

    def __init__(self, router) -> None:
        self.launches: list[dict] = []
        super().__init__(router)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/instance-operations/launch":
            self.launches.append(json.loads(request.content))
            if len(self.launches) > 1:
                self.sent.append(request)
                return httpx.Response(400, json=fixture("error_insufficient_capacity_400.json"))
        return super().handle(request)

    def terminated(self) -> list[str]:
        return [i for r in self.sent if r.url.path == "/api/v1/instance-operations/terminate"
                for i in json.loads(r.content)["instance_ids"]]


@pytest.fixture
def lambda_one(monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", KEY)
    ssh = Path.home() / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519.pub").write_text(PUBKEY + "\n")
    with respx.mock(base_url="https://cloud.lambda.ai", assert_all_called=False) as router:
        yield OneNodeOnly(router)


def test_a_node_without_capacity_ends_the_node_made_and_fails_with_no_capacity(lambda_one):
    with pytest.raises(InsufficientCapacityError) as caught:
        Client(sleep=lambda _s: None).submit(JOB, provider="lambda")

    made = list(lambda_one.instances)
    assert len(made) == 1 and lambda_one.terminated() == made  # node 0 was ended
    assert lambda_one.instances[made[0]]["status"] == "terminating"
    # Both nodes in one region, as one batch of job machines named by rank.
    assert len({b["region_name"] for b in lambda_one.launches}) == 1
    assert sorted(b["name"] for b in lambda_one.launches) == ["pair-node0", "pair-node1"]
    keys = [{t["key"]: t["value"] for t in b["tags"]} for b in lambda_one.launches]
    assert keys[0]["gpucloud-batch"] == keys[1]["gpucloud-batch"]
    assert all(k["gpucloud-launch-id"].startswith("gj-") for k in keys)
    assert "user_data" not in lambda_one.launches[0]  # the job is started later, over ssh
    assert "job pair: node" in str(caught.value) and "ended" in caught.value.hint


def test_the_cli_exits_6_and_leaves_no_node(lambda_one, tmp_path):
    job_file = tmp_path / "pair.yaml"
    job_file.write_text(json.dumps(JOB))  # JSON is YAML

    done = CliRunner().invoke(app, ["submit", str(job_file), "--provider", "lambda",
                                    "--yes"])

    assert done.exit_code == 6, done.output
    assert "Traceback" not in done.output and "pair" in done.output
    assert lambda_one.terminated() == list(lambda_one.instances)


class TwoNodes(FakeLambda):
    """Lambda with room for both nodes, each running at once with its own
    private address (the spec's Instance.private_ip)."""

    def handle(self, request: httpx.Request) -> httpx.Response:
        response = super().handle(request)
        for machine in self.instances.values():
            machine["status"] = "active"
            machine["private_ip"] = f"10.0.2.{101 + int(machine['name'][-1])}"
        return response


@pytest.fixture
def fake_ssh(monkeypatch, tmp_path):
    """Lambda's key, and the fake ssh (tests/e2e/_fake_ssh.py): its calls' directory."""
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", KEY)
    ssh = Path.home() / ".ssh"
    ssh.mkdir()
    (ssh / "id_ed25519.pub").write_text(PUBKEY + "\n")
    return _fake_ssh.install(tmp_path, monkeypatch)


@pytest.fixture
def lambda_two(fake_ssh):
    """Both nodes, and the fake ssh."""
    with respx.mock(base_url="https://cloud.lambda.ai", assert_all_called=False) as router:
        yield TwoNodes(router), fake_ssh


def test_the_job_starts_on_each_node_over_ssh_with_the_private_addresses(lambda_two,
                                                                         monkeypatch):
    fake, calls = lambda_two
    monkeypatch.setenv("MN_LAMBDA_TOKEN", SECRET)
    job = Client(sleep=lambda _s: None).submit(
        {**JOB, "secrets": {"TOKEN": {"env": "MN_LAMBDA_TOKEN"}}, "retries": 2},
        provider="lambda")

    assert job.nodes == 2 and job.status.value == "running"
    assert [m.name for m in job.instances] == ["pair-node0", "pair-node1"]
    assert [m.private_ip for m in job.instances] == ["10.0.2.101", "10.0.2.102"]
    started = sorted(calls.glob("*.argv"))
    assert len(started) == 2
    for rank, argv_file in enumerate(started):
        argv = argv_file.read_text()
        script = argv_file.with_suffix(".stdin").read_text()
        assert "ubuntu@198.51.100.2" in argv  # reached at its public address
        assert SECRET not in argv  # the secret travels on stdin only
        assert f"export TOKEN={SECRET}" in script
        assert "export MASTER_ADDR=10.0.2.101" in script
        assert f"export NODE_RANK={rank}" in script
        assert "export GPUCLOUD_NODE_ADDRS=10.0.2.101,10.0.2.102" in script
        assert "--network host" in script and "shutdown -h now" in script
        assert "GC_RETRIES=0" in script  # a node never reruns alone: the job fails
    assert _terminated(fake) == []


def _terminated(fake: FakeLambda) -> list[str]:
    return [i for r in fake.sent if r.url.path == "/api/v1/instance-operations/terminate"
            for i in json.loads(r.content)["instance_ids"]]


class TwoNodesAndAFilesystem(TwoNodes):
    """Both nodes, and the contract's filesystem moved to us-west-3 (where the
    fixture's 8x H100 has capacity) and given ``name``."""

    def __init__(self, router, name: str = "my-filesystem") -> None:
        self.filesystems = fixture("list_filesystems_200.json")
        self.filesystems["data"][0].update(name=name, region={"name": "us-west-3",
                                                              "description": "x"})
        super().__init__(router)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/file-systems":
            validate_request(SPEC, request)
            self.sent.append(request)
            return httpx.Response(200, json=self.filesystems)
        return super().handle(request)


def _submit_with_volume(name: str):
    return Client(sleep=lambda _s: None).submit(
        {**JOB, "region": "us-west-3", "volumes": [{"name": name, "mount": "/data"}]},
        provider="lambda")


def test_every_node_is_launched_with_the_jobs_filesystem_and_binds_it(fake_ssh):
    """A Lambda filesystem mounts on many instances: each node's launch names
    it and each node's runner binds Lambda's mount of it into the container."""
    with respx.mock(base_url="https://cloud.lambda.ai", assert_all_called=False) as router:
        fake = TwoNodesAndAFilesystem(router)
        job = _submit_with_volume("my-filesystem")

    assert job.nodes == 2
    launches = [json.loads(r.content) for r in fake.sent
                if r.url.path == "/api/v1/instance-operations/launch"]
    assert [b["file_system_names"] for b in launches] == [["my-filesystem"]] * 2
    assert all(b["region_name"] == "us-west-3" and "user_data" not in b for b in launches)
    scripts = [f.read_text() for f in sorted(fake_ssh.glob("*.stdin"))]
    assert len(scripts) == 2
    for script in scripts:
        assert "-v /lambda/nfs/my-filesystem:/data" in script
    assert _terminated(fake) == []


def test_a_volume_lambda_cannot_mount_refuses_the_job_before_any_launch(fake_ssh):
    with respx.mock(base_url="https://cloud.lambda.ai", assert_all_called=False) as router:
        fake = TwoNodesAndAFilesystem(router, name="9data")  # a digit first: not Lambda's
        with pytest.raises(SpecError, match="cannot be a Lambda filesystem name"):
            _submit_with_volume("9data")

    assert not [r for r in fake.sent if r.url.path == "/api/v1/instance-operations/launch"]
