"""What a job is made of on Kubernetes: the manifests (pure functions of spec, owner and settings), the
JobSet and Volcano variants, the home volume, Kubernetes-safe user names, the in-tree cephfs check."""
