"""The notebook's widgets and the panel's log tabs in JupyterLab's light and dark themes, in
headless Chromium: `paddle_nbext.form()`, `paddle_nbext.job_list()` (with a log and a delete
question open) and a running job's status view are run in a real notebook on a real kernel;
every visible text meets WCAG AA (4.5:1) against the background it is painted on, disabled
buttons read as disabled (the theme's neutral colours, not their style's), and the status view
shows each replica's resource use with a bar against its limit, live until the job ends.  A
replica's log opened in a tab of its own reads in both themes too (issue 37)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, expect
from support.health_job import LIMIT_MIB
from support.waiting import eventually

from .health_job import HealthJob, submit_health_job
from .lab_server import APP_START_TIMEOUT_MS, PANEL_TAB, LabServer, start_lab, stop_lab
from .themes import low_contrast_text, set_theme

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]

PANEL = "#paddle-nbext-panel"
NOTEBOOK = "widgets.ipynb"
FAILED = "widgets-failed"
HEALTH = "widgets-health"
#: The notebook's cells: the form (opened in the home: its package is empty, so it shows errors
#: and a disabled Submit), the job list, and the running job as `job.status()` leaves it.
CELLS = (
    "import paddle_nbext as pn\npn.form()",
    "jobs = pn.job_list(interval=1)\njobs",
    f"job = pn.Job({HEALTH!r})\njob.status()\njob",
)
WIDGETS = (".paddle-job-form", ".paddle-job-list", ".paddle-job-status")


def _notebook() -> str:
    cells: list[dict[str, Any]] = [
        {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None} for source in CELLS
    ]
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return json.dumps({"cells": cells, "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5})


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """A JupyterLab whose app object the page reaches (themes switch by its command), a job that
    failed with a traceback, the growing health job, and the notebook."""
    server = start_lab(tmp_path_factory.mktemp("lab"), extra_args=["--LabApp.expose_app_in_browser=True"])
    try:
        failing = {
            "job_name": FAILED,
            "mode": "collective",
            "entry_point": "python -c \"print('step 1 loss 0.5'); raise ValueError('bad batch at step 1')\"",
        }
        assert server.api("POST", "jobs", json=failing).status_code == 201
        eventually(lambda: server.api("GET", f"jobs/{FAILED}").json().get("phase") == "Failed", f"{FAILED} to fail", 240)
        submit_health_job(server, HEALTH)
        (server.home / NOTEBOOK).write_text(_notebook())
        # The notebook's own kernel starts without asking ("Always start the preferred kernel").
        tracker = server.home.parent / "lab-settings" / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings"
        tracker.parent.mkdir(parents=True, exist_ok=True)
        tracker.write_text(json.dumps({"autoStartDefaultKernel": True}))
        yield server
    finally:
        try:
            response = server.api("GET", "jobs")
            for job in response.json().get("jobs", []) if response.ok else []:
                server.api("DELETE", f"jobs/{job['name']}")
        finally:
            stop_lab(server)


def open_notebook(page: Page, lab: LabServer, theme: str) -> None:
    """The notebook in `theme`, every cell run, each widget shown."""
    page.goto(lab.page_url(f"lab/tree/{NOTEBOOK}") + "&reset", timeout=APP_START_TIMEOUT_MS)
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=APP_START_TIMEOUT_MS)
    set_theme(page, theme)
    page.wait_for_function("() => window.jupyterapp.commands.isEnabled('notebook:run-all-cells')")
    # The notebook's kernel is connected and idle: a run asked for before that is dropped.
    page.wait_for_function(
        """() => { const kernel = window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel;
                   return kernel && kernel.connectionStatus === 'connected' && kernel.status === 'idle'; }""",
        timeout=APP_START_TIMEOUT_MS,
    )
    page.evaluate("() => { void window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
    expect(page.locator(".jp-Cell .jp-InputPrompt").first).to_have_text(re.compile(r"\[(\*|\d+)\]"))
    for selector in WIDGETS:
        expect(page.locator(selector)).to_be_visible(timeout=APP_START_TIMEOUT_MS)


def theme_colours(page: Page) -> dict[str, str]:
    """The computed colours of the theme's variables a disabled button takes."""
    return dict(
        page.evaluate(
            """() => { const probe = document.createElement('div');
                probe.style.background = 'var(--jp-layout-color2)'; probe.style.color = 'var(--jp-ui-font-color3)';
                document.body.appendChild(probe); const style = getComputedStyle(probe);
                const out = { background: style.backgroundColor, color: style.color }; probe.remove(); return out; }"""
        )
    )


