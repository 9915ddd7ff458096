"""What the server reads and writes in a job's directory (and the user's envs dir), the same for
both backends: the package snapshot, the runtime bundle, the requirements' environment, the
checkpoints, the metrics files, log tails, the timeline and the environments' housekeeping.

The replicas' side of the same files is `paddle_nbext_server.runtime`, which ships into the job.
"""
