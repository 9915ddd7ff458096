"""A job's status from its objects: the record and pods as a `JobStatus`, Kueue queue words and
positions, Volcano's PodGroup, the resume note, and whether a failed pod's node still answers."""
