/**
 * The job's timeline under its header: a compact list, newest last, of what happened to the job
 * (submitted, waiting and why, started, first step, checkpoints, warnings, restarts, the end),
 * first from `GET /jobs/{name}/timeline`, then from `timeline` events.  Warnings are marked, and
 * the list keeps its last entries in view.
 */
import { ISignal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { PaddleApi } from '../api/client';
import { clear, h } from './dom';
import { absoluteTime } from '../logic/format';
import { __ } from '../i18n';
import { ITimelineEvent } from '../state/model';
import { ITimelineEntry } from '../api/types';

/** Kinds shown as warnings (and notified by the app). */
export const WARNING_KINDS: ReadonlySet<string> = new Set(['warning', 'restart']);

/** `14:02:11` of an API time, in the reader's time zone. */
export function clockTime(iso: string): string {
  const moment = new Date(iso);
  if (Number.isNaN(moment.getTime())) {
    return '';
  }
  return moment.toLocaleTimeString([], {
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    hour12: false
  });
}

/** When an entry happened (ms), for ordering; entries without a readable time go first. */
function timeOf(entry: ITimelineEntry): number {
  const moment = new Date(entry.t).getTime();
  return Number.isNaN(moment) ? 0 : moment;
}

/**
 * `entries` added to `known` by `seq` (each once), ordered by time, then `seq`: an entry the
 * Kubernetes server wrote late (it was down when that happened) has a higher `seq` but its own,
 * older time, and goes where it happened.
 */
export function mergeEntries(known: ITimelineEntry[], entries: ITimelineEntry[]): ITimelineEntry[] {
  const bySeq = new Map(known.map(entry => [entry.seq, entry]));
  for (const entry of entries) {
    bySeq.set(entry.seq, entry);
  }
  return [...bySeq.values()].sort((a, b) => timeOf(a) - timeOf(b) || a.seq - b.seq);
}

/** The highest `seq` in `entries` (0 for none): where the list stands for `since`. */
export function lastSeq(entries: ITimelineEntry[]): number {
  return entries.reduce((last, entry) => Math.max(last, entry.seq), 0);
}

export interface ITimelineViewOptions {
  api: Pick<PaddleApi, 'timeline'>;
  model: { readonly timeline: ISignal<unknown, ITimelineEvent> };
  name: string;
}

export class TimelineView extends Widget {
  private _entries: ITimelineEntry[] = [];
  private _reason: string | null = null;
  private _gone = false;
  private readonly _list: HTMLOListElement;
  private readonly _summary: HTMLElement;

  constructor(private readonly _options: ITimelineViewOptions) {
    super({ node: document.createElement('details') });
    this.addClass('pn-timeline');
    this.node.setAttribute('data-testid', 'paddle-timeline');
    (this.node as HTMLDetailsElement).open = true;
    this._summary = h('summary', {}, __('Timeline'));
    this._list = h('ol', { className: 'pn-timeline-list', 'aria-live': 'polite' });
    this.node.appendChild(this._summary);
    this.node.appendChild(this._list);
    _options.model.timeline.connect(this._onEvent, this);
    void this.refresh();
  }

  get entries(): ITimelineEntry[] {
    return this._entries;
  }

  async refresh(): Promise<void> {
    try {
      const answer = await this._options.api.timeline(this._options.name);
      if (this._gone) {
        return;
      }
      this._reason = answer.available ? null : answer.reason;
      this.add(answer.entries);
    } catch {
      // a deleted job, or a server without the route: nothing to list
    }
  }

  add(entries: ITimelineEntry[]): void {
    this._entries = mergeEntries(this._entries, entries);
    this.render();
  }

  render(): void {
    clear(this._list);
    this._summary.textContent = this._entries.length
      ? __('Timeline (%1)', this._entries.length)
      : __('Timeline');
    if (!this._entries.length) {
      this._list.appendChild(
        h(
          'li',
          { className: 'pn-timeline-empty' },
          this._reason ? __('No timeline: %1.', this._reason) : __('Nothing yet.')
        )
      );
      return;
    }
    for (const entry of this._entries) {
      this._list.appendChild(
        h(
          'li',
          {
            className: `pn-timeline-entry${WARNING_KINDS.has(entry.kind) ? ' pn-timeline-warning' : ''}`,
            'data-testid': 'paddle-timeline-entry',
            'data-kind': entry.kind
          },
          h('time', { dateTime: entry.t, title: absoluteTime(entry.t) }, clockTime(entry.t)),
          ' ',
          h('span', {}, entry.text)
        )
      );
    }
    this._list.scrollTop = this._list.scrollHeight; // newest last, and in view
  }

  private readonly _onEvent = (_: unknown, event: ITimelineEvent): void => {
    if (event.name !== this._options.name) {
      return;
    }
    const known = lastSeq(this._entries);
    const first = Math.min(...event.entries.map(entry => entry.seq));
    this.add(event.entries);
    if (first > known + 1) {
      // Entries written between this view's first GET and the stream's first look at the job
      // are in no event: fetch the list again (merged by seq, so nothing shows twice).
      void this.refresh();
    }
  };

  dispose(): void {
    this._gone = true;
    this._options.model.timeline.disconnect(this._onEvent, this);
    super.dispose();
  }
}
