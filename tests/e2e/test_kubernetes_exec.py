"""client.exec on Kubernetes pods, end to end: the public SDK against the API
server emulator (tests/k8s_emulator) over real loopback TLS, the exec
subresource upgraded to a real WebSocket. Nothing of gpucloud is mocked."""

from __future__ import annotations

import logging
import time

import pytest

pytest.importorskip("websockets")

from gpucloud import Client, InstanceStatus
from gpucloud.errors import (
    AuthenticationError,
    NotFoundError,
    PermissionDeniedError,
    SpecError,
    WaitTimeoutError,
)
from tests.k8s_emulator import FakeClock, Knobs, KubeEmulator, write_kubeconfig

NS = "gpu-team"
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


@pytest.fixture
def clock():
    return FakeClock(start=time.time())


@pytest.fixture
def emulator(clock):
    with KubeEmulator(namespaces=("default", NS), clock=clock, tls=True,
                      knobs=Knobs(pod_start_seconds=3)) as emu:
        yield emu


@pytest.fixture
def client(emulator, clock, tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", emulator,
                                                          namespace=NS)))
    with Client(providers=["kubernetes"], sleep=clock.advance) as c:
        yield c


def running_pod(client, gpus=2):
    machine = client.create(gpu="h100", count=gpus, image=IMAGE, provider="kubernetes")
    return client.wait(machine.ref, until="running", timeout=120)


def execs(emulator):
    return [r for r in emulator.requests if r["path"].endswith("/exec")]


def test_a_running_pod_is_reached_through_the_exec_api(client, emulator):
    machine = client.create(gpu="h100", count=2, image=IMAGE, provider="kubernetes")
    assert machine.connection is None  # pending: nothing to reach yet
    machine = client.wait(machine.ref, until="running", timeout=120)
    assert machine.connection is not None and machine.connection.method == "api"

    hello = client.exec(machine.ref, "echo hello from the pod")
    assert (hello.exit_code, hello.stdout, hello.stderr, hello.ok) == (
        0, "hello from the pod\n", "", True)
    failed = client.exec(machine, "echo something broke >&2; exit 3")
    assert (failed.exit_code, failed.stdout, failed.stderr) == (3, "", "something broke\n")
    missing = client.exec(machine.ref, "no-such-tool --version")
    assert missing.exit_code == 127 and "no-such-tool: not found" in missing.stderr

    sent = execs(emulator)[0]
    assert sent["method"] == "GET" and sent["status"] == 101
    assert sent["path"] == f"/api/v1/namespaces/{NS}/pods/{machine.id}/exec"
    assert sent["query"]["container"] == "main" and sent["query"]["stdout"] == "true"


