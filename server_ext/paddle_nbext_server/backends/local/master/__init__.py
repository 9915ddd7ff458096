"""What runs in a local job's master: one detached process per job, beside the server, started
as `python -m paddle_nbext_server.backends.local.master <job_dir>` (`__main__`).

`lifecycle.Master` owns the job's lifecycle from admission to its recorded end; it is built from
`admission` (the jobs dir's shared resources, under a file lock), `replica` and `spawn` (each
replica's launcher process, forked from the master when it can: `forked`, with its kernel memory
limit: `limits`), `process_table` (one reading of `/proc` per check), and the training health it
keeps (`training_health`, `usage_sampler`, `stall_watch`) and the environment build it says
(`environment_progress`).

The server never imports this package: it starts masters and reads what they record in the job
dir (`records`, `usage`, `pending_end`, shared with it one level up).  Nothing is imported here,
so starting a master loads only what `lifecycle` needs.
"""
