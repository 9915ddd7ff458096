"""Backends run jobs: `local` (processes on this machine) and `kubernetes` (objects in a cluster).

Both implement `paddle_nbext_server.backends.base.Backend`; the server extension picks one by
`c.PaddleNbext.backend`.
"""
