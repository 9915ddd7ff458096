"""The job model both sides share: what a job is, how it is checked, and how its state reads.

The kernel side (API, magics, widgets, CLI) and the server extension both import these modules,
and only these, from each other's world: `contract` (the words on the wire and in the cluster:
phases, roles, label keys; standard library only, shipped into every job's bundle), `fields` (the
field table), `quantity` (exact Kubernetes amounts), `rules` (the checks and limits), `spec` (the
`JobSpec` those build), `schema` (the JSON Schema the panel's form is driven by), `status` (the
`JobStatus` every client reads) and `quota` (a submit's fit against the namespace's quota).

The rule, enforced by tests/project/test_import_graph.py: modules here import only each other and the
standard library, never the kernel-side UI modules beside this package nor the server, so the
server can use the model without loading anything a kernel needs, and the model stays the one
place a change to a job's shape is made.
"""
