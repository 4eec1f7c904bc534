"""Past one machine: flexq's setup exported to real GKE (:mod:`flexq.export.gke`)."""
