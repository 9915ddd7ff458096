"""The `kubernetes` backend (docs/admin-guide.md, "A job's objects"): see `backend.KubernetesBackend`.

Modules: `settings` (deployment facts as a value), `manifests` (spec -> objects, pure),
`home_volume` (which volume holds the user's home), `connection` (API config and namespace),
`cache` (watch-backed cache), `status` (record + pods -> JobStatus), `backend` (the Backend).
"""

from .backend import KubernetesBackend

__all__ = ["KubernetesBackend"]
