/**
 * Runs side by side: choose two or more jobs, see one metric of all of them overlaid (a metric
 * picker, a legend, steps or wall time on the x axis, each job in the colour derived from its
 * name), their final and best values, and the spec fields and code files that differ.
 *
 * The facts come from `GET /compare` (the same answer `paddle_nbext.compare()` draws); the
 * curves from each job's `GET /jobs/{name}/metrics`, appended after its cursor as the job view's
 * metrics section does.  It stays live with the panel's own feed: a `metrics` event of a chosen
 * job fetches that job's new points and, at most every `COMPARE_EVERY` seconds, the comparison;
 * a phase change fetches both; while a chosen job runs without events, a poll every few seconds.
 */
import { LabIcon } from '@jupyterlab/ui-components';
import { MainAreaWidget } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { ApiError, PaddleApi } from '../api/client';
import { IComparison, IMetrics, IMetricsSummary, TERMINAL_PHASES } from '../api/types';
import { __ } from '../i18n';
import {
  CompareAxis,
  MAX_COMPARED,
  codeRows,
  compareLines,
  liveJobs,
  metricCells,
  shownMetric,
  specRows
} from '../logic/compare';
import { phaseClass } from '../logic/format';
import { OVERVIEW_POINTS, REFETCH_POINTS, longestSeries, mergeMetrics } from '../logic/metrics';
import { JobsModel } from '../state/model';
import { LineChart } from './chart';
import { clear, h } from './dom';

/** Two curves over an axis: the toolbar's "Compare runs". */
export const compareIcon = new LabIcon({
  name: 'paddle-nbext:compare',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
    '<g class="jp-icon3" fill="none" stroke="#616161" stroke-width="2" stroke-linecap="round">' +
    '<path d="M3 3v18h18"/><path d="M6 16l4-6 4 3 6-8"/><path d="M6 19l5-3 4 1 5-5" stroke-dasharray="2 2"/>' +
    '</g></svg>'
});

/** Ids for label/control pairs, unique in the page. */
let nextId = 0;

/** Seconds between fetches of the comparison while chosen jobs report (events come faster). */
const COMPARE_EVERY = 2;
/** Seconds between fetches while a chosen job runs and no event announced anything. */
const FALLBACK_POLL_SECONDS = 5;

export interface ICompareViewOptions {
  api: PaddleApi;
  model: JobsModel;
  /** The jobs chosen when the view opens. */
  jobs?: readonly string[];
}

export class CompareView extends Widget {
  private readonly _api: PaddleApi;
  private readonly _model: JobsModel;
  private _chosen: string[] = [];
  private _comparison: IComparison | null = null;
  private readonly _metrics = new Map<string, IMetrics>();
  private readonly _fetching = new Map<string, Promise<void>>();
  private _generation = 0;
  private _metric: string | null = null;
  private _axis: CompareAxis = 'step';
  private _lastCompare = 0;
  private _compareTimer = 0;
  private _poll = 0;
  private readonly _picker: HTMLElement;
  private readonly _pickerNames: string[] = [];
  private readonly _status: HTMLElement;
  private readonly _body: HTMLElement;
  private readonly _metricSelect: HTMLSelectElement;
  private readonly _axisSelect: HTMLSelectElement;
  private readonly _chart = new LineChart(__('Compared runs'));
  private readonly _results: HTMLElement;
  private readonly _spec: HTMLElement;
  private readonly _code: HTMLElement;

