"""The worked example of docs/plugin-authors.md works as written.

Its blocks are copied out of the page and laid out as pip installs a package:
the package directory beside a ``<name>-<version>.dist-info`` folder whose
``entry_points.txt`` is what the page's pyproject.toml declares (importlib.metadata
finds a dist-info folder on sys.path, so nothing is installed). The catalog goes
to the config directory's ``providers/``. Then the real CLI, in its own process,
finds the provider, and ``Client`` drives the adapter against a fake Acme kept
in memory behind respx, which serves the API the adapter's docstring states.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from tests.docs._readme import DOCS, ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PAGE = DOCS / "plugin-authors.md"
PACKAGE = ("gpucloud_acme/__init__.py", "gpucloud_acme/adapter.py")
FILES = ("pyproject.toml", *PACKAGE, "acme.toml")
# A fenced block whose first line is a comment naming a file: "# gpucloud_acme/adapter.py".
BLOCK = re.compile(r"^```[a-z]*\n(# ([\w./-]+)\n.*?)^```$", re.M | re.S)
KEY = "acme-key-123"
LIMIT_S = 60


def example() -> dict[str, str]:
    """The page's files by path; the test fails naming any block it lacks."""
    found = {path: body for body, path in BLOCK.findall(PAGE.read_text(encoding="utf-8"))}
    missing = [path for path in FILES if path not in found]
    if missing:
        pytest.fail(f"{PAGE.relative_to(ROOT)} has no code block whose first line is "
                    + ", ".join(f"'# {path}'" for path in missing))
    return found


def catalog() -> dict[str, Any]:
    return tomllib.loads(example()["acme.toml"])


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The example package installed on sys.path (returned: its site directory)."""
    from gpucloud.config.settings import config_dir
    from gpucloud.providers.registry import _entry_points

    files = example()
    site = tmp_path / "site"
    for path in PACKAGE:
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(files[path], encoding="utf-8")
    project = tomllib.loads(files["pyproject.toml"])["project"]
    dist = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n",
        encoding="utf-8")
    groups = project.get("entry-points", {})
    (dist / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items())
        for group, points in groups.items()), encoding="utf-8")
    providers = config_dir() / "providers"
    providers.mkdir(parents=True)
    (providers / "acme.toml").write_text(files["acme.toml"], encoding="utf-8")

    monkeypatch.syspath_prepend(str(site))
    _entry_points.cache_clear()  # the registry scans installed packages once a process
    yield site
    _entry_points.cache_clear()  # later tests see no acme
    for name in [m for m in sys.modules if m == "gpucloud_acme" or m.startswith("gpucloud_acme.")]:
        del sys.modules[name]


def cli(*args: str, site: Path) -> Any:
    """The CLI in its own process, with the example on its path and no credentials."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLOUD_ACME")}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(site)]),
               PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    done = subprocess.run([sys.executable, "-m", "gpucloud", *args, "--json"],
                          capture_output=True, text=True, env=env, timeout=LIMIT_S)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# -- the CLI, without credentials --------------------------------------------


def test_the_cli_lists_acme_as_a_provider_with_an_adapter(installed):
    listed = {p["name"]: p for p in cli("providers", site=installed)["providers"]}
    acme = listed["acme"]
    assert acme["display_name"] == catalog()["display_name"]
    assert acme["credentials"] is False
    # The hint of a provider with an adapter names its key's variable; a catalog
    # without an adapter (the entry point not found) would say "catalog prices only".
    assert "GPUCLOUD_ACME_API_KEY" in acme["hint"]


def test_the_cli_offers_the_catalog_rows_without_credentials(installed):
    offers = cli("offers", "--gpu", "h100", "--count", "8", "--provider", "acme",
                 site=installed)["offers"]
    expected = {(t["name"], region, t["price"]) for t in catalog()["instance_types"]
                if t["gpu"] == "H100" and t["gpu_count"] == 8 for region in t["regions"]}
    assert expected
    assert {(o["instance_type"], o["region"], o["price_per_hour"]) for o in offers} == expected
    assert {(o["provider"], o["source"]) for o in offers} == {("acme", "catalog")}


# -- the Client, against a fake Acme ------------------------------------------


class FakeAcme:
    """Acme's API as the adapter's docstring states it, with machines in memory."""

    def __init__(self, router: respx.Router, types: list[dict[str, Any]]) -> None:
        self.types = types
        self.machines: dict[str, dict[str, Any]] = {}
        self.ids = (f"m-{n:06d}" for n in count(1))
        self.refuse_launches = False
        one = r"/v1/machines/(?P<ident>[^/]+)$"
        self.launch = router.post("/v1/machines").mock(side_effect=self._create)
        router.get("/v1/types").mock(side_effect=self._authed(
            lambda request: httpx.Response(200, json={"types": self.types})))
        router.get("/v1/machines").mock(side_effect=self._authed(
            lambda request: httpx.Response(200, json={"machines": list(self.machines.values())})))
        router.get(path__regex=one).mock(side_effect=self._authed(self._get))
        router.patch(path__regex=one).mock(side_effect=self._authed(self._patch))
        self.deleted = router.delete(path__regex=one).mock(side_effect=self._authed(self._delete))

    @staticmethod
    def error(status: int, code: str, message: str) -> httpx.Response:
        return httpx.Response(status, json={"error": {"code": code, "message": message}})

    def _authed(self, handler):
        def serve(request: httpx.Request, **kwargs: str) -> httpx.Response:
            if request.headers.get("Authorization") != f"Bearer {KEY}":
                return self.error(401, "invalid_token", "the key is not valid")
            return handler(request, **kwargs)
        return serve

    def _create(self, request: httpx.Request) -> httpx.Response:
        if request.headers.get("Authorization") != f"Bearer {KEY}":
            return self.error(401, "invalid_token", "the key is not valid")
        if self.refuse_launches:
            return self.error(409, "no_capacity", "no acme.8xh100 free in this region")
        body = json.loads(request.content)
        price = next(t["price_per_hour"] for t in self.types if t["name"] == body["type"])
        machine = {"id": next(self.ids), "name": body["name"], "type": body["type"],
                   "region": body["region"], "state": "starting", "ip": None,
                   "price_per_hour": price, "labels": dict(body["labels"])}
        self.machines[machine["id"]] = machine
        return httpx.Response(201, json={"machine": machine})

    def _get(self, request: httpx.Request, ident: str) -> httpx.Response:
        if ident not in self.machines:
            return self.error(404, "not_found", f"no machine {ident}")
        return httpx.Response(200, json={"machine": self.machines[ident]})

    def _patch(self, request: httpx.Request, ident: str) -> httpx.Response:
        if ident not in self.machines:
            return self.error(404, "not_found", f"no machine {ident}")
        self.machines[ident]["labels"].update(json.loads(request.content)["labels"])
        return httpx.Response(200, json={"machine": self.machines[ident]})

    def _delete(self, request: httpx.Request, ident: str) -> httpx.Response:
        if self.machines.pop(ident, None) is None:
            return self.error(404, "not_found", f"no machine {ident}")
        return httpx.Response(204)


