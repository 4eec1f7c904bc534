"""``flexq``: the command line. kubectl-shaped where the guide uses kubectl; flexq's own beyond it.

Every command reaches the server through ``--server URL`` or ``FLEXQ_SERVER``, else the default local
address. With no server there, a command says how to start one and exits 1: the CLI never starts a
server behind the user's back, so state always lives in one place the user chose.

The commands live by concept: :mod:`~flexq.cli.kubectl` (apply, get, describe, delete, create, logs,
port-forward), :mod:`~flexq.cli.container` (``container``, as ``gcloud container``), :mod:`~flexq.cli.checks`,
:mod:`~flexq.cli.serve`, :mod:`~flexq.cli.env` (env, kubeconfig), :mod:`~flexq.cli.simulate`,
:mod:`~flexq.cli.forecast`, :mod:`~flexq.cli.stop` (stop, resume); this module only
assembles them into one app and turns errors into messages and exit codes.
"""

from __future__ import annotations

import copy
import functools
import os
import sys
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flexq import __version__
from flexq.api import ApiError, UnknownKind
from flexq.cli import kubectl, options
from flexq.cli.checks import check_app
from flexq.cli.container import container_app
from flexq.cli.dashboard import dashboard
from flexq.cli.env import env, kubeconfig
from flexq.cli.export import export_app
from flexq.cli.forecast import forecast
from flexq.cli.importer import import_cluster
from flexq.cli.serve import server
from flexq.cli.simulate import simulate
from flexq.cli.stop import resume_app, stop_app
from flexq.cli.token_commands import token_app
from flexq.client import CliError, close_clients

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["LazyCommands", "app", "click_app", "main"]

app = typer.Typer(
    name="flexq", no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
    help="A job queue for AI training: Kueue's semantics, DWS queued provisioning, real runs on Ray.",
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.callback()(options.root)
app.add_typer(kubectl.create_app, name="create")
app.add_typer(token_app, name="token")
app.add_typer(export_app, name="export")
app.command("import")(import_cluster)
for verb in (kubectl.apply, kubectl.get, kubectl.describe, kubectl.delete):
    app.command()(verb)
app.add_typer(container_app, name="container")
app.add_typer(check_app, name="check")
app.add_typer(stop_app, name="stop")
app.add_typer(resume_app, name="resume")
for command in (server, kubeconfig, env, simulate, forecast, kubectl.logs):
    app.command()(command)
app.command("port-forward")(kubectl.port_forward)


@app.command()
def top(
    interval: Annotated[float, typer.Option("--interval", "-n", help="Seconds between refreshes.", min=0.5)] = 2.0,
    once: Annotated[bool, typer.Option("--once", help="Print the overview once and exit.")] = False,
) -> None:
    """Where every queue, node pool and waiting job stands, live: quota in use, nodes, why each job waits."""
    from rich.console import Console

    from flexq.cli import top as overview

    # Printed once into a pipe, the overview is as wide as it needs (a terminal, or COLUMNS, sets the width).
    wide = once and not sys.stdout.isatty() and "COLUMNS" not in os.environ
    overview.run(options.client(), interval, once, Console(width=200 if wide else None))


app.command()(dashboard)


@app.command()
def version() -> None:
    """Print flexq's version."""
    typer.echo(f"flexq {__version__}")


@functools.cache
def click_app() -> Callable[..., object]:
    """The app as one click command, built once a process, and each of its commands only when it is asked for:
    typer builds a command from its function's signature, and building all forty (32 ms of CPU) for the one a call
    runs was an eighth of a ``flexq`` call's CPU. ``--help`` and a mistyped command's suggestions build them all.
    Calling it is calling ``app``."""
    shell = copy.copy(app)  # the root alone: its callback (the global options) and settings
    shell.registered_commands, shell.registered_groups = [], []
    root = typer.main.get_group(shell)
    root.commands = LazyCommands(_makers(app))
    return root


def _makers(typer_app: typer.Typer) -> dict[str, Callable[[], Any]]:
    """How to build each command and command group of ``typer_app``, by name, in the order they were added."""
    short, markup = typer_app.pretty_exceptions_short, typer_app.rich_markup_mode
    makers: dict[str, Callable[[], Any]] = {}
    for command in typer_app.registered_commands:
        assert command.callback is not None
        name = command.name or typer.main.get_command_name(command.callback.__name__)
        makers[name] = functools.partial(typer.main.get_command_from_info, command, pretty_exceptions_short=short,
                                         rich_markup_mode=markup)
    for group in typer_app.registered_groups:
        assert group.name, "every command group is added with its name"
        makers[group.name] = functools.partial(typer.main.get_group_from_info, group, pretty_exceptions_short=short,
                                               suggest_commands=typer_app.suggest_commands, rich_markup_mode=markup)
    return makers


class LazyCommands(MutableMapping[str, Any]):
    """A click group's commands, each built the first time it is looked up (click and typer read a group's commands
    through ``get``, ``items`` and ``keys``)."""

    def __init__(self, makers: dict[str, Callable[[], Any]]) -> None:
        self._makers = makers
        self.built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        built = self.built.get(name)
        if built is None:
            built = self.built[name] = self._makers[name]()
        return built

    def __setitem__(self, name: str, command: Any) -> None:
        self._makers[name] = lambda: command
        self.built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._makers[name]
        self.built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


def main() -> None:
    """Entry point: run the app; user errors become a message on stderr and exit 1, never a traceback."""
    try:
        code = click_app()(standalone_mode=False)  # a command's typer.Exit(N) comes back as N here
    except CliError as exc:
        typer.echo(exc.message, err=True)
        sys.exit(exc.code)
    except (ApiError, UnknownKind) as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        if _usage_error(exc):  # a bad option or argument: click's own message, as in standalone mode
            exc.show()  # type: ignore[attr-defined]
            sys.exit(int(exc.exit_code))  # type: ignore[attr-defined]
        raise
    finally:
        close_clients()
    if isinstance(code, int) and code:
        sys.exit(code)


def _usage_error(exc: Exception) -> bool:
    """Is ``exc`` a click error (from click, or from the copy of click that newer typer releases vendor)?"""
    import click

    vendored: tuple[type[Exception], ...] = ()
    try:
        from typer._click import exceptions as typer_click  # type: ignore[import-not-found, unused-ignore]

        vendored = (typer_click.ClickException,)
    except ImportError:
        pass
    return isinstance(exc, (click.ClickException, *vendored))


if __name__ == "__main__":
    main()
