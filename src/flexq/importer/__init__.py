"""A real cluster's queues and recent Workloads, read through a kubeconfig context, as a scenario for what-if."""
