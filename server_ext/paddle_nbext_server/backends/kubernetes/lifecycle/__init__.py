"""The server's share of a job's life: the checks a submit passes, the user's home in job pods, and the
reconcile loop that turns watch events into statuses and records ends."""
