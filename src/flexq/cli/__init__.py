"""The ``flexq`` command line (its commands in the modules of this package; the HTTP client they share is
:mod:`flexq.client`).

Import ``main`` from flexq.cli.main (the name is its module's).
"""

__all__: list[str] = []
