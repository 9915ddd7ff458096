"""Benchmark: notification delivery latency from the event, and nothing lost across a restart
(issue 47, part 3).

A real ``jupyter server`` (the local backend) with webhooks and e-mail enabled, a webhook receiver
(HTTP) and an SMTP server (aiosmtpd) on 127.0.0.1, the user's settings saved through the API:

- **failed**: ``--rounds`` jobs that fail at once (plain Python raising, so a round costs ~1 s),
  one after another; for each, seconds from the job's recorded end (``finished``, the master's
  clock) to the webhook's arrival and to the e-mail's;
- **stalled**: a job that reports step 1 and goes quiet, with ``stall_timeout`` 1 s; seconds from
  the stall's timeline entry (its ``t``) to the webhook's arrival (the timeline path: one look
  per ``check_interval``);
- **restart**: ``--backlog`` jobs fail while both receivers are down; the server is stopped with
  their messages in the outbox, the receivers come up, the server starts again: how many arrive
  (goal: each exactly once) and seconds from the server's start to the last.

Goal: delivery within 2 s of the event (p90 of the failed rounds, and the stall).

Writes benchmarks/results/notify.json and notify.md.

    .venv/bin/python benchmarks/bench_notify.py [--rounds 10] [--backlog 5]
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from harness import goal, machine, percentile, spread, write_report  # noqa: E402
from server.notify_receivers import SmtpReceiver, WebhookReceiver  # noqa: E402
from server.real_server import RealServer, server_env, start_server  # noqa: E402
from support.jupyter_process import free_port  # noqa: E402

from paddle_nbext.model.contract import parse_time  # noqa: E402

GOAL_SECONDS = 2.0
FAIL = "raise SystemExit('the data set is empty: 0 samples in /data/train')\n"
STUCK = """\
import os, time
from paddle_nbext_job import flush, report
report(1, total=10, loss=0.5)
flush()
while not os.path.exists(os.environ["GO_FILE"]):
    time.sleep(0.05)
