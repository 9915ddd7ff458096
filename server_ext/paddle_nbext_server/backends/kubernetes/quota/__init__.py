"""Quota before submit: the namespace's ResourceQuotas and Kueue's ClusterQueue, read and judged."""
