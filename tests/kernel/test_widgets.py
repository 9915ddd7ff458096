"""Widget model state against the live server: the form validates inline and becomes a status
view that moves through the phases; the job list refreshes, acts, and stops polling."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .conftest import disabled, wait_until

if TYPE_CHECKING:
    from paddle_nbext.client import Client

QUICK = "python -c \"print('widget job ok')\""


def test_form_validates_inline_and_becomes_a_live_status_view(client: Client) -> None:
    from paddle_nbext.widgets.form import JobForm

    form = JobForm(client, interval=0.3)
    # The session's project folder holds several scripts (other tests add theirs): no default
    # entry point is offered then, and the form says one is needed.
    if form.inputs["entry_point"].value == "":
        assert form.messages == {"entry_point": "is required: the command to run in the package dir, e.g. 'python train.py --epochs 3'"}
        form.inputs["entry_point"].value = "python ps_train_small.py"
    assert disabled(form.submit_button) is False and form.messages == {}
    # The form says what the server's Paddle runs (this venv: the pinned 3.0.0 wheel).
    assert "PaddlePaddle 3.0.0 runs parameter-server and collective jobs." in form.header.value
    assert form.inputs["trainer_package"].value.endswith("/project")  # the kernel's cwd
    # the other path row is not the package dir: empty (requirements.txt when present), not the cwd
    assert form.inputs["requirements"].value == "" and "requirements" not in form.data()
    form.inputs["requirements"].value = "../requirements.txt"
    assert form.messages["requirements"].startswith("'../requirements.txt' leaves the package directory")
    assert disabled(form.submit_button) is True
    form.inputs["requirements"].value = ""

    form.inputs["trainers"].value = 0
    assert form.messages["trainers"].startswith("must be at least 1")
    assert disabled(form.submit_button) is True
    assert form.submit() is None  # refused while invalid: nothing is sent

    form.inputs["trainer_mem"].value = "2 gigs"
    assert "is not a quantity" in form.messages["trainer_mem"]
    limit = client.config()["limits"]["max_trainers"]
    form.inputs["trainers"].value = limit + 1
    assert f"must be at most {limit}" in form.messages["trainers"]
    form.inputs["trainers"].value = 4
    form.inputs["trainer_mem"].value = "4Gi"
    form.inputs["trainer_cpu"].value = "2"
    assert form.messages == {} and disabled(form.submit_button) is False
    # The form opens in collective mode (no pservers asked for): no pserver in the totals.
    assert form.inputs["mode"].value == "collective" and "4 trainers × 2 CPU = 8 CPU" in form.totals.value
    form.inputs["mode"].value = "ps"
    assert form.inputs["pservers"].value == 1 and "= 9 CPU" in form.totals.value  # + 1 pserver × 1 CPU

    form.inputs["mode"].value = "collective"
    assert form.inputs["pservers"].value == 0
    form.inputs["trainers"].value = 1
    form.inputs["trainer_cpu"].value = "500m"
    form.inputs["trainer_mem"].value = "512Mi"
    form.inputs["job_name"].value = "form-quick"
    form.inputs["entry_point"].value = QUICK
    job = form.submit()
    assert job is not None and job.name == "form-quick", form.form_error.value
    view = form.status_view
    assert view is not None and form.children == (view,)
    wait_until(lambda: view.phase == "Succeeded", what="the form's job to succeed")
    assert view.phases[-1] == "Succeeded" and len(view.phases) >= 2  # e.g. Pending -> Running -> Succeeded
    assert "Succeeded" in view.html.value
    wait_until(lambda: not view.poller.running, what="the status view to stop polling after the end")
    assert "widget job ok" in str(job.logs())  # a LogText: None only when following

    # the same name again: the server's 409 shows up under the name field, nothing else changes
    again = JobForm(client)
    again.inputs["mode"].value = "collective"
    again.inputs["job_name"].value = "form-quick"
    again.inputs["entry_point"].value = QUICK
    assert again.submit() is None
    assert "form-quick" in again.messages["job_name"]
    assert disabled(again.submit_button) is False
    form.close()
    again.close()
    job.delete()


def test_job_list_refreshes_acts_and_stops(client: Client) -> None:
    from paddle_nbext import api
    from paddle_nbext.widgets._delete_question import DeleteQuestion
    from paddle_nbext.widgets.job_list import JobListWidget

    table = JobListWidget(client, interval=0.3)
    job = api.submit(
        "python -c \"import time; print('listed', flush=True); time.sleep(600)\"",
        job_name="list-sleep",
        mode="collective",
        trainers=1,
        client=client,
    )
    row = wait_until(lambda: table.rows.get("list-sleep"), what="the new job to appear in the list")
    assert row is not None  # wait_until returns the first truthy value
    wait_until(lambda: "paddle-phase-running" in row.cells[1].value, what="the row to show Running")
    assert "trainer 1/1 running" in row.cells[2].value
    wait_until(lambda: "listed" in table.show_logs("list-sleep"), what="the job's log")
    assert "listed" in table.logs.value

    row.cancel_button.click()
    wait_until(lambda: "paddle-phase-cancelled" in row.cells[1].value, what="the row to show Cancelled")
    assert job.status().phase == "Cancelled"
    wait_until(lambda: row.cancel_button.disabled, what="the cancel button to disable for an ended job")

    # Delete asks first, in the row, saying what goes and what it frees; nothing is deleted yet.
    row.delete_button.click()
    question = row.question
    assert question is not None and question in row.children
    assert "Delete job list-sleep? Its record" in question.text.value
    assert "Its record, logs, package snapshot and checkpoints are removed. This cannot be undone." in question.text.value
    assert "This frees " in question.text.value
    assert question.keep_checkpoints_button is None  # no checkpoints: nothing to keep
    assert row.delete_button.disabled and "list-sleep" in table.rows
    assert client.get_job("list-sleep").phase == "Cancelled"  # still there
    question.keep_button.click()  # "Keep": the question goes, the job stays
    asked: object = row.question  # (re-read: mypy keeps the narrowing from before the click)
    assert asked is None and tuple(row.children) == (row.line,) and not row.delete_button.disabled
    refreshes = table.refreshes
    wait_until(lambda: table.refreshes > refreshes, what="a refresh after Keep")
    assert "list-sleep" in table.rows

    row.delete_button.click()
    again = row.question
    assert isinstance(again, DeleteQuestion)
    again.delete_button.click()
    assert "list-sleep" not in table.rows
    assert all(r.name != "list-sleep" for r in table.table.children)
    assert table.notice.value.startswith("Deleted list-sleep, freeing ")

    refreshes = table.refreshes
    wait_until(lambda: table.refreshes >= refreshes + 2, what="two more refreshes")
    table.close()
    wait_until(lambda: not table.polling, what="polling to stop after close")
    stopped_at = client.request_count
    time.sleep(1.0)  # > 3 intervals: a live poller would have made requests by now
    assert client.request_count == stopped_at


def test_job_list_stops_when_the_frontend_closes_the_comm(client: Client) -> None:
    from paddle_nbext.widgets.job_list import JobListWidget

    table = JobListWidget(client, interval=0.2)
    assert table.polling
    table.comm.handle_close({"content": {"comm_id": table.comm.comm_id, "data": {}}})  # what the kernel does on comm_close
    wait_until(lambda: not table.polling, what="polling to stop after the comm closed")
    table.close()


def test_status_view_follows_a_job_to_the_end(client: Client) -> None:
    from paddle_nbext import api

    job = api.submit(
        'python -c "import time; time.sleep(2); raise SystemExit(3)"', job_name="view-fail", mode="collective", trainers=1, client=client
    )
    view = job.widget(interval=0.2)
    wait_until(lambda: view.phase in ("Failed", "Succeeded"), what="the job to end")
    assert view.phases[-1] == "Failed"
    assert "Running" in view.phases or view.phases[0] in ("Pending", "Running")
    assert "Exit code 3" in view.html.value
    wait_until(lambda: not view.poller.running, what="the view to stop polling")
    view.close()
    job.delete()


def test_delete_question_offers_to_keep_checkpoints_and_says_what_is_freed() -> None:
    from paddle_nbext.widgets._delete_question import DeleteQuestion

    answers: list[bool] = []
    dismissed: list[bool] = []
    sizes = {"job_size": 3 * 2**30, "size": 2**30, "checkpoints": [{"step": 10}, {"step": 20}]}
    question = DeleteQuestion("ckpt", sizes, running=True, answer=answers.append, dismiss=lambda: dismissed.append(True))
    text = question.text.value
    assert "Delete job ckpt? The job is stopped first." in text and "This frees 3Gi." in text
    assert "moves its 2 checkpoints (1Gi) to ~/paddle-checkpoints/ first" in text
    assert question.keep_checkpoints_button is not None
    question.keep_checkpoints_button.click()
    question.delete_button.click()
    question.keep_button.click()
    assert answers == [True, False] and dismissed == [True]
    question.close()


def test_form_offers_no_entry_point_that_does_not_exist_and_never_the_whole_home(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opened at the home's root (a notebook at the top of JupyterHub's file browser), the form
    used to say `python train.py` with the whole home as the package: submitted untouched, the
    job failed at once ("can't open file …/train.py").  Now neither is offered, and a script
    that is not in the package is refused before anything is sent (issue 37, item 9)."""
    from paddle_nbext.widgets.form import JobForm

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "main.py").write_text("print('main')\n")
    form = JobForm(client)
    assert form.inputs["trainer_package"].value == "" and form.inputs["entry_point"].value == ""
    assert form.messages["trainer_package"].startswith("give the folder of your training code")
    assert disabled(form.submit_button) is True
    requests_before = client.request_count
    assert form.submit() is None and client.request_count == requests_before  # nothing sent

    form.inputs["trainer_package"].value = "code"
    form.inputs["entry_point"].value = "python -u train.py --epochs 3"
    assert form.messages["entry_point"] == f"'train.py' is not in the package folder {tmp_path / 'code'}"
    assert disabled(form.submit_button) is True
    form.inputs["entry_point"].value = "python main.py"
    assert "entry_point" not in form.messages and "trainer_package" not in form.messages
    form.close()

    # Opened in the code's folder: its one script is the entry point offered.
    monkeypatch.chdir(tmp_path / "code")
    again = JobForm(client)
    assert again.inputs["trainer_package"].value == str(tmp_path / "code")
    assert again.inputs["entry_point"].value == "python main.py"
    again.close()


