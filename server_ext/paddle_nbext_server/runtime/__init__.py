"""Code that runs inside job images: the launcher every replica runs, the lifecycle policy, and
the in-cluster master of Kubernetes jobs.

Everything in this package is standard-library only and imports nothing from the rest of
paddle-nbext, so it runs in any image that has python3 (it is shipped to Kubernetes jobs inside
the job record ConfigMap). Code that runs beside the server, such as the local backend's master,
lives with its backend instead.
"""
