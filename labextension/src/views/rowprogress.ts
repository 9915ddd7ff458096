/**
 * A thin progress bar with step/total and ETA under each sidebar row of a job whose replicas
 * `report()` a total, from the `metrics` events alone (no request per row).
 *
 * Rows are redrawn by the list whenever their job's status changes, so the bars are put back
 * after every list update; a bar is only touched when its text changed, which keeps a
 * 1,000-row list as cheap as before.
 *
 * `metrics` events come only while a job reports: after a page reload an ended job never sends
 * one, and its row lost its bar.  So once the list has loaded, the newest rows' progress is
 * fetched once (one small request each, a few at a time, after the rows are drawn).
 */
import { IDisposable } from '@lumino/disposable';

import { h } from './dom';
import { __ } from '../i18n';
import { IMetricsSummary, IProgress } from '../api/types';
import { progressView } from '../logic/metrics';
import { JobsModel } from '../state/model';

/** Rows whose progress is fetched once after the list loads (the newest, those in view). */
export const BACKFILL_ROWS = 30;
/** Metric requests at a time while backfilling. */
const BACKFILL_AT_ONCE = 4;

export class RowProgress implements IDisposable {
  private readonly _progress = new Map<string, IProgress>();
  private _disposed = false;
  private _backfilled = false;

  constructor(
    private readonly _model: JobsModel,
    private readonly _root: HTMLElement
  ) {
    _model.metrics.connect(this._onSummary, this);
    _model.changed.connect(this.apply, this);
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  private readonly _onSummary = (_: JobsModel, summary: IMetricsSummary): void => {
    if (summary.progress) {
      this._progress.set(summary.name, summary.progress);
      this.apply();
    }
  };

  /** Fetch the progress of the newest rows not known yet (once, after the first load). */
  private async _backfill(): Promise<void> {
    const names = this._model.state.order
      .slice(0, BACKFILL_ROWS)
      .filter(name => !this._progress.has(name));
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < names.length && !this._disposed) {
        const name = names[next++];
        try {
          const answer = await this._model.api.metrics(name, 1);
          if (answer.progress && !this._progress.has(name)) {
            this._progress.set(name, answer.progress);
            this.apply();
          }
        } catch {
          // gone since, or a server without metrics: no bar, as before
        }
      }
    };
    await Promise.all(Array.from({ length: BACKFILL_AT_ONCE }, worker));
  }

  /** Put each known job's bar into its row (after the list drew its rows). */
  readonly apply = (): void => {
    if (!this._backfilled && this._model.state.loaded) {
      this._backfilled = true;
      void this._backfill();
    }
    for (const name of [...this._progress.keys()]) {
      const job = this._model.state.jobs.get(name);
      if (!job) {
        this._progress.delete(name);
        continue;
      }
      const row = this._root.querySelector<HTMLElement>(
        `[data-testid="paddle-job-row"][data-job="${CSS.escape(name)}"]`
      );
      if (!row) {
        continue;
      }
      const view = progressView(this._progress.get(name)!, job.phase);
      if (!view) {
        continue;
      }
      const text = [view.label, view.eta].filter(Boolean).join(' · ');
      let bar = row.querySelector<HTMLElement>('.pn-row-progress');
      if (bar?.getAttribute('data-progress') === text) {
        continue;
      }
      if (!bar) {
        bar = h(
          'div',
          {
            // Inside an option (the row) nested roles are not announced: the bar is decoration,
            // its words are in the row's text and title.
            className: 'pn-row-progress',
            'data-testid': 'paddle-row-progress',
            title: __('Progress of %1', name)
          },
          h('div', { className: 'pn-progress-fill' }),
          h('span', { className: 'pn-row-progress-text' })
        );
        row.appendChild(bar);
      }
      bar.setAttribute('data-progress', text);
      bar.setAttribute('data-percent', String(Math.round(view.fraction * 100)));
      (bar.firstElementChild as HTMLElement).style.width = `${view.fraction * 100}%`;
      bar.lastElementChild!.textContent = text;
    }
  };

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._model.metrics.disconnect(this._onSummary, this);
    this._model.changed.disconnect(this.apply, this);
  }
}