"""
WAIT = 120.0


def config(home: Path, smtp_port: int) -> None:
    (home / ".jupyter" / "jupyter_server_config.py").write_text(
        "c.PaddleNbextNotifications.channels = ['webhook', 'email']\n"
        "c.PaddleNbextNotifications.webhook_http_hosts = ['127.0.0.1']\n"
        "c.PaddleNbextNotifications.smtp_host = '127.0.0.1'\n"
        f"c.PaddleNbextNotifications.smtp_port = {smtp_port}\n"
        "c.PaddleNbextNotifications.smtp_tls = 'none'\n"
        "c.PaddleNbextNotifications.smtp_from = 'paddle-nbext@example.org'\n"
        "c.PaddleNbextNotifications.retry_seconds = 0.5\n"
        "c.PaddleNbextNotifications.max_retry_seconds = 2.0\n"
        "c.PaddleNbextNotifications.max_attempts = 1000\n"
    )


def epoch(text: str) -> float:
    """An API time (`2026-12-07T03:14:00.000Z`) as epoch seconds."""
    moment = parse_time(text)
    if moment is None:
        raise RuntimeError(f"bench_notify: {text!r} is not a time")
    return moment.timestamp()


def until(what: str, check: Any) -> Any:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.01)
    raise RuntimeError(f"bench_notify: {what} not seen within {WAIT:.0f} s")


def submit(server: RealServer, name: str, script: str, **fields: Any) -> None:
    body = {"job_name": name, "mode": "collective", "trainer_package": "work", "entry_point": f"python {script}", **fields}
    answer = requests.post(f"{server.api}/jobs", json=body, headers=server.headers(), timeout=60)
    if answer.status_code != 201:
        raise RuntimeError(f"submit {name}: {answer.status_code} {answer.text}")


def job(server: RealServer, name: str) -> dict[str, Any]:
    answer: dict[str, Any] = requests.get(f"{server.api}/jobs/{name}", headers=server.headers(), timeout=30).json()
    return answer


class Arrivals:
    """When each webhook and e-mail arrived (wall clock), by job name."""

    def __init__(self, hook: WebhookReceiver, smtp: SmtpReceiver) -> None:
        self.hook, self.smtp = hook, smtp

    def webhook(self, name: str, event: str) -> float | None:
        for hook in self.hook.accepted():
            if hook.body.get("job") == name and hook.body.get("event") == event:
                return float(hook.headers["x-arrived"])
        return None

    def email(self, name: str) -> float | None:
        for message, arrived in zip(self.smtp.messages, self.smtp.inbox.arrived, strict=False):
            if str(message["Subject"]).startswith(f"[paddle-nbext] {name} "):
                return arrived
        return None


def failed_rounds(server: RealServer, arrivals: Arrivals, rounds: int) -> list[dict[str, float]]:
    marks = []
    for number in range(rounds):
        name = f"fail-{number}"
        submit(server, name, "fail.py")
        finished = until(f"{name}'s end", lambda: job(server, name).get("finished"))  # noqa: B023
        ended = epoch(finished)
        hook = until(f"{name}'s webhook", lambda: arrivals.webhook(name, "failed"))  # noqa: B023
        mail = until(f"{name}'s e-mail", lambda: arrivals.email(name))  # noqa: B023
        marks.append({"webhook": round(hook - ended, 3), "email": round(mail - ended, 3)})
        print(f"bench_notify: {name}: {marks[-1]}", flush=True)
    return marks


def stall_round(server: RealServer, arrivals: Arrivals, home: Path) -> float:
    go = home / "go"
    submit(server, "stuck", "stuck.py", stall_timeout=1, env={"GO_FILE": str(go)})
    hook = until("the stall's webhook", lambda: arrivals.webhook("stuck", "stalled"))
    entries = requests.get(f"{server.api}/jobs/stuck/timeline", headers=server.headers(), timeout=30).json()["entries"]
    marked = next(e for e in entries if e["kind"] == "warning" and e["text"].startswith("Stalled:"))
    go.write_text("")
    return round(float(hook) - epoch(marked["t"]), 3)


def restart_round(home: Path, hook: WebhookReceiver, smtp: SmtpReceiver, backlog: int) -> dict[str, Any]:
    """Jobs fail while the receivers are down; the server stops; they come up; it starts again."""
    server = start_server(home)
    try:
        settings = {"webhook_url": hook.url, "email": "ada@example.org", "events": ["failed"]}
        requests.put(f"{server.api}/notifications", json=settings, headers=server.headers(), timeout=30).raise_for_status()
        for number in range(backlog):
            submit(server, f"backlog-{number}", "fail.py")
        for number in range(backlog):
            until(f"backlog-{number}'s end", lambda: job(server, f"backlog-{number}")["phase"] == "Failed")  # noqa: B023

        def waiting() -> bool:
            answer = requests.get(f"{server.api}/notifications", headers=server.headers(), timeout=30).json()
            return bool(answer["channels"]["webhook"]["pending"] == backlog and answer["channels"]["email"]["pending"] == backlog)

        until("the backlog in the outbox", waiting)
    finally:
        server.stop()
    hook.start()
    smtp.start()
    started = time.time()
    server = start_server(home)
    try:
        until("every webhook", lambda: len(hook.accepted()) >= backlog)
        until("every e-mail", lambda: len(smtp.messages) >= backlog)
        last = max([float(h.headers["x-arrived"]) for h in hook.accepted()] + smtp.inbox.arrived)
        # A later job's messages are a barrier: a repeat of the backlog would have come before them.
        submit(server, "barrier", "fail.py")
        until("the barrier's webhook", lambda: Arrivals(hook, smtp).webhook("barrier", "failed"))
        until("the barrier's e-mail", lambda: Arrivals(hook, smtp).email("barrier"))
        names = [h.body["job"] for h in hook.accepted()]
        subjects = [str(m["Subject"]) for m in smtp.messages]
        return {
            "backlog": backlog,
            "webhooks": len([n for n in names if n.startswith("backlog-")]),
            "emails": len([s for s in subjects if "backlog-" in s]),
            "each_once": sorted(names) == sorted({*names}) and len(subjects) == len(set(subjects)),
            "start_to_last_delivery_s": round(last - started, 2),
        }
    finally:
        server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--backlog", type=int, default=5)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="pnb-bench-notify-"))
    (home / "work").mkdir()
    (home / "work" / "fail.py").write_text(FAIL)
    (home / "work" / "stuck.py").write_text(STUCK)
    server_env(home)
    hook, smtp = WebhookReceiver(free_port()), SmtpReceiver(free_port())
    config(home, smtp.port)
    hook.start()
    smtp.start()
    server = start_server(home)
    try:
        settings = {"webhook_url": hook.url, "email": "ada@example.org", "events": ["failed", "stalled"]}
        saved = requests.put(f"{server.api}/notifications", json=settings, headers=server.headers(), timeout=30)
        if saved.status_code != 200:
            raise RuntimeError(f"PUT /notifications: {saved.status_code} {saved.text}")
        arrivals = Arrivals(hook, smtp)
        marks = failed_rounds(server, arrivals, args.rounds)
        stall = stall_round(server, arrivals, home)
    finally:
        server.stop()
        hook.stop()
        smtp.stop()
    restart_home = Path(tempfile.mkdtemp(prefix="pnb-bench-notify-restart-"))
    shutil.copytree(home / "work", restart_home / "work")
    server_env(restart_home)
    hook, smtp = WebhookReceiver(free_port()), SmtpReceiver(free_port())
    config(restart_home, smtp.port)
    try:
        restart = restart_round(restart_home, hook, smtp, args.backlog)
    finally:
        hook.stop()
        smtp.stop()
    webhook = [m["webhook"] for m in marks]
    email = [m["email"] for m in marks]
    p90 = max(percentile(webhook, 90), percentile(email, 90))
    met = (
        p90 <= GOAL_SECONDS and stall <= GOAL_SECONDS and restart["each_once"] and restart["webhooks"] == restart["emails"] == args.backlog
    )
    figures = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": f"python benchmarks/bench_notify.py --rounds {args.rounds} --backlog {args.backlog}",
        "machine": machine(),
        "failed_to_webhook_s": spread(webhook),
        "failed_to_webhook_p90_s": percentile(webhook, 90),
        "failed_to_email_s": spread(email),
        "failed_to_email_p90_s": percentile(email, 90),
        "stall_to_webhook_s": stall,
        "restart": restart,
        "goal": f"delivery <= {GOAL_SECONDS} s after the event (p90); after a restart each message exactly once",
        "goal_met": met,
    }
    markdown = (
        "# Notification delivery latency (webhook, e-mail) and a restart with a backlog\n\n"
        f"`{figures['command']}`, {figures['when']}, {machine()['cpus']} CPUs; local backend, receivers on 127.0.0.1; seconds.\n\n"
        "| from the event to | n | min | median | p90 | max |\n| --- | --- | --- | --- | --- | --- |\n"
        f"| a failed job's webhook | {len(webhook)} | {min(webhook)} | {spread(webhook)['p50']} | {percentile(webhook, 90)} | {max(webhook)} |\n"
        f"| a failed job's e-mail | {len(email)} | {min(email)} | {spread(email)['p50']} | {percentile(email, 90)} | {max(email)} |\n"
        f"| a stall's webhook (timeline) | 1 | {stall} | {stall} | {stall} | {stall} |\n\n"
        f"Restart: {args.backlog} failed jobs' messages waited in the outbox while the receivers were down; after the restart "
        f"{restart['webhooks']} webhooks and {restart['emails']} e-mails arrived, each once: {restart['each_once']}; "
        f"the last {restart['start_to_last_delivery_s']} s after the server was started.\n\n"
        f"{goal(f'<= {GOAL_SECONDS} s (p90), each once after a restart', met)}.\n"
    )
    print(write_report("notify", figures, markdown))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