@pytest.fixture
def acme(installed) -> Iterator[FakeAcme]:
    types = [{"name": t["name"], "gpu": t["gpu"], "gpus": t["gpu_count"],
              "price_per_hour": t["price"], "regions": t["regions"][:1]}
             for t in catalog()["instance_types"]]
    with respx.mock(base_url=catalog()["api_base"], assert_all_called=False) as router:
        yield FakeAcme(router, types)


def client():
    from gpucloud import Client

    return Client(["acme"], credentials={"acme": KEY}, use_keyring=False, sleep=lambda s: None)


def test_the_client_creates_lists_gets_extends_and_deletes_an_acme_machine(acme):
    from gpucloud.models import InstanceStatus
    from gpucloud.providers.base import KIND_EXTENSION

    gpucloud = client()
    offers = gpucloud.offers(gpu="h100", count=8, provider="acme")
    assert {(o.instance_type, o.source, o.price_per_hour) for o in offers} == {
        ("acme.8xh100", "live", Decimal("19.20"))}

    machine = gpucloud.create(gpu="h100", count=8, provider="acme", name="train-a")
    assert (machine.provider, machine.name, machine.status) == (
        "acme", "train-a", InstanceStatus.PENDING)
    assert machine.price_per_hour == Decimal("19.20")
    # The launch went out once, as a launch, with the launch id on the machine.
    assert acme.launch.call_count == 1
    assert acme.launch.calls.last.request.extensions[KIND_EXTENSION] == "launch"
    assert machine.launch_id
    assert acme.machines[machine.id]["labels"]["gpucloud-launch-id"] == machine.launch_id

    listed = {m.id: m for m in gpucloud.list(provider="acme")}
    assert listed[machine.id].launch_id == machine.launch_id  # read back from the labels

    acme.machines[machine.id]["state"] = "running"
    assert gpucloud.get(machine.ref).status == InstanceStatus.RUNNING

    extended = gpucloud.extend(machine.ref, until="2035-01-01T00:00Z")
    assert acme.machines[machine.id]["labels"]["gpucloud-shutdown-at"] == "2035-01-01T00:00:00Z"
    assert extended.shutdown_at is not None and extended.shutdown_at.year == 2035

    gpucloud.delete(machine.ref)
    assert acme.deleted.calls.last.request.extensions[KIND_EXTENSION] == "idempotent"
    assert machine.id not in acme.machines
    assert gpucloud.list(provider="acme") == []


def test_an_acme_error_reply_maps_through_the_examples_error_table(acme):
    from gpucloud.errors import InsufficientCapacityError

    acme.refuse_launches = True
    with pytest.raises(InsufficientCapacityError) as caught:
        client().create(gpu="h100", count=8, provider="acme")
    # A 409 alone would be a ConflictError: the class, code and hint are the row's.
    error = caught.value
    assert error.provider_code == "no_capacity"
    assert "no acme.8xh100 free" in str(error)
    assert "try another region" in (error.hint or "")


def test_a_wrong_key_is_an_authentication_error(acme):
    from gpucloud import Client
    from gpucloud.errors import AuthenticationError

    wrong = Client(["acme"], credentials={"acme": "not-the-key"}, use_keyring=False,
                   sleep=lambda s: None)
    with pytest.raises(AuthenticationError) as caught:
        wrong.get("acme/m-000001")
    assert caught.value.provider_code == "invalid_token"
    assert "not-the-key" not in str(caught.value)


def test_a_reply_of_the_wrong_shape_is_a_validation_error(acme):
    from gpucloud.errors import APIResponseValidationError

    acme.machines["m-000009"] = {"id": "m-000009", "state": "running", "labels": {},
                                 "price_per_hour": "n/a"}
    with pytest.raises(APIResponseValidationError, match="an unreadable price"):
        client().get("acme/m-000009")


def test_a_missing_block_fails_naming_it(monkeypatch, tmp_path):
    page = tmp_path / "plugin-authors.md"
    page.write_text(PAGE.read_text(encoding="utf-8").replace(
        "# gpucloud_acme/adapter.py\n", "# adapter.py\n"), encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "PAGE", page)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    with pytest.raises(pytest.fail.Exception, match="'# gpucloud_acme/adapter.py'"):
        example()
