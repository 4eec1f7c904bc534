"""Where machines come from: the machine catalog, node pools, the emulated cloud, placement, autoscaling."""
