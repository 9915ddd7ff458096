"""Unit tests of the Kubernetes backend: manifests, faults, logs, queue reads and quota checks, against fakes of the API (the real cluster is tests/cluster)."""