  constructor(options: ICompareViewOptions) {
    super();
    this._api = options.api;
    this._model = options.model;
    this.addClass('pn-compare-view');
    this.node.setAttribute('data-testid', 'paddle-compare-view');
    this._picker = h('div', { className: 'pn-compare-picker', role: 'group' });
    this._status = h('p', {
      className: 'pn-compare-status',
      role: 'status',
      'data-testid': 'paddle-compare-status'
    });
    this._metricSelect = h('select', {
      className: 'pn-input',
      'data-testid': 'paddle-compare-metric',
      id: `pn-compare-metric-${nextId++}`
    });
    this._axisSelect = h(
      'select',
      {
        className: 'pn-input',
        'data-testid': 'paddle-compare-axis',
        id: `pn-compare-axis-${nextId++}`
      },
      h('option', { value: 'step' }, __('Step')),
      h('option', { value: 'time' }, __('Wall time'))
    );
    this._metricSelect.addEventListener('change', () => {
      this._metric = this._metricSelect.value;
      this.render();
    });
    this._axisSelect.addEventListener('change', () => {
      this._axis = this._axisSelect.value === 'time' ? 'time' : 'step';
      this.render();
    });
    this._results = h('div', {
      className: 'pn-compare-scroll',
      'data-testid': 'paddle-compare-results'
    });
    this._spec = h('div', { className: 'pn-compare-scroll', 'data-testid': 'paddle-compare-spec' });
    this._code = h('div', { className: 'pn-compare-code', 'data-testid': 'paddle-compare-code' });
    this._chart.node.setAttribute('data-testid', 'paddle-compare-chart');
    this._body = h(
      'div',
      { className: 'pn-compare-body', hidden: true },
      h(
        'div',
        { className: 'pn-compare-controls' },
        h('label', { for: this._metricSelect.id }, __('Metric')),
        this._metricSelect,
        h('label', { for: this._axisSelect.id }, __('X axis')),
        this._axisSelect
      ),
      this._chart.node,
      h('h3', {}, __('Final and best')),
      this._results,
      h('h3', {}, __('Spec differences')),
      this._spec,
      h('h3', {}, __('Code differences')),
      this._code
    );
    this.node.append(
      h('h2', { className: 'pn-compare-title' }, __('Compare runs')),
      h(
        'details',
        { className: 'pn-compare-choose', open: true },
        h('summary', {}, __('Jobs to compare')),
        this._picker
      ),
      this._status,
      this._body
    );
    this._picker.setAttribute('aria-label', __('Jobs to compare'));
    this._picker.addEventListener('change', event => {
      const box = event.target as HTMLInputElement;
      const name = box.getAttribute('data-job');
      if (name) {
        this.setJobs(
          box.checked ? [...this._chosen, name] : this._chosen.filter(other => other !== name)
        );
      }
    });
    this._model.metrics.connect(this._onSummary, this);
    this._model.changed.connect(this._onJobs, this);
    this._renderPicker();
    this.setJobs(options.jobs ?? []);
    this.render();
  }

  /** The jobs chosen, in the order chosen. */
  get jobs(): readonly string[] {
    return this._chosen;
  }

  get comparison(): IComparison | null {
    return this._comparison;
  }

  get chart(): LineChart {
    return this._chart;
  }

  /** Compare these jobs (each once, at most `MAX_COMPARED`; unknown ones are dropped). */
  setJobs(names: readonly string[]): void {
    const known = this._model.state.loaded
      ? (n: string) => this._model.job(n) !== undefined
      : () => true;
    const chosen = [...new Set(names)].filter(known).slice(0, MAX_COMPARED);
    if (chosen.join(',') === this._chosen.join(',')) {
      return;
    }
    this._chosen = chosen;
    this._generation++;
    for (const name of [...this._metrics.keys()]) {
      if (!chosen.includes(name)) {
        this._metrics.delete(name);
      }
    }
    this.title.label =
      chosen.length >= 2 ? __('Compare: %1', chosen.join(', ')) : __('Compare runs');
    this._syncPicker();
    if (chosen.length < 2) {
      this._comparison = null;
      this.render();
      return;
    }
    void this.refresh();
  }

  /** Fetch the comparison and every chosen job's new points, then draw. */
  async refresh(): Promise<void> {
    await Promise.all([
      this._fetchComparison(),
      ...this._chosen.map(name => this._fetchMetrics(name))
    ]);
  }

