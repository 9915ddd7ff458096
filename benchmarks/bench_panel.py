"""Panel performance in Chromium: `python benchmarks/bench_panel.py`.

Runs a real JupyterLab with paddle-nbext whose backend holds 1,000 jobs (`bench_backend.py`) and
measures, in headless Chromium:

* panel open → rendered list: from the click on the sidebar tab to the frame in which the
  visible panel holds all 1,000 rows (goal < 300 ms), and, cold, from the arrival of the
  `/events` snapshot of 1,000 jobs to all rows in the DOM;
* event arrival → DOM update: from the `/events` chunk carrying a `job` event to the mutation
  of that job's row (goal < 100 ms), over many events;
* the job view's log viewer taking 100,000 lines, streamed (follow) and in one response: time
  until all lines were written (the DOM keeps the last 20,000) and the longest main-thread task
  (PerformanceObserver `longtask`; goal: none over 50 ms while following).

Figures go to `benchmarks/results/panel.json` and `panel.md`.  Needs the built extension
(`cd labextension && npm ci && npm run build:prod`).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from bench_backend import BenchBackend  # noqa: E402
from browser.lab_server import CHROMIUM, CHROMIUM_ARGS, LabServer, start_lab, stop_lab  # noqa: E402
from harness import machine_line, percentile, write_report  # noqa: E402
from playwright.sync_api import Page, sync_playwright  # noqa: E402

JOBS = 1000
LOG_LINES = 100_000
EVENTS = 30
RUNS = 5

# Installed before any page script: timestamps of /events chunks and of long tasks.
INIT_SCRIPT = """
(() => {
  window.__bench = { chunks: [], longtasks: [] };
  const decoder = new TextDecoder();
  const original = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const response = await original(input, init);
    const url = typeof input === 'string' ? input : input.url;
    if (!url.includes('/paddle/api/v1/events') || !response.body) return response;
    const tap = new TransformStream({
      transform(chunk, controller) {
        window.__bench.chunks.push({ t: performance.now(), text: decoder.decode(chunk, { stream: true }) });
        controller.enqueue(chunk);
      }
    });
    return new Response(response.body.pipeThrough(tap), { status: response.status, statusText: response.statusText, headers: response.headers });
  };
  new PerformanceObserver(list => {
    for (const entry of list.getEntries()) window.__bench.longtasks.push({ start: entry.startTime, duration: entry.duration });
  }).observe({ type: 'longtask', buffered: true });
})();
"""

SNAPSHOT_TO_ROWS = """
(expected) => new Promise(resolve => {
  const done = () => {
    const list = document.querySelector('[data-testid="paddle-job-list"]');
    return list && list.childElementCount >= expected;
  };
  const finish = () => {
    const tDom = performance.now();
    const chunks = window.__bench.chunks;
    let text = '', tSnapshotEnd = null;
    for (const c of chunks) { text += c.text; if (tSnapshotEnd === null && /event: snapshot\\ndata: .*\\n\\n/s.test(text)) tSnapshotEnd = c.t; }
    resolve({ tDom, tSnapshotEnd, tFirstChunk: chunks.length ? chunks[0].t : null });
  };
  if (done()) return finish();
  const observer = new MutationObserver(() => { if (done()) { observer.disconnect(); finish(); } });
  observer.observe(document.body, { childList: true, subtree: true });
})
"""

WATCH_ROW = """
([name, phase]) => new Promise(resolve => {
  const start = window.__bench.chunks.length;
  const selector = `[data-testid="paddle-job-row"][data-job="${name}"][data-phase="${phase}"]`;
  const observer = new MutationObserver(() => {
    if (!document.querySelector(selector)) return;
    const tDom = performance.now();
    observer.disconnect();
    const chunk = window.__bench.chunks.slice(start).find(c => c.text.includes(`"name":"${name}"`) && c.text.includes('event: job'));
    resolve({ ms: chunk ? tDom - chunk.t : null });
  });
  observer.observe(document.querySelector('[data-testid="paddle-job-list"]'), { childList: true, subtree: true, attributes: true });
})
"""

LOG_RUN = """
(expected) => new Promise(resolve => {
  const log = document.querySelector('[data-testid="paddle-log"]');
  const t0 = performance.now();
  const before = window.__bench.longtasks.length;
  const frames = [];
  let last = t0;
  const frame = () => {
    const now = performance.now();
    frames.push(now - last);
    last = now;
    if (parseInt(log.getAttribute('data-written') || '0', 10) >= expected) {
      setTimeout(() => {
        const tasks = window.__bench.longtasks.slice(before).filter(t => t.start >= t0 - 5);
        resolve({
          ms: now - t0,
          lines: parseInt(log.getAttribute('data-written'), 10),
          longest_task_ms: tasks.length ? Math.max(...tasks.map(t => t.duration)) : 0,
          long_tasks: tasks.length,
          longest_frame_ms: Math.max(...frames)
        });
      }, 200);
      return;
    }
    requestAnimationFrame(frame);
  };
  document.querySelector('[data-testid="paddle-detail"] [data-testid="paddle-log-load"]').click();
  requestAnimationFrame(frame);
})
"""


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(percentile(ordered, 95), 1),
        "max_ms": round(ordered[-1], 1),
        "runs": len(ordered),
    }


def _load_lab(page: Page, lab: LabServer) -> dict[str, Any]:
    page.goto(lab.page_url("lab") + "&reset")  # a fresh layout: the panel starts closed
    cold: dict[str, Any] = page.evaluate(SNAPSHOT_TO_ROWS, JOBS)
    return cold


def measure(lab: LabServer) -> dict[str, Any]:
    open_runs: list[float] = []
    cold_runs: list[float] = []
    event_runs: list[float] = []
    log_runs: dict[str, list[dict[str, Any]]] = {"follow": [], "single_response": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            for _ in range(RUNS):
                context = browser.new_context(viewport={"width": 1400, "height": 1000})
                context.add_init_script(INIT_SCRIPT)
                page = context.new_page()
                page.set_default_timeout(60_000)
                cold = _load_lab(page, lab)
                if cold["tSnapshotEnd"] is not None:
                    cold_runs.append(cold["tDom"] - cold["tSnapshotEnd"])
                # Click the tab (real pointer events) while the page records when it saw them.
                page.evaluate(
                    """(expected) => {
                        window.__openResult = null;
                        let t0 = null;
                        window.addEventListener('pointerdown', () => { t0 = performance.now(); }, { capture: true, once: true });
                        const check = () => {
                          const panel = document.getElementById('paddle-nbext-panel');
                          const list = document.querySelector('[data-testid="paddle-job-list"]');
                          if (t0 !== null && panel && panel.offsetParent !== null && list && list.offsetParent !== null && list.childElementCount >= expected) {
                            requestAnimationFrame(() => { window.__openResult = performance.now() - t0; });
                          } else { requestAnimationFrame(check); }
                        };
                        requestAnimationFrame(check);
                      }""",
                    JOBS,
                )
                page.locator('.jp-SideBar [data-id="paddle-nbext-panel"]').click()
                page.wait_for_function("window.__openResult !== null")
                open_runs.append(page.evaluate("window.__openResult"))
                context.close()

            # Events and logs: one page, the panel open on the list.
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.add_init_script(INIT_SCRIPT)
            page = context.new_page()
            page.set_default_timeout(60_000)
            _load_lab(page, lab)
            page.locator('.jp-SideBar [data-id="paddle-nbext-panel"]').click()
            page.locator('[data-testid="paddle-connection"]:has-text("live")').wait_for()
            for number in range(EVENTS):
                name = f"bench-{(number * 37) % JOBS:04d}"
                current = page.locator(f'[data-testid="paddle-job-row"][data-job="{name}"]').get_attribute("data-phase")
                target = "Running" if current == "Cancelled" else "Cancelled"
                # Start watching (not awaited), make the server publish, then await the watch.
                page.evaluate(f"args => {{ window.__watch = ({WATCH_ROW})(args); }}", [name, target])
                response = lab.api("POST", f"jobs/{name}/cancel")
                response.raise_for_status()
                result = page.evaluate("window.__watch")
                if result["ms"] is not None:
                    event_runs.append(result["ms"])

            # The job opens in its main-area view, whose log viewer is measured.
            page.locator('[data-testid="paddle-job-row"][data-job="bench-0000"]').click()
            page.locator('[data-testid="paddle-detail"] [data-testid="paddle-log-tail"]').fill("")
            for mode in ("follow", "single_response"):
                follow = page.locator('[data-testid="paddle-detail"] [data-testid="paddle-log-follow"]')
                if follow.is_checked() != (mode == "follow"):
                    follow.click()
                for _ in range(3):
                    log_runs[mode].append(page.evaluate(LOG_RUN, LOG_LINES))
            context.close()
        finally:
            browser.close()

    def log_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "lines": runs[-1]["lines"],
            "all_lines_in_dom_ms": _summary([r["ms"] for r in runs]),
            "longest_task_ms": round(max(r["longest_task_ms"] for r in runs), 1),
            "long_tasks_per_run": [r["long_tasks"] for r in runs],
            "longest_frame_ms": round(max(r["longest_frame_ms"] for r in runs), 1),
        }

    return {
        "jobs": JOBS,
        "panel_open_to_rendered_list": {**_summary(open_runs), "goal_ms": 300},
        "snapshot_arrival_to_rendered_list_cold": _summary(cold_runs) if cold_runs else None,
        "event_arrival_to_dom_update": {**_summary(event_runs), "goal_ms": 100},
        "log_viewer_lines": LOG_LINES,
        "log_viewer": {mode: log_summary(runs) for mode, runs in log_runs.items()},
    }


def write(results: dict[str, Any]) -> None:
    """results/panel.json and panel.md."""
    open_ = results["panel_open_to_rendered_list"]
    event = results["event_arrival_to_dom_update"]
    cold = results["snapshot_arrival_to_rendered_list_cold"]
    lines = [
        "# Panel benchmark (Chromium)",
        "",
        f"Measured {results['measured_at']} on {results['machine']} with {results['jobs']} jobs; "
        "`python benchmarks/bench_panel.py` regenerates this file.",
        "",
        "| measure | median | p95 | max | runs | goal |",
        "|---|---|---|---|---|---|",
        f"| panel open → rendered list of {results['jobs']} | {open_['median_ms']} ms | {open_['p95_ms']} ms | {open_['max_ms']} ms | {open_['runs']} | < 300 ms |",
    ]
    if cold:
        lines.append(
            f"| `/events` snapshot arrival → {results['jobs']} rows in DOM (cold) | {cold['median_ms']} ms | {cold['p95_ms']} ms | {cold['max_ms']} ms | {cold['runs']} | |"
        )
    lines.append(
        f"| event arrival → DOM update | {event['median_ms']} ms | {event['p95_ms']} ms | {event['max_ms']} ms | {event['runs']} | < 100 ms |"
    )
    lines += [
        "",
        f"Job view log viewer, {results['log_viewer_lines']:,} lines (the DOM keeps the last 20,000; goal: no task over 50 ms while following):",
        "",
        "| how | all lines written (median) | longest task | longest frame |",
        "|---|---|---|---|",
    ]
    for mode, figures in results["log_viewer"].items():
        lines.append(
            f"| {mode.replace('_', ' ')} | {figures['all_lines_in_dom_ms']['median_ms']} ms | {figures['longest_task_ms']} ms | {figures['longest_frame_ms']} ms |"
        )
    lines.append("")
    write_report("panel", results, "\n".join(lines))


def main() -> None:
    os.environ["PADDLE_BENCH_LOG_LINES"] = str(LOG_LINES)  # read by bench_backend in the server
    with tempfile.TemporaryDirectory(prefix="paddle-bench-") as tmp:
        lab = start_lab(Path(tmp), python_path=[HERE], extra_args=[f"--PaddleNbext.backend_class={BenchBackend.__module__}.BenchBackend"])
        try:
            results = measure(lab)
        finally:
            stop_lab(lab)
    results["measured_at"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    results["machine"] = machine_line()
    write(results)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
