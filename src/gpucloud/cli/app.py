"""The typer app, global options, and the one place errors become exit codes."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from gpucloud.errors import EXIT_CODES, GpuCloudError, exit_code_for, spoken_by_cli
from gpucloud.cli import coercion
from gpucloud.cli.output import clean

try:  # typer >= 0.29 vendors click
    from typer._click.exceptions import ClickException as _ClickException
except ImportError:  # pragma: no cover
    from click.exceptions import ClickException as _ClickException

# The variable the shell completion scripts set (`gpucloud completion SHELL`),
# fixed so that `python -m gpucloud` answers the same scripts.
COMPLETE_VAR = "_GPUCLOUD_COMPLETE"
# A reader that stopped reading (`gpucloud list | head -3`): the exit status a
# shell reports for a program ended by SIGPIPE (128 + 13), as for `yes | head`.
EXIT_CLOSED_PIPE = 141


def _wants_json(args: list[str]) -> bool:
    # Words after `--` belong to a remote command (`gpucloud ssh box -- tool --json`).
    ours = args[:args.index("--")] if "--" in args else args
    return "--json" in ours


class HelpGroup(TyperGroup):
    """Help that says what to type: command summaries in full (click cuts them
    to one line with "..."; here they wrap), arguments by metavar, no type names."""

    def get_command(self, ctx: Any, name: str) -> Any:
        cmd = super().get_command(ctx, name)
        for param in getattr(cmd, "params", ()):
            if param.param_type_name == "argument" and param.metavar:
                # typer would print "REF <str>": the metavar already says it all.
                param.display_type_rich = lambda ctx=None: None
        return cmd

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, cmd, rest = super().resolve_command(ctx, args)
        if cmd is not None:  # the command about to run: no pydantic for plain values
            coercion.install(cmd, ctx)
        return name, cmd, rest

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        coercion.install(self, ctx, recurse=False)  # the root's own options
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            text = cmd.short_help or (cmd.help or "").split("\n\n")[0]
            rows.append((name, " ".join(text.split())))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


_TRUE = ("1", "true", "yes", "on")


class _StderrHandler(logging.Handler):
    """Writes to whatever sys.stderr is at the time (test runners swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(clean(self.format(record)) + "\n")
        except Exception:  # noqa: BLE001 - logging must never break a command
            self.handleError(record)


_DEBUG_HANDLER = _StderrHandler()
_DEBUG_HANDLER.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
# Retry lines (`retrying lambda (2/5) after connection error…`) so a long wait
# on a failing network is visibly a wait, not a hang. Text mode only.
_RETRY_HANDLER = _StderrHandler()
_RETRY_HANDLER.addFilter(lambda record: getattr(record, "retry", False))


def configure_logging(debug: bool, as_json: bool) -> Callable[[], None]:
    """Set up the CLI's log output for one invocation; returns what undoes it
    (the CLI also runs inside other programs and test runners)."""
    logger = logging.getLogger("gpucloud")
    http = logging.getLogger("gpucloud.http")
    saved = (logger.level, http.level)
    if debug:  # shows the retry lines too
        logger.setLevel(logging.DEBUG)
        logger.addHandler(_DEBUG_HANDLER)
    elif not as_json:
        http.setLevel(logging.INFO)
        http.addHandler(_RETRY_HANDLER)

    def restore() -> None:
        logger.removeHandler(_DEBUG_HANDLER)
        http.removeHandler(_RETRY_HANDLER)
        logger.setLevel(saved[0])
        http.setLevel(saved[1])
    return restore


def _take_debug(args: list[str]) -> tuple[list[str], bool]:
    """--debug is accepted anywhere on the line (`gpucloud list --debug`), not only
    before the command; GPUCLOUD_DEBUG=1 does the same."""
    end = args.index("--") if "--" in args else len(args)
    debug = "--debug" in args[:end]
    kept = [a for i, a in enumerate(args) if i >= end or a != "--debug"]
    return kept, debug or os.environ.get("GPUCLOUD_DEBUG", "").strip().lower() in _TRUE


class GpuCloudGroup(HelpGroup):
    """Renders every error once: one line and a hint, or a JSON document."""

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        argv, debug = _take_debug(argv)
        restore_logging = configure_logging(debug, _wants_json(argv))
        restore_words = spoken_by_cli()  # hints name --flags, not keyword arguments

        def restore() -> None:
            restore_words()
            restore_logging()
        kwargs.setdefault("complete_var", COMPLETE_VAR)
        if os.environ.get(COMPLETE_VAR):  # a shell asks for completions: typer's classes
            from typer._completion_classes import completion_init

            completion_init()
        try:
            return super().main(argv, *rest, **kwargs)
        finally:
            restore()

    def make_context(self, info_name: Any, args: list[str], *rest: Any, **kwargs: Any) -> Any:
        # The root's own parsing (`gpucloud --bogus`, `gpucloud lst`, root --help
        # into a closed pipe) happens here, before invoke.
        as_json = _wants_json(list(args))
        try:
            return super().make_context(info_name, args, *rest, **kwargs)
        except _ClickException as exc:
            usage_error(exc, as_json)
        except BrokenPipeError:
            closed_pipe()

    def invoke(self, ctx: typer.Context) -> Any:
        args = [*getattr(ctx, "_protected_args", []), *ctx.args]
        as_json = _wants_json(args)
        try:
            return super().invoke(ctx)
        except GpuCloudError as exc:
            fail(exit_code_for(exc), exc.code, exc.message, exc.hint, as_json, _details(exc))
        except _ClickException as exc:
            usage_error(exc, as_json)
        except BrokenPipeError:
            closed_pipe()
        except (KeyboardInterrupt, typer.Abort):
            # Ctrl-C (or end of input at a prompt). Commands that may leave
            # machines behind (create) report them themselves before this.
            fail(130, "interrupted", "interrupted", None, as_json)
        except typer.Exit:
            raise
        except Exception as exc:  # a bug: no traceback unless --debug
            if logging.getLogger("gpucloud").isEnabledFor(logging.DEBUG):
                raise
            fail(1, "internal", f"internal error: {type(exc).__name__}: {exc}",
                 "this is a bug in gpucloud; rerun with --debug for the traceback", as_json)


def usage_error(exc: Any, as_json: bool) -> None:
    """click's usage errors ("No such option", "Missing argument", a bad value) in
    the shape of every other error, with where to read the usage as the hint."""
    if type(exc).__name__ == "NoArgsIsHelpError":  # `gpucloud`, `gpucloud jobs`: the help
        raise exc
    ctx = getattr(exc, "ctx", None)
    group = ctx is None or hasattr(ctx.command, "commands")
    words: list[str] = []
    while ctx is not None and ctx.parent is not None:  # the root's name is the program's
        words.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    command = " ".join(["gpucloud", *words])
    what = "the commands" if group else "the options"
    fail(getattr(exc, "exit_code", 2) or 2, "usage", exc.format_message(),
         f"`{command} --help` shows {what}", as_json)


def closed_pipe() -> None:
    """The reader of stdout went away (`gpucloud list | head -3`): stop quietly.
    stdout is pointed at /dev/null first, so the flush at exit cannot fail again
    ("Exception ignored ... BrokenPipeError"), as the Python docs advise (signal
    module, "Note on SIGPIPE")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (a test runner)
        pass
    raise typer.Exit(EXIT_CLOSED_PIPE)


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
    try:
        if as_json:
            payload = {"error": {"code": name, "message": message, "hint": hint,
                                 "exit_code": code}, **(extra or {})}
            sys.stdout.write(json.dumps(payload) + "\n")
            sys.stdout.flush()
        else:  # messages quote providers: cleaned of control characters
            sys.stderr.write(f"error: {clean(message)}\n")
            if hint:
                sys.stderr.write(f"hint: {clean(hint)}\n")
    except BrokenPipeError:
        # The reader went away: the error's own exit code still tells a script
        # what happened (not 1, a bug, nor 141, a pipe closed on a success).
        try:
            closed_pipe()
        except typer.Exit:
            pass
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
        from gpucloud import __version__

        typer.echo(f"gpucloud {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    debug: bool = typer.Option(False, "--debug",
                               help="Log requests (never secrets) to stderr; allowed anywhere "
                                    "on the line, or set GPUCLOUD_DEBUG=1."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version and exit."),
) -> None:
    """Provision GPU machines across GPU clouds through one interface.

    Exit codes: 0 ok, 1 bug, 2 usage/invalid spec, 3 configuration or missing
    credentials, 4 authentication, 5 not found, 6 no capacity/quota, 7 over
    budget, 8 confirmation needed, 9 wait timed out or machine failed,
    10 other provider API errors, 130 interrupted.
    """
    # --debug is taken out of the arguments before parsing: GpuCloudGroup.main.


__all__ = ["EXIT_CODES", "app", "fail"]
