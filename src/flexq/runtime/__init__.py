"""Real execution: a local Ray cluster per RayJob, the job's entrypoint through Ray's Jobs API, logs."""