def test_job_list_finds_jobs_and_deletes_the_ended_ones_after_one_question(client: Client) -> None:
    """Search and phase filter, as in the panel, and "delete ended…" asking once (issue 37, item 13)."""
    from paddle_nbext import api
    from paddle_nbext.widgets.job_list import JobListWidget

    for name in ("sweep-a", "sweep-b", "other-c"):
        api.submit(QUICK, job_name=name, mode="collective", trainers=1, client=client).wait(timeout=120)
    table = JobListWidget(client, interval=0.3)
    wait_until(lambda: {"sweep-a", "sweep-b", "other-c"} <= set(table.rows), what="the three jobs listed")
    table.filter.search.value = "SWEEP"
    assert {row.name for row in table.table.children} == {"sweep-a", "sweep-b"}
    table.filter.phase.value = "active"
    assert list(table.table.children) == []
    table.filter.phase.value = "ended"
    refreshes = table.refreshes
    wait_until(lambda: table.refreshes > refreshes, what="a refresh under the filter")
    assert {row.name for row in table.table.children} == {"sweep-a", "sweep-b"}  # a refresh keeps the filter

    question = table.ask_delete_ended()
    assert question is not None and question in table.bulk_question.children
    assert question.text.value.count("Delete 2 ended jobs? sweep-") == 1
    assert "This frees " in question.text.value
    assert client.get_job("sweep-a").phase == "Succeeded"  # nothing deleted yet
    question.delete_button.click()
    assert table.notice.value.startswith("Deleted 2 jobs, freeing ")
    assert {job.name for job in client.list_jobs()} >= {"other-c"}
    assert not {"sweep-a", "sweep-b"} & {job.name for job in client.list_jobs()}
    table.close()
    client.delete("other-c")


