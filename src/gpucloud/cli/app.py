"""The typer app, global options, and the one place errors become exit codes."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import typer
from typer.core import TyperGroup

from ..errors import EXIT_CODES, GpuCloudError, exit_code_for

try:  # typer >= 0.29 vendors click
    from typer._click.exceptions import UsageError as _UsageError
except ImportError:  # pragma: no cover
    from click.exceptions import UsageError as _UsageError


def _wants_json(args: list[str]) -> bool:
    return "--json" in args


class GpuCloudGroup(TyperGroup):
    """Renders every error once: one line and a hint, or a JSON document."""

    def invoke(self, ctx: typer.Context) -> Any:
        args = [*getattr(ctx, "_protected_args", []), *ctx.args]
        as_json = _wants_json(args)
        try:
            return super().invoke(ctx)
        except GpuCloudError as exc:
            fail(exit_code_for(exc), exc.code, exc.message, exc.hint, as_json, _details(exc))
        except _UsageError as exc:
            if not as_json:
                raise
            fail(2, "usage", exc.format_message(), None, True)
        except (KeyboardInterrupt, typer.Abort):
            # Ctrl-C (or end of input at a prompt). Commands that may leave
            # machines behind (create) report them themselves before this.
            fail(130, "interrupted", "interrupted", None, as_json)
        except typer.Exit:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: no traceback unless --debug
            if logging.getLogger("gpucloud").isEnabledFor(logging.DEBUG):
                raise
            fail(1, "internal", f"internal error: {type(exc).__name__}: {exc}",
                 "this is a bug in gpucloud; rerun with --debug for the traceback", as_json)


def _details(exc: GpuCloudError) -> dict[str, Any]:
    """What a script needs to clean up after a failure: machines made, offers tried."""
    out: dict[str, Any] = {}
    if exc.instances:
        out["instances"] = [i.model_dump(mode="json") for i in exc.instances]
    if exc.attempts:
        out["attempts"] = [a.model_dump(mode="json") for a in exc.attempts]
    if exc.launch_id:
        out["launch_id"] = exc.launch_id
    return out


def fail(code: int, name: str, message: str, hint: str | None, as_json: bool,
         extra: dict[str, Any] | None = None) -> None:
    """Report an error and exit. `extra` adds top-level keys beside "error" under --json
    (e.g. the machine a failed --wait leaves behind)."""
    if as_json:
        payload = {"error": {"code": name, "message": message, "hint": hint, "exit_code": code},
                   **(extra or {})}
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        sys.stderr.write(f"error: {message}\n")
        if hint:
            sys.stderr.write(f"hint: {hint}\n")
    raise typer.Exit(code)


app = typer.Typer(
    cls=GpuCloudGroup,
    name="gpucloud",
    help="Provision GPU machines across GPU clouds through one interface.",
    no_args_is_help=True,
    epilog="Exit codes: 0 ok, 1 bug, 2 usage or invalid request, 3 configuration or missing "
           "credentials, 4 authentication, 5 not found, 6 no capacity/quota/offer, 7 over "
           "budget, 8 confirmation needed, 9 wait timed out or machine failed, 10 other "
           "provider API errors, 130 interrupted.",
    add_completion=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"gpucloud {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    debug: bool = typer.Option(False, "--debug", help="Log requests (never secrets) to stderr."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit."),
) -> None:
    """Provision GPU machines across GPU clouds through one interface.

    Exit codes: 0 ok, 1 bug, 2 usage/invalid spec, 3 configuration or missing
    credentials, 4 authentication, 5 not found, 6 no capacity/quota, 7 over
    budget, 8 confirmation needed, 9 wait timed out or machine failed,
    10 other provider API errors, 130 interrupted.
    """
    if debug:
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                            format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("gpucloud").setLevel(logging.DEBUG)
        # httpx/httpcore log full URLs and, at trace level, headers: keep them quiet.
        for noisy in ("httpx", "httpcore"):
            logging.getLogger(noisy).setLevel(logging.WARNING)


__all__ = ["EXIT_CODES", "app", "fail"]
