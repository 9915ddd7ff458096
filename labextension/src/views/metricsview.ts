/**
 * Live training metrics of one job, for the job view's metrics section: a progress bar with
 * step/total and ETA, and one chart per reported metric with every replica that reports it
 * overlaid (legend, values on hover, linear or log scale).
 *
 * It asks for a downsampled overview first (`OVERVIEW_POINTS` per line), then only for what
 * came after its cursor whenever the server announces new points (`metrics` events, at most two
 * a second per job) or, while the job runs without events, every few seconds.  Once a line grew
 * past `REFETCH_POINTS` the overview is fetched again, so a long run never grows the page.
 */
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { PaddleApi } from '../api/client';
import { ILine, LineChart, Scale } from './chart';
import { clear, h } from './dom';
import { __ } from '../i18n';
import {
  OVERVIEW_POINTS,
  REFETCH_POINTS,
  longestSeries,
  mergeMetrics,
  metricNames,
  progressView,
  restartSteps,
  seriesName
} from '../logic/metrics';
import { JobsModel } from '../state/model';
import { TrainingClock, metricsWaitText } from '../logic/metricswait';
import { IMetrics, IMetricsSummary, TERMINAL_PHASES } from '../api/types';

/** Seconds between fetches of a running job when no event announced anything. */
const FALLBACK_POLL_SECONDS = 5;

export interface IMetricsViewOptions {
  api: PaddleApi;
  model: JobsModel;
  name: string;
}

export class MetricsView extends Widget {
  private readonly _api: PaddleApi;
  private readonly _model: JobsModel;
  private readonly _name: string;
  private readonly _bar: HTMLElement;
  private readonly _fill: HTMLElement;
  private readonly _label: HTMLElement;
  private readonly _eta: HTMLElement;
  private readonly _progress: HTMLElement;
  private readonly _charts: HTMLElement;
  private readonly _empty: HTMLElement;
  private readonly _scaleButton: HTMLButtonElement;
  private readonly _error: HTMLElement;
  private readonly _byMetric = new Map<string, LineChart>();
  private _metrics: IMetrics | null = null;
  private _phase: string;
  private readonly _clock = new TrainingClock();
  private _scale: Scale = 'linear';
  private _loading: Promise<void> | null = null;
  private _again = false;
  private _poll = 0;
  private _lastFetch = 0;

  constructor(options: IMetricsViewOptions) {
    super();
    this._api = options.api;
    this._model = options.model;
    this._name = options.name;
    this._phase = options.model.job(options.name)?.phase ?? 'Pending';
    this.addClass('pn-metrics-view');
    this.node.setAttribute('data-testid', 'paddle-metrics-view');
    this._fill = h('div', { className: 'pn-progress-fill' });
    this._bar = h(
      'div',
      {
        className: 'pn-progress',
        role: 'progressbar',
        'aria-valuemin': 0,
        'aria-valuemax': 100,
        'aria-label': __('Training progress'),
        'data-testid': 'paddle-progress'
      },
      this._fill
    );
    this._label = h('span', {
      className: 'pn-progress-label',
      'data-testid': 'paddle-progress-label'
    });
    this._eta = h('span', { className: 'pn-progress-eta', 'data-testid': 'paddle-progress-eta' });
    this._progress = h(
      'div',
      { className: 'pn-progress-row', hidden: true },
      this._bar,
      this._label,
      this._eta
    );
    this._scaleButton = h(
      'button',
      {
        className: 'pn-button pn-small',
        type: 'button',
        'aria-pressed': 'false',
        'data-testid': 'paddle-log-scale'
      },
      __('Log scale')
    );
    this._scaleButton.addEventListener('click', () =>
      this.setScale(this._scale === 'log' ? 'linear' : 'log')
    );
    this._empty = h('p', {
      className: 'pn-metrics-empty',
      'data-testid': 'paddle-metrics-empty',
      role: 'status'
    });
    this._error = h('p', { className: 'pn-error-text', hidden: true });
    this._charts = h('div', { className: 'pn-charts' });
    this.node.append(
      h('div', { className: 'pn-metrics-head' }, h('h3', {}, __('Training')), this._scaleButton),
      this._progress,
      this._empty,
      this._error,
      this._charts
    );
    this._model.metrics.connect(this._onSummary, this);
    this._model.changed.connect(this._onJobs, this);
    void this.refresh();
  }

  get metrics(): IMetrics | null {
    return this._metrics;
  }

  /** The charts by metric name (for tests and the benchmark). */
  get charts(): ReadonlyMap<string, LineChart> {
    return this._byMetric;
  }

