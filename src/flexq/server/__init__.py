"""The front doors: the Kubernetes API (for kubectl) and flexq's own HTTP API."""