def test_job_list_marks_the_traceback_of_a_failed_job_in_its_log(client: Client) -> None:
    """The panel opens a failed job's log on its marked traceback; job_list()'s log marks it too
    (issue 37, item 11)."""
    from paddle_nbext import api
    from paddle_nbext.widgets._log_html import log_html
    from paddle_nbext.widgets.job_list import JobListWidget

    script = "python -c \"print('before', flush=True); raise ValueError('bad batch')\""
    api.submit(script, job_name="list-tb", mode="collective", trainers=1, client=client).wait(timeout=120)
    table = JobListWidget(client, interval=0.3)
    wait_until(lambda: "list-tb" in table.rows, what="the failed job listed")
    table.show_logs("list-tb")
    marked = table.logs.value.split("<mark class='paddle-traceback'", 1)
    assert len(marked) == 2 and "before" in marked[0], table.logs.value
    assert marked[1].split("</mark>")[0].endswith("ValueError: bad batch")
    assert "Traceback (most recent call last):" in marked[1].split("</mark>")[0]
    # A glog line between the traceback and its exception line stays inside the mark.
    glogged = "Traceback (most recent call last):\n  File \"x.py\", line 1\nI1205 10:00:00.000000  12 a.cc:3] noise\nKeyError: 'k'\nafter\n"
    assert log_html(glogged).endswith("KeyError: &#x27;k&#x27;</mark>\nafter\n")
    assert log_html("no error here") == "no error here"
    table.close()
    client.delete("list-tb")


def test_job_lists_log_hides_paddles_noise_by_default_and_shows_it_on_demand(client: Client) -> None:
    """As the panel's log does (issue 37, item 11): Paddle's glog and setup lines are hidden and
    counted; unticking "Hide Paddle noise" shows the log as written."""
    from paddle_nbext import api
    from paddle_nbext.widgets.job_list import JobListWidget

    noisy = "I1205 10:00:00.000000  12 server.cpp:1167] Server is going to quit"
    script = f"python -c \"print('step 1 loss 0.5'); print('{noisy}'); print('fl-ps > set up'); print('done')\""
    api.submit(script, job_name="list-noise", mode="collective", trainers=1, client=client).wait(timeout=120)
    table = JobListWidget(client, interval=0.3)
    try:
        wait_until(lambda: "list-noise" in table.rows, what="the job listed")
        table.show_logs("list-noise")
        assert table.hide_noise.value is True and table.hide_noise.layout.display == ""
        assert "2 Paddle noise lines hidden" in table.logs.value, table.logs.value
        assert "step 1 loss 0.5" in table.logs.value and "done" in table.logs.value
        assert "going to quit" not in table.logs.value and "fl-ps" not in table.logs.value
        table.hide_noise.value = False
        assert "going to quit" in table.logs.value and "fl-ps &gt; set up" in table.logs.value
        assert "noise lines hidden" not in table.logs.value
    finally:
        table.close()
        client.delete("list-noise")
