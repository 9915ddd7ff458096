"""Unit tests of `paddle_nbext_server.backends`, one folder per backend, without Paddle or a cluster (the suites with them are tests/paddle_jobs and tests/cluster)."""
