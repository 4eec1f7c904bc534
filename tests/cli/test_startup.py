"""What a ``flexq`` command loads before it runs: every call (and ``flexq server``) pays for it."""

from __future__ import annotations

import subprocess
import sys


def test_the_command_line_does_not_load_httpxs_own() -> None:
    """httpx's command line (pygments, rich's syntax highlighting) is not loaded: the client is there without it."""
    probe = ("import sys, flexq.cli.main, httpx; "
             "print(sorted(m for m in ('pygments', 'rich.syntax', 'rich.progress') if m in sys.modules)); "
             "print(httpx.Client.__name__)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["[]", "Client"], out.stderr
