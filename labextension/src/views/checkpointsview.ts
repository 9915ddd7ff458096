/**
 * A job's checkpoints in its view: the line under the times ("2 checkpoints, latest step 10
 * (3.1Ki)") and the collapsible table of them.  While the job runs they are fetched again on
 * every tick of the view, so the count is live exactly when a user decides whether cancelling
 * is safe; an ended job's are fetched once more when it ends.  Whoever shows a Resume button
 * learns the count through `changed`.
 */
import { PaddleApi } from '../api/client';
import { clear, h } from './dom';
import { absoluteTime, bytesText, checkpointsText } from '../logic/format';
import { __ } from '../i18n';
import { ICheckpoints } from '../api/types';

export class CheckpointsView {
  /** The summary line (hidden while there is nothing to say). */
  readonly line: HTMLElement;
  /** The table of checkpoints, newest first, collapsed. */
  readonly list: HTMLDetailsElement;
  private readonly _rows: HTMLTableSectionElement;
  /** Answers are applied only if no later fetch started: an old one cannot undo a new one. */
  private _asked = 0;
  private _inFlight = false;
  private _count: number | null = null;

  constructor(
    private readonly _api: PaddleApi,
    private readonly _name: string,
    /** The number of checkpoints, each time it is known anew (null: the server has none to say). */
    private readonly _changed: (count: number | null) => void = () => undefined
  ) {
    this.line = h('p', {
      className: 'pn-detail-checkpoints',
      'data-testid': 'paddle-detail-checkpoints',
      hidden: true
    });
    this._rows = h('tbody');
    this.list = h(
      'details',
      { className: 'pn-checkpoints-section', 'data-testid': 'paddle-checkpoints', hidden: true },
      h('summary', {}, __('Checkpoints')),
      h(
        'table',
        { className: 'pn-replicas' },
        h('caption', { className: 'pn-sr-only' }, __('Checkpoints of %1', _name)),
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            h('th', { scope: 'col' }, __('Step')),
            h('th', { scope: 'col' }, __('Saved')),
            h('th', { scope: 'col' }, __('Size'))
          )
        ),
        this._rows
      )
    );
  }

  /** The last count fetched (null before the first answer or on a server without checkpoints). */
  get count(): number | null {
    return this._count;
  }

  /** Fetch now (the job changed phase). */
  load(): Promise<void> {
    return this._fetch();
  }

  /** Fetch unless a fetch is under way (a running job's view, on its tick). */
  poll(): void {
    if (!this._inFlight) {
      void this._fetch();
    }
  }

  private async _fetch(): Promise<void> {
    const asked = ++this._asked;
    this._inFlight = true;
    let info: ICheckpoints | null = null;
    try {
      info = await this._api.checkpoints(this._name);
    } catch {
      info = null; // a server before checkpoints, or the job is gone
    } finally {
      if (asked === this._asked) {
        this._inFlight = false;
      }
    }
    if (asked !== this._asked) {
      return;
    }
    if (info) {
      this._render(info);
    } else {
      this.line.hidden = true;
    }
    this._count = info ? info.checkpoints.length : null;
    this._changed(this._count);
  }

  private _render(info: ICheckpoints): void {
    // The origin is the view's "Resumed from" line: a resumed job stated it three times.
    const text = checkpointsText(info, false);
    if (this.line.textContent !== text) {
      this.line.textContent = text;
    }
    this.line.hidden = !text;
    const steps = info.checkpoints.map(checkpoint => String(checkpoint.step)).join(',');
    if (this._rows.dataset.steps !== steps) {
      this._rows.dataset.steps = steps;
      clear(this._rows);
      for (const checkpoint of [...info.checkpoints].reverse()) {
        this._rows.appendChild(
          h(
            'tr',
            { 'data-step': String(checkpoint.step) },
            h('td', {}, String(checkpoint.step)),
            h('td', {}, h('time', { dateTime: checkpoint.time }, absoluteTime(checkpoint.time))),
            h('td', {}, bytesText(checkpoint.size))
          )
        );
      }
    }
    this.list.hidden = info.checkpoints.length === 0;
  }
}
