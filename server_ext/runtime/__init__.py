"""Code that runs inside the job itself (launcher, master, shared policy).

Everything in this package is standard-library only and imports nothing from the rest of
paddle-nbext, so it runs in any image that has python3 (it is shipped to Kubernetes jobs inside
the job record ConfigMap).
"""
