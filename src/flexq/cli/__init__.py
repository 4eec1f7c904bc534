"""The ``flexq`` command line."""
