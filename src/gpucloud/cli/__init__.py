"""The gpucloud command line: a thin layer over the SDK.

Start-up stays close to the bare cost of importing typer: this package
imports only typer and gpucloud's light modules (errors, gpus) at the top;
each command imports the client (httpx, pydantic, keyring, adapters) inside
its own body. `main` (the `gpucloud` script) imports and builds only the
command the line runs (see registry); `gpucloud.cli.app` is the whole app.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# httpx's package __init__ imports its own command line (httpx._main) when
# click is installed, and with it rich and pygments: about 30 ms on every
# command that reaches a provider. The gpucloud command line never runs
# httpx's, so that import is made to fail as when click is absent (httpx then
# defines a stub `main`). Done here, where the command line is loaded, never
# by the SDK, whose host program may want httpx's CLI.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from gpucloud.cli import registry  # noqa: E402 - after the line above, which must come first
from gpucloud.cli.app import COMPLETE_VAR  # noqa: E402
from gpucloud.cli.app import app as _app  # noqa: E402

# Importing the submodule `app` bound its name here; dropped so that
# `from gpucloud.cli import app` goes through __getattr__ and gets the Typer
# app with every command registered, as it did when all were imported here.
del globals()["app"]


def _whole_app() -> Any:
    registry.load()
    registry.put_in_order(_app)
    globals()["app"] = _app  # later look-ups skip __getattr__
    return _app


def __getattr__(name: str) -> Any:
    if name == "app":
        return _whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(args: list[str] | None = None) -> None:
    argv = sys.argv[1:] if args is None else args
    name = registry.command_word(argv)
    if name is None:  # help, errors and suggestions need every command
        whole = _whole_app()
        # A shell asking for completions runs with no arguments, like root help,
        # but needs every command's parameters.
        summary = registry.root_help(argv) and not os.environ.get(COMPLETE_VAR)
        (registry.summary(whole) if summary else whole)(args)
        return
    registry.load(name)
    registry.only(_app, name)(args)


__all__ = ["app", "main"]
