"""The plugin surface: ``gpucloud.providers`` names what an adapter is written
against and nothing else; each provider package exports its Provider class."""

import importlib
import subprocess
import sys

import pytest

import gpucloud.providers
from gpucloud.providers.base import Provider
from gpucloud.providers.registry import BUILTIN

PLUGIN_NAMES = {"Provider", "Capabilities", "RequestKind", "Flow", "Sleep", "OfferQuery"}


def test_all_is_exactly_the_plugin_names_and_each_resolves():
    assert set(gpucloud.providers.__all__) == PLUGIN_NAMES
    assert len(gpucloud.providers.__all__) == len(PLUGIN_NAMES)
    for name in PLUGIN_NAMES:
        assert getattr(gpucloud.providers, name) is not None
    assert gpucloud.providers.Provider is Provider


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError):
        getattr(gpucloud.providers, "no_such_name")


def test_importing_the_package_loads_no_adapter_or_http_stack():
    code = ("import sys, gpucloud.providers; print(sorted(m for m in sys.modules "
            "if m.startswith(('gpucloud.providers.', 'httpx'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_registry_names_are_deprecated_aliases_of_the_registry_module():
    from gpucloud.providers import registry

    with pytest.warns(DeprecationWarning, match="gpucloud.providers.registry.adapter_class"):
        assert gpucloud.providers.adapter_class is registry.adapter_class


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_each_provider_package_exports_its_provider_class_alone(name):
    module, _, attr = BUILTIN[name].partition(":")
    package = importlib.import_module(module.rsplit(".", 1)[0])
    exported = [getattr(package, n) for n in package.__all__]
    assert getattr(package, attr) in exported
    assert all(isinstance(v, type) and issubclass(v, Provider) for v in exported)


def test_no_provider_module_takes_its_collaborators_as_any():
    """A context, adapter, catalog, credential or cloud parameter has its real
    type (a Protocol where the module it lives in imports this one)."""
    import ast
    from pathlib import Path

    names = {"ctx", "engine", "adapter", "context", "client", "provider", "catalog",
             "credential", "cloud", "cluster"}
    root = Path(gpucloud.providers.__file__).parent
    untyped = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for arg in node.args.args + node.args.kwonlyargs:
                    if arg.arg in names and arg.annotation is not None \
                            and ast.unparse(arg.annotation) == "Any":
                        untyped.append(f"{path.relative_to(root)}:{node.lineno} {arg.arg}")
    assert untyped == []


def test_no_provider_module_outgrows_one_responsibility():
    """A module past ~400 lines holds more than one concern: it is split by
    responsibility (jobs, deadlines, offers), never by line count."""
    from pathlib import Path

    root = Path(gpucloud.providers.__file__).parent
    long = {str(p.relative_to(root)): n for p in root.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