  private async _fetchComparison(): Promise<void> {
    const generation = this._generation;
    this._lastCompare = Date.now();
    try {
      const answer = await this._api.compare(this._chosen);
      if (this.isDisposed || generation !== this._generation) {
        return;
      }
      this._comparison = answer;
      this._status.textContent = '';
    } catch (error) {
      if (this.isDisposed || generation !== this._generation) {
        return;
      }
      this._comparison = null;
      this._status.textContent = __('Could not compare: %1', (error as ApiError).message);
    }
    this.render();
  }

  /** One job's new points (an overview first, then what came after its cursor), coalesced. */
  private _fetchMetrics(name: string): Promise<void> {
    const running = this._fetching.get(name);
    if (running) {
      return running;
    }
    const generation = this._generation;
    const work = (async () => {
      const base = this._metrics.get(name) ?? null;
      const overview = base === null || longestSeries(base) > REFETCH_POINTS;
      try {
        const answer = await this._api.metrics(
          name,
          OVERVIEW_POINTS,
          overview ? null : base.cursor
        );
        if (this.isDisposed || generation !== this._generation || !this._chosen.includes(name)) {
          return;
        }
        const had = this._metrics.get(name);
        this._metrics.set(name, overview || !had ? answer : mergeMetrics(had, answer));
      } catch {
        return; // the comparison's own answer says what is wrong with a job
      }
      this.render();
    })().finally(() => this._fetching.delete(name));
    this._fetching.set(name, work);
    return work;
  }

  /** Draw the chart and the tables from what was fetched. */
  render(): void {
    const comparison = this._comparison;
    const ready = this._chosen.length >= 2 && comparison !== null;
    this._body.hidden = !ready;
    if (this._chosen.length < 2) {
      this._status.textContent = __('Choose two or more jobs to compare.');
    }
    if (!ready) {
      return;
    }
    const metric = shownMetric(comparison, this._metric);
    this._renderMetricPicker(comparison.metrics, metric);
    this._chart.setXAxis(this._axis);
    this._chart.setLines(metric ? compareLines(comparison, this._metrics, metric, this._axis) : []);
    this._chart.node.setAttribute('data-metric', metric ?? '');
    this._renderResults(comparison);
    this._renderSpec(comparison);
    this._renderCode(comparison);
  }

  private _renderMetricPicker(names: string[], shown: string | null): void {
    const current = [...this._metricSelect.options].map(option => option.value);
    if (current.join('\n') !== names.join('\n')) {
      clear(this._metricSelect);
      for (const name of names) {
        this._metricSelect.appendChild(h('option', { value: name }, name));
      }
    }
    this._metricSelect.disabled = names.length === 0;
    if (shown !== null) {
      this._metricSelect.value = shown;
    }
  }

  private _jobHeader(comparison: IComparison): HTMLElement[] {
    return comparison.runs.map(run =>
      h(
        'th',
        { scope: 'col' },
        h('span', {
          className: 'pn-chart-swatch',
          style: `background:${run.colour}`,
          'aria-hidden': 'true'
        }),
        run.name
      )
    );
  }

