"""What a ``flexq`` command loads before it runs: every call (and ``flexq server``) pays for it."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from typing import Any


def test_the_command_line_does_not_load_httpxs_own() -> None:
    """httpx's command line (pygments, rich's syntax highlighting) is not loaded: the client is there without it."""
    probe = ("import sys, flexq.cli.main, httpx; "
             "print(sorted(m for m in ('pygments', 'rich.syntax', 'rich.progress') if m in sys.modules)); "
             "print(httpx.Client.__name__)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["[]", "Client"], out.stderr


def test_a_call_builds_only_the_command_it_runs() -> None:
    """typer builds a command from its function's signature: a call builds the one it runs (a group's, for a command
    of a group), ``--help`` and a mistyped command's suggestion build them all, and the help lists them in the order
    they were added."""
    from flexq.cli.main import LazyCommands, click_app

    def fresh() -> tuple[Any, LazyCommands]:
        root: Any = click_app.__wrapped__()  # not the process's own, which other calls may have built
        assert isinstance(root.commands, LazyCommands)
        return root, root.commands

    root, commands = fresh()
    root(["version"], standalone_mode=False)
    assert sorted(commands.built) == ["version"]
    root, commands = fresh()
    with contextlib.suppress(SystemExit):
        root(["container", "clusters", "--help"], standalone_mode=False)
    assert sorted(commands.built) == ["container"]
    root, commands = fresh()
    listed = root.list_commands(None)
    assert listed[:4] == ["import", "apply", "get", "describe"] and "container" in listed and "top" in listed
    assert sorted(commands.built) == sorted(listed), "the listing builds each, for its help line"
