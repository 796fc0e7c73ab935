"""No import cycles inside src/gpucloud, and every import goes down the layers.

Both count lazy (function-level) and type-only imports too: a cycle or an
upward import hidden in a function body is still a tangle, and breaks the day
someone hoists the import. docs/design/layers.md explains the layers; LAYERS
below is that table, and the test fails naming the module pair and the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "gpucloud"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _root_lazy_names() -> dict[str, str]:
    """The root package's public name -> the module that defines it (its _LAZY
    table): `from gpucloud import Client` depends on gpucloud.client.clients."""
    tree = ast.parse((SRC / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "_LAZY"):
            value = ast.literal_eval(node.value)
            assert isinstance(value, dict)
            return value
    return {}


def _resolve(current: str, is_package: bool, node: ast.ImportFrom,
             lazy: dict[str, str]) -> list[str]:
    base = current.split(".") if is_package else current.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    if not prefix.startswith("gpucloud"):
        return []
    if prefix == "gpucloud":  # a lazy public name stands for the module behind it
        return [prefix] + [lazy.get(alias.name, f"{prefix}.{alias.name}") for alias in node.names]
    # `from .pkg import name` may import the submodule pkg.name.
    return [prefix] + [f"{prefix}.{alias.name}" for alias in node.names]


def _typing_only(tree: ast.Module) -> set[int]:
    """The ids of the import nodes under `if TYPE_CHECKING:`: names for
    annotations, never run."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
                (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
                or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")):
            for inner in node.body:
                found.update(id(n) for n in ast.walk(inner)
                             if isinstance(n, (ast.Import, ast.ImportFrom)))
    return found


def import_graph(typing: bool = True) -> dict[str, set[str]]:
    """Module -> the gpucloud modules it imports, lazy imports included;
    `typing=False` leaves out the imports made for annotations only."""
    files = {_module_name(p): p for p in SRC.rglob("*.py")}
    lazy = _root_lazy_names()
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        skip = set() if typing else _typing_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                targets = _resolve(name, is_package, node, lazy)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("gpucloud")]
            for target in targets:
                if target in files and target != name:
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            # A package's __init__ importing its own submodules is how packages work.
            if node.startswith(nxt + ".") or nxt.startswith(node + "."):
                continue
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


# --- Layers -----------------------------------------------------------------
#
# Each package under src/gpucloud is a layer; core's instruction types
# (core.instructions, core.flow, core.drive) are a layer of their own, the
# kernel, which every layer above it may use, and safety's operations (reap and
# extend, reconcile, the costs report: operations over the client context, like
# core's) are a layer above core, while safety's records (journal, ledger,
# costs arithmetic, budget) sit below it. A layer imports itself and what its
# row names, nothing else. The rows are what the code needs today, bottom-up, and
# no more: a new cross-layer import is a decision, taken here. Imports made for
# annotations only (under `if TYPE_CHECKING:`) run never and are not counted
# here: an operation's records may name the ClientContext type they are given.

KERNEL_MODULES = ("gpucloud.core.instructions", "gpucloud.core.flow", "gpucloud.core.drive")
SAFETY_OPERATIONS = ("gpucloud.safety.extend", "gpucloud.safety.reap",
                     "gpucloud.safety.reconcile", "gpucloud.safety.cost_report")