  private _renderResults(comparison: IComparison): void {
    clear(this._results);
    if (!comparison.metrics.length) {
      this._results.appendChild(h('p', {}, __('None of these jobs reported metrics yet.')));
      return;
    }
    const rows = comparison.metrics.flatMap(metric => {
      const cells = metricCells(comparison, metric);
      const line = (kind: 'final' | 'best', label: string): HTMLElement =>
        h(
          'tr',
          {},
          h('th', { scope: 'row' }, label),
          ...cells.map(cell =>
            h(
              'td',
              {
                className: kind === 'best' && cell?.leads ? 'pn-compare-lead' : '',
                title: kind === 'best' && cell?.leads ? __('the best of these runs') : null
              },
              cell ? cell[kind] : '–',
              kind === 'best' && cell?.leads
                ? h('span', { className: 'pn-sr-only' }, ` (${__('the best of these runs')})`)
                : null
            )
          )
        );
      return [line('final', __('%1 final', metric)), line('best', __('%1 best', metric))];
    });
    const phases = h(
      'tr',
      {},
      h('th', { scope: 'row' }, __('phase')),
      ...comparison.runs.map(run =>
        h('td', {}, h('span', { className: `pn-badge ${phaseClass(run.phase)}` }, run.phase))
      )
    );
    this._results.appendChild(
      h(
        'table',
        { className: 'pn-table pn-compare-table' },
        h('thead', {}, h('tr', {}, h('td', {}), ...this._jobHeader(comparison))),
        h('tbody', {}, phases, ...rows)
      )
    );
  }

  private _renderSpec(comparison: IComparison): void {
    clear(this._spec);
    const rows = specRows(comparison);
    if (!rows.length) {
      this._spec.appendChild(h('p', {}, __('The specs are the same (apart from the names).')));
      return;
    }
    this._spec.appendChild(
      h(
        'table',
        { className: 'pn-table pn-compare-table' },
        h(
          'thead',
          {},
          h('tr', {}, h('th', { scope: 'col' }, __('Field')), ...this._jobHeader(comparison))
        ),
        h(
          'tbody',
          {},
          ...rows.map(row =>
            h(
              'tr',
              { 'data-field': row.field },
              h('th', { scope: 'row', title: row.field }, row.label),
              ...row.values.map(value => h('td', {}, value))
            )
          )
        )
      )
    );
  }

  private _renderCode(comparison: IComparison): void {
    clear(this._code);
    const code = comparison.code;
    const notes = comparison.runs
      .filter(run => run.code.reason)
      .map(run => h('li', {}, `${run.name} ${run.code.reason}`));
    let summary: string;
    if (code.compared.length < 2) {
      summary = __(
        'Fewer than two of these jobs have a package snapshot: their code is not compared.'
      );
    } else if (!code.files.length) {
      summary = __(
        'The code is the same: %1 files with the same content in every snapshot.',
        code.same
      );
    } else {
      summary =
        code.files.length === 1
          ? __('1 file differs (%1 the same), by content hash:', code.same)
          : __('%1 files differ (%2 the same), by content hash:', code.files.length, code.same);
    }
    this._code.appendChild(h('p', {}, summary));
    const rows = codeRows(comparison);
    if (rows.length && code.compared.length >= 2) {
      this._code.appendChild(
        h(
          'div',
          { className: 'pn-compare-scroll' },
          h(
            'table',
            { className: 'pn-table pn-compare-table' },
            h(
              'thead',
              {},
              h('tr', {}, h('th', { scope: 'col' }, __('File')), ...this._jobHeader(comparison))
            ),
            h(
              'tbody',
              {},
              ...rows.map(row =>
                h(
                  'tr',
                  { 'data-path': row.path },
                  h('th', { scope: 'row' }, row.path),
                  ...row.cells.map(cell => h('td', {}, h('code', {}, cell)))
                )
              )
            )
          )
        )
      );
    }
    if (code.truncated) {
      this._code.appendChild(h('p', {}, __('More files differ than are listed.')));
    }
    if (notes.length) {
      this._code.appendChild(h('ul', {}, ...notes));
    }
  }

