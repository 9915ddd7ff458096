"""What `/events` announces on its own, beside the backends' job changes: while someone's event
stream is open, their running jobs are looked at every few seconds (`ticker`), and new metrics
points (`metrics`) and new resource use and timeline entries (`health`) become events on the
bus (`paddle_nbext_server.events`). A job nobody watches costs nothing.
"""
