"""Fixtures of the runtime tests: ``ray_processes`` counts the Ray processes a test starts and fails it if any
outlives it (:mod:`tests.runtime.ray_leaks`)."""

from tests.runtime.ray_leaks import ray_processes

__all__ = ["ray_processes"]
