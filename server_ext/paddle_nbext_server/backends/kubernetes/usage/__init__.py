"""Resource use of a job's replicas (metrics.k8s.io) and the metrics files its launchers name."""
