"""The ``flexq`` command line: the HTTP :class:`Client` its commands share.

Import ``main`` from flexq.cli.main (the name is its module's).
"""

from flexq.cli.client import Client

__all__ = ["Client"]
