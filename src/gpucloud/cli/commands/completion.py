"""`gpucloud completion SHELL`: print the shell's completion script, install nothing.

The script calls `gpucloud` back with _GPUCLOUD_COMPLETE set (typer's completion
protocol: `complete_bash`, `complete_zsh`, `complete_fish`); GpuCloudGroup.main
answers those calls with the names of commands, options and choices.
"""

from __future__ import annotations

import sys

import typer

from gpucloud.cli import output
from gpucloud.cli.app import COMPLETE_VAR, app, fail

SHELLS = ("bash", "zsh", "fish")
_HOW = {"bash": "source <(gpucloud completion bash)  # in ~/.bashrc",
        "zsh": "source <(gpucloud completion zsh)  # in ~/.zshrc, after compinit",
        "fish": "gpucloud completion fish > ~/.config/fish/completions/gpucloud.fish"}


@app.command()
def completion(shell: str = typer.Argument(..., metavar="SHELL", help="bash, zsh or fish."),
               json_output: bool = typer.Option(
                   False, "--json", help='Wrap it as {"shell": ..., "script": ...}.')) -> None:
    """Print the completion script for SHELL (bash, zsh, fish); nothing is installed.

    bash: `source <(gpucloud completion bash)` in ~/.bashrc; zsh: the same in
    ~/.zshrc after compinit; fish: `gpucloud completion fish >
    ~/.config/fish/completions/gpucloud.fish`.
    """
    from typer._completion_shared import get_completion_script

    if shell not in SHELLS:
        fail(2, "usage", f"no completion for shell {shell!r}",
             f"SHELL is one of {', '.join(SHELLS)}", json_output)
    script = get_completion_script(prog_name="gpucloud", complete_var=COMPLETE_VAR,
                                   shell=shell)
    if json_output:
        output.emit_json({"shell": shell, "script": script})
        return
    sys.stdout.write(f"# gpucloud completion for {shell}: {_HOW[shell]}\n{script}\n")
