"""The Kubernetes suite on a real control plane and a real node (see conftest.py): real pods, real Paddle, a real JupyterHub."""
