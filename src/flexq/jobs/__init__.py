"""Job integrations: RayJob and batch/v1 Job into Kueue Workloads, and admission back into the jobs."""
