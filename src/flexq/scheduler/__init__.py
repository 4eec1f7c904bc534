"""The scheduling core: Kueue's queues, quota, flavor assignment and preemption, in real and virtual time."""
