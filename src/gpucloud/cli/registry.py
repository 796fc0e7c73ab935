"""Which module registers each command: the one place the CLI looks this up.

typer builds a click command (parameters, help) for every command registered
on the app, on every run; with this map a run of one command imports and
builds that command alone, so start-up stays fast. tests/cli/test_startup_imports.py fails
when a module registers a command the map does not list, or the map lists one
its modules do not register.
"""

from __future__ import annotations

from typing import Any

# Command name -> the modules that register it (a group: also those that add
# sub-commands to it), in the order `gpucloud --help` lists the commands
# (typer lists plain commands first, then groups).
COMMANDS: dict[str, tuple[str, ...]] = {
    "offers": ("catalog",),
    "estimate": ("catalog",),
    "gpus": ("catalog",),
    "providers": ("catalog",),
    "costs": ("costs",),
    "create": ("instance",),
    "list": ("instance",),
    "get": ("instance",),
    "delete": ("instance",),
    "stop": ("instance",),
    "start": ("instance",),
    "extend": ("deadline",),
    "reap": ("deadline",),
    "doctor": ("doctor",),
    "top": ("doctor",),
    "submit": ("job",),
    "reconcile": ("reconcile",),
    "worker": ("worker",),
    "ssh": ("ssh",),
    "ssh-config": ("ssh",),
    "auth": ("auth",),
    "jobs": ("job",),
    "schema": ("job",),
    "completion": ("completion",),
    "queue": ("queue", "worker"),  # commands.worker adds `queue workers`
    "volumes": ("volumes",),
    "state": ("state",),
}


def command_word(args: list[str]) -> str | None:
    """The one command this line runs, or None when it needs every command:
    no command, root help or --version, an option the root does not have,
    `--`, or a word that is no command (its error suggests close names)."""
    for arg in args:
        if arg != "--debug":  # the root's only option allowed before a command
            return arg if arg in COMMANDS else None
    return None


def modules(name: str | None = None) -> list[str]:
    """The modules to import for one command, or for all of them."""
    names = [name] if name is not None else list(COMMANDS)
    return list(dict.fromkeys(m for n in names for m in COMMANDS[n]))


def load(name: str | None = None) -> None:
    """Import (so register) one command's modules, or every command module."""
    for module in modules(name):
        # __import__, not importlib.import_module: -X importtime sees it.
        __import__(f"{__package__}.commands.{module}")


def name_of(info: Any) -> str | None:
    """The name typer gives a registered command (CommandInfo) or group (TyperInfo)."""
    from typer.main import get_command_name

    name = getattr(info, "name", None)
    if not isinstance(name, str):  # not given: typer's DefaultPlaceholder
        name = (info.typer_instance.info.name if hasattr(info, "typer_instance")
                else get_command_name(info.callback.__name__))
    return name if isinstance(name, str) else None


def _rank(info: Any) -> int:
    name = name_of(info)
    return list(COMMANDS).index(name) if name in COMMANDS else len(COMMANDS)


def put_in_order(app: Any) -> None:
    """Sort the app's commands as the map lists them: `--help` shows that order,
    whichever module happened to be imported first."""
    app.registered_commands.sort(key=_rank)
    app.registered_groups.sort(key=_rank)


def root_help(args: list[str]) -> bool:
    """True for a line that only asks for the list of commands."""
    rest = [a for a in args if a != "--debug"]
    return rest in ([], ["--help"], ["-h"])


def summary(app: Any) -> Any:
    """A copy of the whole app for `gpucloud --help`, which lists each command by
    name and the first paragraph of its help only. typer would first build every
    parameter of every command (signatures, type hints: a fifth of the run);
    here each command's callback is a stand-in with the same name and docstring
    and no parameters, and each group keeps its help but not its sub-commands.
    tests/cli/test_startup_imports.py holds the output to the whole app's."""
    import copy

    view = copy.copy(app)
    view.registered_commands = []
    for info in app.registered_commands:
        info = copy.copy(info)
        info.callback = _stand_in(info.callback)
        view.registered_commands.append(info)
    view.registered_groups = []
    for group in app.registered_groups:
        group = copy.copy(group)
        sub = group.typer_instance = copy.copy(group.typer_instance)
        sub.registered_commands, sub.registered_groups = [], []
        view.registered_groups.append(group)
    return view


def _stand_in(callback: Any) -> Any:
    def stand_in() -> None:  # only listed, never run: root help exits first
        raise RuntimeError(f"{callback.__name__} stand-in called")

    stand_in.__name__ = callback.__name__  # typer names a command after it
    stand_in.__doc__ = callback.__doc__  # and takes its help from here
    return stand_in


def only(app: Any, name: str) -> Any:
    """A copy of the app that holds (so builds) only the command `name`."""
    import copy

    view = copy.copy(app)
    view.registered_commands = [c for c in app.registered_commands if name_of(c) == name]
    view.registered_groups = [g for g in app.registered_groups if name_of(g) == name]
    return view