  setScale(scale: Scale): void {
    this._scale = scale;
    this._scaleButton.setAttribute('aria-pressed', String(scale === 'log'));
    for (const chart of this._byMetric.values()) {
      chart.setScale(scale);
    }
  }

  /** Fetch what is new (coalesced: a fetch asked for while one runs happens once after it). */
  refresh(): Promise<void> {
    if (this._loading) {
      this._again = true;
      return this._loading;
    }
    this._loading = this._fetch().finally(() => {
      this._loading = null;
      if (this._again && !this.isDisposed) {
        this._again = false;
        void this.refresh();
      }
    });
    return this._loading;
  }

  private async _fetch(): Promise<void> {
    this._lastFetch = Date.now();
    const base = this._metrics;
    const overview = base === null || longestSeries(base) > REFETCH_POINTS;
    try {
      const answer = await this._api.metrics(
        this._name,
        OVERVIEW_POINTS,
        overview ? null : base.cursor
      );
      if (this.isDisposed) {
        return;
      }
      this._metrics = overview || !this._metrics ? answer : mergeMetrics(this._metrics, answer);
      this._error.hidden = true;
    } catch (error) {
      if (this.isDisposed) {
        return;
      }
      this._error.hidden = false;
      this._error.textContent = __('Could not load the metrics: %1', (error as Error).message);
      return;
    }
    this.render();
  }

  /** Draw progress and charts from what was fetched. */
  render(): void {
    const metrics = this._metrics;
    const progress = progressView(metrics?.progress ?? null, this._phase);
    this._progress.hidden = progress === null;
    if (progress) {
      const percent = Math.round(progress.fraction * 100);
      this._fill.style.width = `${progress.fraction * 100}%`;
      this._bar.setAttribute('aria-valuenow', String(percent));
      this._bar.setAttribute('aria-valuetext', progress.label);
      this._label.textContent = progress.label;
      this._eta.textContent = progress.eta;
    }
    const names = metrics ? metricNames(metrics) : [];
    this._empty.hidden = names.length > 0;
    this._sayWhatIsAwaited();
    this._scaleButton.hidden = names.length === 0;
    for (const [name, chart] of this._byMetric) {
      if (!names.includes(name)) {
        chart.node.remove();
        this._byMetric.delete(name);
      }
    }
    for (const name of names) {
      let chart = this._byMetric.get(name);
      if (!chart) {
        chart = new LineChart(name);
        chart.setScale(this._scale);
        this._byMetric.set(name, chart);
        this._charts.appendChild(
          h('section', { className: 'pn-chart-section' }, h('h4', {}, name), chart.node)
        );
      }
      chart.setLines(linesOf(metrics!, name), restartSteps(metrics!));
    }
    if (!names.length) {
      clear(this._charts);
    }
  }

  private readonly _onSummary = (_: JobsModel, summary: IMetricsSummary): void => {
    if (summary.name === this._name && summary.cursor !== this._metrics?.cursor) {
      void this.refresh();
    }
  };

  /** The empty section's words follow the job (preparing, training, a while without report()). */
  private _sayWhatIsAwaited(): void {
    const job = this._model.job(this._name);
    const now = Date.now();
    const text = metricsWaitText(job, this._clock.update(job, now), now);
    if (this._empty.textContent !== text) {
      this._empty.textContent = text;
    }
  }

  private readonly _onJobs = (): void => {
    this._sayWhatIsAwaited();
    const phase = this._model.job(this._name)?.phase;
    if (phase && phase !== this._phase) {
      this._phase = phase;
      void this.refresh(); // the last points, and 100 % on success
    }
  };

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this._poll = window.setInterval(() => {
      this._sayWhatIsAwaited();
      const stale = Date.now() - this._lastFetch > FALLBACK_POLL_SECONDS * 1000;
      if (stale && !TERMINAL_PHASES.has(this._phase)) {
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
    this._model.metrics.disconnect(this._onSummary, this);
    this._model.changed.disconnect(this._onJobs, this);
    super.dispose();
  }
}

/**
 * One line per replica that reports `metric`, named like the replica table (`trainer-0`), and
 * one per rank of a trainer of several processes (`trainer-0 · rank 2`).
 */
export function linesOf(metrics: IMetrics, metric: string): ILine[] {
  const lines: ILine[] = [];
  for (const replica of metrics.replicas) {
    const columns = replica.series[metric];
    if (columns) {
      lines.push({ name: seriesName(replica), x: columns.step, y: columns.value });
    }
  }
  return lines;
}
