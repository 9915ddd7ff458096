"""Outbound notifications: a job that fails, stalls, nears its memory limit, ends or starts after
waiting in a queue tells its owner by webhook or e-mail, even when no browser tab is open.

* `admin`: `c.PaddleNbextNotifications`, the channels the admin enables and where they may go.
* `prefs`: each user's own choices (events, webhook, e-mail), validated and kept on disk.
* `detect`: which events a job's status and timeline hold, remembered per job so each is found once.
* `messages`: what a notification says, in the job's own words, with a link to the job view.
* `outbox`: the durable queue of messages; delivered exactly once across restarts.
* `channels`: the blocking senders (HTTP for webhooks, SMTP for e-mail), run in worker threads.
* `service`: the tasks on the server's event loop that tie these together.
"""
