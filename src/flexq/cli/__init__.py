"""The ``flexq`` command line (its commands in the modules of this package; the HTTP client they share is
:mod:`flexq.client`).

Import ``main`` from flexq.cli.main (the name is its module's).
"""

import sys

# httpx imports its own command line with itself (pygments and rich's syntax, progress and table: a sixth of the
# start-up every ``flexq`` command and ``flexq server`` pay). flexq never runs it: where nothing has imported httpx
# yet, its command line is marked absent, and httpx keeps the stub it has for an install without its CLI extras.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

__all__: list[str] = []
