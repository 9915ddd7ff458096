/**
 * The job view's resource use: one line per replica with its CPU and memory beside request and
 * limit, a bar against the memory limit and a sparkline of recent memory; and the same figures
 * with a small bar in the replica table's "Use" cells.  Live from `usage` events, first filled by
 * `GET /jobs/{name}/usage`.  Where there are no figures it says why, in the server's words.
 */
import { ISignal } from '@lumino/signaling';
import { Widget } from '@lumino/widgets';

import { PaddleApi } from '../api/client';
import { clear, h } from './dom';
import { __ } from '../i18n';
import { NO_USAGE } from './replicatable';
import {
  UsageHistory,
  WARN_FRACTION,
  gib,
  memoryFraction,
  ranksSummary,
  sparklinePoints,
  unavailableText,
  usageKey,
  usageSummary
} from '../logic/usage';
import { IReplicaUsage, IUsage } from '../api/types';

const SPARK_WIDTH = 120;
const SPARK_HEIGHT = 24;
const SVG = 'http://www.w3.org/2000/svg';

export interface IUsageViewOptions {
  api: Pick<PaddleApi, 'usage'>;
  model: { readonly usage: ISignal<unknown, IUsage> };
  name: string;
  /** The replica table's body, whose rows (`tr[data-replica]`) get the figures in `.pn-usage`. */
  replicaRows?: () => HTMLElement | null;
}

/** A bar of `fraction` (0..1) of a limit, marked when at or past the warning line. */
export function usageBar(fraction: number): HTMLElement {
  const fill = h('span', { className: 'pn-usage-fill' });
  fill.style.width = `${Math.min(100, Math.round(fraction * 100))}%`;
  return h(
    'span',
    {
      className: `pn-usage-bar${fraction >= WARN_FRACTION ? ' pn-usage-high' : ''}`,
      role: 'img',
      'aria-label': __('%1% of its memory limit', Math.round(fraction * 100))
    },
    fill
  );
}

function sparkline(values: Array<number | null>, top: number | null): SVGSVGElement {
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('class', 'pn-usage-spark');
  svg.setAttribute('width', String(SPARK_WIDTH));
  svg.setAttribute('height', String(SPARK_HEIGHT));
  svg.setAttribute('viewBox', `0 0 ${SPARK_WIDTH} ${SPARK_HEIGHT}`);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', __('recent memory'));
  const line = document.createElementNS(SVG, 'polyline');
  line.setAttribute('points', sparklinePoints(values, SPARK_WIDTH, SPARK_HEIGHT, top ?? undefined));
  svg.appendChild(line);
  return svg;
}

export class UsageView extends Widget {
  private readonly _history = new UsageHistory();
  private _usage: IUsage | null = null;
  private _disposedFetch = false;

  constructor(private readonly _options: IUsageViewOptions) {
    super();
    this.addClass('pn-usage-view');
    this.node.setAttribute('data-testid', 'paddle-usage');
    this.node.setAttribute('aria-label', __('Resource use'));
    _options.model.usage.connect(this._onUsage, this);
    void this.refresh();
  }

  /** Fetch the whole answer (with each replica's history) and show it. */
  async refresh(): Promise<void> {
    try {
      const usage = await this._options.api.usage(this._options.name);
      if (!this._disposedFetch) {
        this.setUsage(usage);
      }
    } catch {
      // a deleted job or a server without the route: the view simply shows nothing new
    }
  }

  /** Show `usage` (an answer or an event of this job). */
  setUsage(usage: IUsage): void {
    this._usage = usage;
    if (usage.available) {
      this._history.add(usage);
    }
    this.render();
  }

  /** Put the figures into the replica table too (after it re-rendered its rows). */
  decorateRows(): void {
    const body = this._options.replicaRows?.();
    if (!body) {
      return;
    }
    const byKey = new Map((this._usage?.replicas ?? []).map(r => [usageKey(r), r]));
    for (const row of body.querySelectorAll<HTMLElement>('tr[data-replica]')) {
      const cell = row.querySelector('.pn-usage');
      const replica = byKey.get(row.getAttribute('data-replica') ?? '');
      if (!cell) {
        continue;
      }
      clear(cell);
      const summary = replica && this._usage?.available ? usageSummary(replica) : '';
      if (!replica || !summary) {
        cell.textContent = NO_USAGE; // no figures yet, nor a peak: the table says so, never blank
        continue;
      }
      cell.appendChild(h('span', { className: 'pn-usage-text' }, summary));
      const fraction = memoryFraction(replica);
      if (fraction !== null) {
        cell.appendChild(usageBar(fraction));
      }
    }
  }

  render(): void {
    const usage = this._usage;
    clear(this.node);
    this.decorateRows();
    if (!usage) {
      return;
    }
    if (!usage.available) {
      this.node.appendChild(
        h(
          'p',
          { className: 'pn-usage-unavailable', 'data-testid': 'paddle-usage-reason' },
          unavailableText(usage)
        )
      );
      return;
    }
    const list = h('ul', { className: 'pn-usage-list' });
    for (const replica of usage.replicas) {
      list.appendChild(this._line(replica));
    }
    this.node.appendChild(list);
  }

  private _line(replica: IReplicaUsage): HTMLElement {
    const key = usageKey(replica);
    const fraction = memoryFraction(replica);
    const memory = this._history.samples(key).map(sample => sample.memory);
    return h(
      'li',
      { 'data-testid': 'paddle-usage-replica', 'data-replica': key },
      h('span', { className: 'pn-usage-name' }, `${replica.role} ${replica.index}`),
      h('span', { className: 'pn-usage-text' }, usageSummary(replica)),
      fraction !== null ? usageBar(fraction) : null,
      replica.peak_memory
        ? h('span', { className: 'pn-usage-peak' }, __('peak %1', gib(replica.peak_memory)))
        : null,
      sparkline(memory, replica.memory_limit),
      replica.ranks?.length
        ? h(
            'span',
            { className: 'pn-usage-ranks', 'data-testid': 'paddle-usage-ranks' },
            ranksSummary(replica)
          )
        : null
    );
  }

  private readonly _onUsage = (_: unknown, usage: IUsage): void => {
    if (usage.name === this._options.name) {
      this.setUsage(usage);
    }
  };

  dispose(): void {
    this._disposedFetch = true;
    this._options.model.usage.disconnect(this._onUsage, this);
    super.dispose();
  }
}
