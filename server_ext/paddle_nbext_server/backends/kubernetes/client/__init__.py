"""The Kubernetes API as the backend uses it: the connection, blocking calls run in threads, the names of
the APIs and objects, the watch-backed cache, and RBAC refusals in words."""