def test_nvidia_smi_lists_the_gpus_the_pod_was_given(client):
    machine = running_pod(client, gpus=4)
    listing = client.exec(machine.ref, "nvidia-smi -L")
    lines = listing.stdout.splitlines()
    assert listing.ok and len(lines) == 4
    assert all(line.startswith(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-")
               for i, line in enumerate(lines))


def test_the_command_reaches_the_pod_as_one_sh_c_argument(client, emulator):
    machine = running_pod(client, gpus=1)
    assert client.exec(machine.ref, "echo a && echo 'b  c' ; exit 0").stdout == "a\nb  c\n"
    # command=sh&command=-c&command=<the whole line>: no splitting on our side
    from urllib.parse import parse_qs
    raw = [r for r in execs(emulator)]
    assert raw[-1]["query"]["command"] == "echo a && echo 'b  c' ; exit 0"
    assert parse_qs("command=sh&command=-c&command=x")["command"] == ["sh", "-c", "x"]


def test_an_older_api_server_without_v5_is_spoken_to_in_v4(client, emulator):
    machine = running_pod(client, gpus=1)
    emulator.knobs.exec_protocols = ("v4.channel.k8s.io", "v3.channel.k8s.io")
    result = client.exec(machine.ref, "echo v4; exit 5")
    assert (result.exit_code, result.stdout) == (5, "v4\n")


def test_a_pending_pod_is_refused_before_any_exec(client, emulator):
    emulator.knobs.pod_start_seconds = 10_000
    machine = client.create(gpu="h100", count=1, image=IMAGE, provider="kubernetes")
    with pytest.raises(SpecError) as caught:
        client.exec(machine.ref, "echo hi")
    assert "no address yet" in str(caught.value) and execs(emulator) == []
    # Straight to the adapter (a stale Instance): the API server's 400, with a hint.
    adapter = client._ctx.adapter("kubernetes")
    with pytest.raises(Exception) as direct:
        adapter.exec_command(machine.id, "echo hi", 10)
    assert "container not found" in str(direct.value) and "running" in direct.value.hint
    assert client.get(machine.ref).status == InstanceStatus.PENDING


def test_rbac_without_pods_exec_is_a_permission_error_naming_the_permission(client, emulator):
    machine = running_pod(client, gpus=1)
    emulator.cluster.denied.add(("create", "pods/exec"))
    with pytest.raises(PermissionDeniedError) as caught:
        client.exec(machine.ref, "echo hi")
    assert 'cannot create resource "pods/exec"' in str(caught.value)
    assert "pods/exec" in caught.value.hint and "create" in caught.value.hint
    assert execs(emulator)[-1]["status"] == 403


def test_a_pod_that_is_gone_is_not_found(client, emulator):
    machine = running_pod(client, gpus=1)
    adapter = client._ctx.adapter("kubernetes")
    with pytest.raises(NotFoundError):
        adapter.exec_command("gpucloud-no-such-pod", "echo hi", 10)
    assert machine.connection is not None


def test_a_command_that_outlives_its_timeout_is_a_wait_timeout(client, emulator):
    machine = running_pod(client, gpus=1)
    started = time.monotonic()
    with pytest.raises(WaitTimeoutError) as caught:
        client.exec(machine.ref, "sleep 3; echo late", timeout=0.5)
    assert time.monotonic() - started < 2.5
    assert "did not finish within 0.5 s" in str(caught.value)


def test_a_revoked_token_is_a_clear_authentication_error(client, emulator):
    machine = running_pod(client, gpus=1)
    emulator.cluster.expire_tokens()  # a static kubeconfig token cannot renew itself
    adapter = client._ctx.adapter("kubernetes")  # client.exec's own GET would 401 first
    with pytest.raises(AuthenticationError) as caught:
        adapter.exec_command(machine.id, "echo hi", 10)
    assert execs(emulator)[-1]["status"] == 401
    assert "kubectl auth whoami" in caught.value.hint


def test_the_token_never_reaches_the_logs(client, emulator, caplog):
    machine = running_pod(client, gpus=1)
    with caplog.at_level(logging.DEBUG):
        assert client.exec(machine.ref, "echo quiet").ok
        emulator.cluster.denied.add(("create", "pods/exec"))
        with pytest.raises(PermissionDeniedError) as caught:
            client.exec(machine.ref, "echo hi")
    assert emulator.admin_token not in caplog.text
    assert emulator.admin_token not in repr(caught.value.request.headers)


def test_an_expiring_exec_plugin_token_is_renewed_for_the_exec(tmp_path, monkeypatch):
    """Real time here: the plugin's token must really expire before the exec."""
    with KubeEmulator(namespaces=(NS,), knobs=Knobs(pod_start_seconds=0.05)) as emulator:
        calls = tmp_path / "plugin-calls"
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(
            tmp_path / "kubeconfig", emulator, namespace=NS, exec_ttl=2, exec_calls=calls)))
        with Client(providers=["kubernetes"]) as client:
            machine = client.wait(client.create(gpu="h100", count=1, image=IMAGE,
                                                provider="kubernetes").ref,
                                  until="running", timeout=30)
            before = emulator.requests[-1]["token"]
            runs = len(calls.read_text().splitlines())
            time.sleep(2.2)  # the token the REST calls used has expired now
            result = client.exec(machine.ref, "echo renewed")
        assert result.stdout == "renewed\n"
        sent = execs(emulator)[-1]
        assert sent["status"] == 101 and sent["token"] != before
        assert len(calls.read_text().splitlines()) > runs


def test_a_token_refused_mid_life_is_renewed_once_through_the_plugin(tmp_path, monkeypatch):
    """A 401 on the upgrade: the plugin runs again and the exec is retried once."""
    with KubeEmulator(namespaces=(NS,), knobs=Knobs(pod_start_seconds=0.05)) as emulator:
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(
            tmp_path / "kubeconfig", emulator, namespace=NS, exec_ttl=3600)))
        with Client(providers=["kubernetes"]) as client:
            machine = client.wait(client.create(gpu="h100", count=1, image=IMAGE,
                                                provider="kubernetes").ref,
                                  until="running", timeout=30)
            issued = emulator.exec_tokens_issued
            emulator.cluster.expire_tokens("exec-user")  # revoked before its time
            # The adapter itself: client.exec's own GET would renew the token first.
            adapter = client._ctx.adapter("kubernetes")
            assert adapter.exec_command(machine.id, "echo again", 10).stdout == "again\n"
        assert [r["status"] for r in execs(emulator)] == [401, 101]
        assert emulator.exec_tokens_issued == issued + 1


async def test_async_client_exec_runs_in_a_thread_against_the_same_pod(client, emulator, clock):
    from gpucloud import AsyncClient

    machine = running_pod(client, gpus=1)

    async def advance(seconds: float) -> None:
        clock.advance(seconds)

    async with AsyncClient(providers=["kubernetes"], sleep=advance) as aclient:
        result = await aclient.exec(machine.ref, "echo from async; exit 2")
    assert (result.exit_code, result.stdout) == (2, "from async\n")