def button_look(button: Locator) -> dict[str, Any]:
    return dict(
        button.evaluate(
            """el => { const s = getComputedStyle(el);
                return { background: s.backgroundColor, color: s.color, opacity: s.opacity, cursor: s.cursor }; }"""
        )
    )


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_widgets_read_in_both_themes_and_disabled_buttons_look_disabled(
    page: Page, lab: LabServer, theme: str, screenshots: Path
) -> None:
    open_notebook(page, lab, theme)
    form, table, status = (page.locator(selector) for selector in WIDGETS)

    # Disabled buttons take the theme's neutral colours and its "disabled" text, not their style's
    # (a disabled Submit was as blue as an enabled one on the dark page); enabled ones keep theirs.
    neutral = theme_colours(page)
    submit = ".paddle-job-form .jupyter-button:has-text('Submit')"
    expect(page.locator(submit)).to_be_disabled()
    row = table.locator(".paddle-job-row").filter(has=page.locator(f"code:text-is('{FAILED}')"))
    cancel = row.locator(".jupyter-button:has-text('cancel')")
    expect(cancel).to_be_disabled()
    for look in (button_look(page.locator(submit)), button_look(cancel)):
        assert (look["background"], look["color"], look["opacity"], look["cursor"]) == (
            neutral["background"],
            neutral["color"],
            "1",
            "not-allowed",
        ), (theme, look, neutral)
    delete = row.locator(".jupyter-button:has-text('delete')")
    expect(delete).to_be_enabled()
    assert delete.evaluate("el => getComputedStyle(el).backgroundColor") != neutral["background"]

    # No button's label is cut ("delete ended…" read "delete ende…").
    cut = table.locator(".jupyter-button").evaluate_all(
        "els => els.filter(el => el.scrollWidth > el.clientWidth).map(el => el.textContent)"
    )
    assert cut == [], cut

    # The form's errors (its package is empty in the home) are in the theme's own red.
    expect(form.locator(".paddle-field-error").filter(has_text="give the folder of your training code")).to_be_visible()

    # The list with the failed job's log (its traceback marked) and the delete question open.
    row.locator(".jupyter-button:has-text('logs')").click()
    expect(table.locator("pre.paddle-logs mark.paddle-traceback")).to_contain_text("ValueError: bad batch at step 1")
    delete.click()
    expect(row.locator(".paddle-delete-question").first).to_contain_text(f"Delete job {FAILED}?")

    # The status view with the growing trainer's figures and its bar (marked: over 90 %).
    usage = status.locator(".paddle-usage-list li[data-replica='trainer-0']")
    expect(usage.locator(".paddle-usage-text")).to_have_text(
        re.compile(rf"^\d+\.\d\d of 1 cores · \d+(\.\d)? MiB of {LIMIT_MIB} MiB$"), timeout=240_000
    )
    expect(usage.locator(".paddle-usage-bar.paddle-usage-high")).to_have_attribute(
        "aria-label", re.compile(r"^(9\d|1\d\d)% of its memory limit$")
    )

    for selector in WIDGETS:
        assert low_contrast_text(page, selector) == [], (theme, selector)
    status.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / f"widgets-{theme}.png"))
    row.locator(".jupyter-button:has-text('Keep')").click()
    expect(row.locator(".paddle-delete-question")).to_have_count(0)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_log_in_a_tab_of_its_own_reads_in_both_themes(page: Page, lab: LabServer, theme: str) -> None:
    page.goto(lab.page_url("lab") + "&reset", timeout=APP_START_TIMEOUT_MS)
    page.locator(PANEL_TAB).wait_for(timeout=APP_START_TIMEOUT_MS)
    set_theme(page, theme)
    page.locator(PANEL_TAB).click()
    page.locator(f'{PANEL} [data-testid="paddle-job-row"][data-job="{FAILED}"]').click()
    view = page.locator(f'[data-testid="paddle-detail"][data-job="{FAILED}"]')
    expect(view.locator('[data-testid="paddle-log-traceback"]')).to_contain_text("ValueError: bad batch at step 1")
    view.locator('[data-testid="paddle-log-open-tab"]').click()
    tab = page.locator('[data-testid="paddle-log-tab"]')
    expect(tab.locator('[data-testid="paddle-log"]')).to_contain_text("ValueError: bad batch at step 1")
    expect(tab.locator('[data-testid="paddle-log"]')).to_contain_text("step 1 loss 0.5")
    assert low_contrast_text(page, '[data-testid="paddle-log-tab"]') == [], theme


def test_the_status_view_follows_the_job_to_its_end(page: Page, lab: LabServer) -> None:
    """Live: the bar while the trainer holds 93 % of its limit; once it went over and the job
    failed, the view says so and shows only the trainer's peak (nothing is in use any more)."""
    open_notebook(page, lab, "dark")
    status = page.locator(".paddle-job-status")
    usage = status.locator(".paddle-usage-list li[data-replica='trainer-0']")
    expect(usage.locator(".paddle-usage-bar.paddle-usage-high")).to_have_count(1, timeout=240_000)
    HealthJob(HEALTH, lab.home / f"{HEALTH}.go").release()
    expect(status.locator(".paddle-phase").first).to_have_text("Failed", timeout=120_000)
    expect(usage.locator(".paddle-usage-text")).to_have_text(re.compile(r"^peak \d+(\.\d)? MiB$"), timeout=30_000)
    expect(usage.locator(".paddle-usage-bar")).to_have_count(0)
    assert low_contrast_text(page, ".paddle-job-status") == []