  /** The job list as checkboxes; rebuilt only when the set of jobs changed. */
  private _renderPicker(): void {
    const state = this._model.state;
    const names = [...state.order];
    if (names.join('\n') !== this._pickerNames.join('\n')) {
      this._pickerNames.splice(0, this._pickerNames.length, ...names);
      clear(this._picker);
      if (!names.length) {
        this._picker.appendChild(h('p', {}, __('No jobs yet.')));
      }
      for (const name of names) {
        const id = `pn-compare-${nextId++}`;
        this._picker.appendChild(
          h(
            'div',
            { className: 'pn-compare-choice' },
            h('input', {
              type: 'checkbox',
              id,
              'data-job': name,
              'data-testid': 'paddle-compare-choice'
            }),
            h('label', { for: id }, name),
            h('span', { className: 'pn-badge', 'data-job-phase': name })
          )
        );
      }
    }
    for (const badge of this._picker.querySelectorAll<HTMLElement>('[data-job-phase]')) {
      const phase = state.jobs.get(badge.getAttribute('data-job-phase')!)?.phase ?? '';
      if (badge.textContent !== phase) {
        badge.textContent = phase;
        badge.className = `pn-badge ${phaseClass(phase)}`;
      }
    }
    this._syncPicker();
  }

  private _syncPicker(): void {
    const full = this._chosen.length >= MAX_COMPARED;
    for (const box of this._picker.querySelectorAll<HTMLInputElement>('input[data-job]')) {
      const chosen = this._chosen.includes(box.getAttribute('data-job')!);
      box.checked = chosen;
      box.disabled = full && !chosen;
    }
  }

  private readonly _onSummary = (_: JobsModel, summary: IMetricsSummary): void => {
    if (!this._chosen.includes(summary.name)) {
      return;
    }
    if (summary.cursor !== this._metrics.get(summary.name)?.cursor) {
      void this._fetchMetrics(summary.name);
    }
    this._scheduleCompare();
  };

  /** The comparison again, at most every `COMPARE_EVERY` seconds. */
  private _scheduleCompare(): void {
    if (this._compareTimer) {
      return;
    }
    const wait = Math.max(0, this._lastCompare + COMPARE_EVERY * 1000 - Date.now());
    this._compareTimer = window.setTimeout(() => {
      this._compareTimer = 0;
      if (!this.isDisposed && this._chosen.length >= 2) {
        void this._fetchComparison();
      }
    }, wait);
  }

  private readonly _onJobs = (): void => {
    this._renderPicker();
    const state = this._model.state;
    if (state.loaded && this._chosen.some(name => !state.jobs.has(name))) {
      this.setJobs(this._chosen.filter(name => state.jobs.has(name))); // deleted meanwhile
      return;
    }
    const changed = (this._comparison?.runs ?? []).some(
      run =>
        state.jobs.get(run.name)?.phase !== undefined &&
        state.jobs.get(run.name)?.phase !== run.phase
    );
    if (changed) {
      void this.refresh(); // the last points, and the final values of a job that just ended
    }
  };

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this._poll = window.setInterval(() => {
      const stale = Date.now() - this._lastCompare > FALLBACK_POLL_SECONDS * 1000;
      if (stale && liveJobs(this._comparison, TERMINAL_PHASES).length) {
        void this.refresh();
      }
    }, FALLBACK_POLL_SECONDS * 1000);
  }

  protected onBeforeDetach(msg: Message): void {
    window.clearInterval(this._poll);
    this._poll = 0;
    super.onBeforeDetach(msg);
  }

  dispose(): void {
    if (this.isDisposed) {
      return;
    }
    window.clearInterval(this._poll);
    window.clearTimeout(this._compareTimer);
    this._model.metrics.disconnect(this._onSummary, this);
    this._model.changed.disconnect(this._onJobs, this);
    super.dispose();
  }
}

/** The comparison as a main-area tab (one at a time: choosing more jobs adds to it). */
export class CompareWidget extends MainAreaWidget<CompareView> {
  constructor(options: ICompareViewOptions) {
    super({ content: new CompareView(options) });
    this.id = 'paddle-nbext-compare';
    this.addClass('pn-compare-tab');
    this.title.icon = compareIcon;
    this.title.closable = true;
    this.title.label = this.content.title.label;
    this.content.title.changed.connect(() => {
      this.title.label = this.content.title.label;
    });
  }
}
