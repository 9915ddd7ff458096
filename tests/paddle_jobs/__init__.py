"""Real Paddle jobs through the local backend: processes, ranks, limits, checkpoints, requirements (helpers in local_jobs.py)."""
