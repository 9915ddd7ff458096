"""Tests of what an admin installs: paddle-nbext's Helm chart (deploy/chart) linted and rendered by
the pinned Helm, the shipped deploy/ files it generates, the ceph-csi and Zero to JupyterHub values,
and deploy/cephfs/provision_home.py offline."""
