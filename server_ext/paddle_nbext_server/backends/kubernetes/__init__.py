"""The `kubernetes` backend (docs/admin-guide.md, "A job's objects"): see `backend.KubernetesBackend`.

`backend` (the settings, `c.KubernetesBackend.*`, and the operations of `Backend`, composing the
parts), `settings` (the frozen values the parts and the manifests get),
`job_view` (what is known of the jobs, shared by the parts); subpackages: `client/` (connection,
calls, names, cache, RBAC refusals), `build/` (manifests, JobSet, Volcano, home volume, user
names), `status/` (record + pods -> JobStatus, queue and gang words, notes from the home),
`lifecycle/` (home setup, Workloads and PodGroups, reconcile, admission), `quota/`, `logs/`,
`timeline/`, `usage/` (metrics.k8s.io, metrics files).
"""

from .backend import KubernetesBackend

__all__ = ["KubernetesBackend"]