LAYERS: dict[str, frozenset[str]] = {
    "compat": frozenset(),  # the 0.1.0 aliases: importlib only
    "models": frozenset(),
    "errors": frozenset({"models"}),
    "types": frozenset({"models", "errors"}),
    "config": frozenset({"compat", "errors"}),
    "catalog": frozenset({"compat", "models", "errors", "config"}),
    "kernel": frozenset({"models", "errors", "types", "catalog"}),
    "transport": frozenset({"errors", "kernel"}),
    "providers": frozenset({"models", "errors", "config", "catalog", "kernel", "transport"}),
    "safety": frozenset({"models", "errors", "config", "catalog", "kernel", "providers"}),
    "core": frozenset({"models", "errors", "types", "config", "catalog", "kernel", "transport",
                       "providers", "safety"}),
    "machine": frozenset({"models", "errors", "config", "catalog", "kernel", "safety", "core"}),
    "batch": frozenset({"compat", "models", "errors", "catalog", "kernel", "providers",
                        "safety", "core"}),
    # A multi-node job on a VM cloud launches its nodes as one batch and starts
    # the job on each over ssh (jobs/multinode_batch.py): batch and machine.
    "jobs": frozenset({"compat", "models", "errors", "config", "catalog", "kernel",
                       "providers", "safety", "core", "machine", "batch"}),
    "safety-ops": frozenset({"models", "errors", "catalog", "kernel", "providers", "safety",
                             "core", "jobs"}),
    "client": frozenset({"compat", "models", "errors", "types", "config", "catalog", "kernel",
                         "transport", "providers", "safety", "core", "machine", "jobs",
                         "batch", "safety-ops"}),
    "queue": frozenset({"errors", "config", "kernel", "transport", "machine", "jobs"}),
    "cli": frozenset({"errors", "types", "config", "catalog", "safety", "machine", "jobs",
                      "batch", "client", "queue"}),
    # gpucloud/__init__.py: the public names, each loaded from its module on first use.
    "root": frozenset({"compat", "models", "errors", "catalog", "safety", "jobs", "batch",
                       "client", "safety-ops"}),
}

# The rules the layers exist for. A pair here is never in LAYERS (checked), and
# a violation is reported with this reason rather than the row.
FORBIDDEN: dict[tuple[str, str], str] = {
    ("transport", "providers"): "transport never imports providers: providers are built on it",
    ("providers", "core"): "a provider imports no gpucloud.core beyond the instruction types "
                           "(core.instructions, core.flow, core.drive)",
    ("cli", "core"): "the CLI goes through the client: no gpucloud.core",
    ("cli", "kernel"): "the CLI goes through the client: no gpucloud.core",
    ("cli", "providers"): "the CLI goes through the client: no gpucloud.providers",
    ("cli", "transport"): "the CLI goes through the client: no gpucloud.transport",
}

PROVIDER_TO_PROVIDER = "a provider never imports another provider"
PROVIDER_BY_NAME = ("outside gpucloud.providers, one provider's own modules are reached "
                    "through the registry (gpucloud.providers), never imported by name")

# Imports that break a rule today, each with who removes it (or why it stays).
# An entry whose import is gone, or no longer breaks a rule, fails the test:
# delete it, and the rules get stricter.
ALLOWED: dict[tuple[str, str], str] = {
    # Upward imports, against the order of LAYERS:
    ("gpucloud.core.launch", "gpucloud.jobs.costs"):
        "unassigned: the ledger of machine-less jobs is safety's bookkeeping; "
        "it goes when jobs.costs moves under safety",
    ("gpucloud.providers.kubernetes.adapter", "gpucloud.safety.journal"):
        "unassigned: delete_expired reads the clock the tests set (journal.utcnow); it "
        "goes when one clock module sits below the providers",
    ("gpucloud.providers.sandbox.exec_sim", "gpucloud.machine.nvidia"):
        "unassigned: the sandbox prints the burn marker the nvidia parser reads; "
        "it goes when the marker moves below both",
    ("gpucloud.config.settings", "gpucloud.machine.remote_install"):
        "unassigned: the [remote] setting is parsed by remote_install's rules; "
        "it goes when that parser moves into config",
    ("gpucloud.safety.reaper_install", "gpucloud.machine.remote_install"):
        "unassigned: as above, InstallSource would sit in config",
    # Stays: a name kept for 0.1.0 users (a module __getattr__), goes with compat.
    ("gpucloud.config.credentials", "gpucloud.transport.bearer_auth"):
        "stays until the 0.1.0 aliases go: credentials.BearerAuth forwards to its new home",
    # Stays: leaf modules that import nothing of gpucloud, so no cycle can form.
    ("gpucloud.errors", "gpucloud.transport.redaction"):
        "stays: an APIError keeps its request redacted by the one redaction rule",
    ("gpucloud.models", "gpucloud.catalog.limits"):
        "stays: the models and the catalog check one set of bounds (limits imports nothing)",
}


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "root"
    if parts[1] == "__main__":
        return "cli"
    if module in KERNEL_MODULES:
        return "kernel"
    if module in SAFETY_OPERATIONS:
        return "safety-ops"
    return parts[1]


def provider_of(module: str, providers: set[str]) -> str | None:
    """The provider a module belongs to (gpucloud.providers.<name>.*), or None
    for the shared provider modules (base, the registry) and everything else."""
    parts = module.split(".")
    if len(parts) >= 3 and parts[1] == "providers" and parts[2] in providers:
        return parts[2]
    return None


def _meaningful_edges(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Edges, less the root package (every gpucloud import runs it; its public
    names resolve to their modules) and less a package's __init__ when the same
    import names one of its submodules (`from gpucloud.machine import ssh`)."""
    edges = set()
    for source, targets in graph.items():
        for target in targets:
            if target == "gpucloud":
                continue
            if any(other.startswith(target + ".") for other in targets):
                continue
            edges.add((source, target))
    return edges


def rule_broken(source: str, target: str, providers: set[str]) -> str | None:
    """The rule the import source -> target breaks, or None."""
    own, other = provider_of(source, providers), provider_of(target, providers)
    if own and other and own != other:
        return PROVIDER_TO_PROVIDER
    if other and layer_of(source) != "providers":
        return PROVIDER_BY_NAME
    upper, lower = layer_of(source), layer_of(target)
    if upper == lower:
        return None
    if upper not in LAYERS:
        return f"{source} is in no layer: add gpucloud.{upper} to LAYERS"
    if (upper, lower) in FORBIDDEN:
        return FORBIDDEN[(upper, lower)]
    if lower not in LAYERS[upper]:
        allowed = ", ".join(sorted(LAYERS[upper])) or "nothing of gpucloud"
        return f"{upper} may import {allowed}; not {lower}"
    return None


def layer_violations(graph: dict[str, set[str]], providers: set[str],
                     allowed: dict[tuple[str, str], str]) -> list[str]:
    found = []
    edges = _meaningful_edges(graph)
    for source, target in sorted(edges):
        rule = rule_broken(source, target, providers)
        if rule and (source, target) not in allowed:
            found.append(f"{source} -> {target}: {rule}")
    for pair in sorted(allowed):
        if pair not in edges or rule_broken(*pair, providers) is None:
            found.append(f"{pair[0]} -> {pair[1]}: allowed in ALLOWED but no longer "
                         "imported, or no longer against a rule: delete the entry")
    return found


def _providers() -> set[str]:
    return {p.name for p in (SRC / "providers").iterdir()
            if p.is_dir() and (p / "__init__.py").is_file()}


def test_the_checker_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_lazy_imports() -> None:
    graph = import_graph()
    assert "gpucloud.safety.ledger_events" in graph["gpucloud.core.instances"]
    # imported inside commands
    assert graph["gpucloud.cli.commands.catalog"] & {"gpucloud.client"}


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_every_import_goes_down_the_layers() -> None:
    found = layer_violations(import_graph(typing=False), _providers(), ALLOWED)
    assert found == [], "\n".join(found)


def test_the_layers_are_an_order_and_the_rules_are_kept_out_of_it() -> None:
    rows = {layer: set(below) for layer, below in LAYERS.items()}
    assert find_cycle(rows) is None
    for upper, lower in FORBIDDEN:
        assert lower not in LAYERS[upper], (upper, lower)
    # every layer above the kernel may use it, but the CLI (through the client) and
    # the root (the public names, none of them an instruction)
    assert {name for name, row in LAYERS.items() if "kernel" in row} == \
        {name for name in LAYERS if "kernel" in _below(name)} - {"cli", "root"}
    every_layer = {layer_of(module) for module in import_graph()}
    assert every_layer <= set(LAYERS), every_layer - set(LAYERS)


def _below(layer: str) -> set[str]:
    seen: set[str] = set()
    todo = list(LAYERS[layer])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(LAYERS[name])
    return seen


def test_the_checker_catches_each_kind_of_violation() -> None:
    providers = {"alpha", "beta"}
    graph = {
        "gpucloud.transport.http": {"gpucloud.providers.base"},
        "gpucloud.providers.alpha.adapter": {"gpucloud.providers.beta._wire",
                                             "gpucloud.core.engine",
                                             "gpucloud.core.flow",
                                             "gpucloud.providers.alpha._wire"},
        "gpucloud.cli.commands.x": {"gpucloud.core.refs", "gpucloud.transport.redaction",
                                    "gpucloud.client.clients", "gpucloud"},
        "gpucloud.client.clients": {"gpucloud.providers.alpha._tokens",
                                    "gpucloud.providers.base"},
        "gpucloud.errors": {"gpucloud.catalog.gpus"},
        "gpucloud.config.settings": {"gpucloud.machine", "gpucloud.machine.remote_install"},
    }
    found = layer_violations(graph, providers, {})
    assert found == [
        "gpucloud.cli.commands.x -> gpucloud.core.refs: " + FORBIDDEN[("cli", "core")],
        "gpucloud.cli.commands.x -> gpucloud.transport.redaction: "
        + FORBIDDEN[("cli", "transport")],
        "gpucloud.client.clients -> gpucloud.providers.alpha._tokens: " + PROVIDER_BY_NAME,
        "gpucloud.config.settings -> gpucloud.machine.remote_install: "
        "config may import compat, errors; not machine",
        "gpucloud.errors -> gpucloud.catalog.gpus: errors may import models; not catalog",
        "gpucloud.providers.alpha.adapter -> gpucloud.core.engine: "
        + FORBIDDEN[("providers", "core")],
        "gpucloud.providers.alpha.adapter -> gpucloud.providers.beta._wire: "
        + PROVIDER_TO_PROVIDER,
        "gpucloud.transport.http -> gpucloud.providers.base: "
        + FORBIDDEN[("transport", "providers")],
    ]
    # an allowed entry silences its pair; one that matches no import is reported
    allowed = {("gpucloud.errors", "gpucloud.catalog.gpus"): "test",
               ("gpucloud.errors", "gpucloud.types"): "test"}
    found = layer_violations(graph, providers, allowed)
    assert not any(f.startswith("gpucloud.errors -> gpucloud.catalog.gpus:") for f in found)
    assert "gpucloud.errors -> gpucloud.types: allowed in ALLOWED but no longer imported, " \
           "or no longer against a rule: delete the entry" in found


def test_a_lazy_public_name_counts_as_its_module() -> None:
    graph = import_graph()
    # `from gpucloud import __version__` reaches no layer; a public name would
    assert "gpucloud" in graph["gpucloud.providers.base"]
    assert _root_lazy_names()["Client"] == "gpucloud.client.sync_client"
    node = ast.parse("from gpucloud import Client, __version__").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _resolve("gpucloud.providers.base", False, node, _root_lazy_names()) == \
        ["gpucloud", "gpucloud.client.sync_client", "gpucloud.__version__"]


# The client's own state and helpers (self._x, def _x in gpucloud/client);
# the CLI uses the client's public methods, never these.
CLI_PRIVATE_REACH: dict[tuple[str, str], str] = {
    ("gpucloud.cli.commands.catalog", "_offer_rows"):
        "stays: offers' catalog rows before they are Offers (no pydantic at start-up), "
        "a documented semi-private method of Client",
}


def _client_private_names() -> set[str]:
    names: set[str] = set()
    for path in (SRC / "client").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = node.name
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                  and node.value.id == "self" and isinstance(node.ctx, ast.Store)):
                name = node.attr
            else:
                continue
            if name.startswith("_") and not name.startswith("__"):
                names.add(name)
    return names


def cli_private_reaches(sources: dict[str, str], private: set[str]) -> set[tuple[str, str]]:
    found = set()
    for module, text in sources.items():
        for node in ast.walk(ast.parse(text)):
            own = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in ("self", "cls")
            if isinstance(node, ast.Attribute) and node.attr in private and not own:
                found.add((module, node.attr))
    return found


def test_the_cli_reaches_no_private_part_of_the_client() -> None:
    sources = {_module_name(p): p.read_text(encoding="utf-8")
               for p in (SRC / "cli").rglob("*.py")}
    found = cli_private_reaches(sources, _client_private_names())
    assert found - set(CLI_PRIVATE_REACH) == set(), "the CLI goes through the client's methods"
    assert set(CLI_PRIVATE_REACH) - found == set(), "delete the entries no longer needed"


def test_the_private_reach_check_catches_one() -> None:
    sources = {"gpucloud.cli.x": "def f(client):\n    return client._ctx.config, self._ctx\n"}
    assert cli_private_reaches(sources, {"_ctx"}) == {("gpucloud.cli.x", "_ctx")}
