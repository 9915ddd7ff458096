/**
 * A replica's log with its controls: which replica, last N lines, follow, previous attempt,
 * hide Paddle noise, search, download, open in its own tab.
 *
 * Used twice: in the job view (with a replica selector) and as a tab of its own for one
 * replica.  Follow state belongs to the instance, so two views of one job follow separately.
 */
import { ApiError, PaddleApi } from '../api/client';
import { clear, h } from './dom';
import { __ } from '../i18n';
import { NoiseFilter } from '../logic/logtext';
import { LogView } from './logview';
import { RankFilter, logChoices, parseRankKey, rankKey, rankName } from '../logic/ranks';
import { IReplica } from '../api/types';

/** A replica, or with `rank` one rank of a trainer of several processes (its lines of the log). */
export interface IReplicaRef {
  role: string;
  index: number;
  rank?: number;
}

/** The replica's own key (`trainer-1`), whatever rank is chosen. */
export function replicaKey(ref: IReplicaRef): string {
  return `${ref.role}-${ref.index}`;
}

export interface ILogPanelOptions {
  tail: number;
  /** Follow new lines by default (a running job's view does). */
  follow?: boolean;
  /** Open the selected replica's log in a tab of its own; no button when absent. */
  openInTab?: (ref: IReplicaRef) => void;
}

/** How a load ended, for the view that asked (the failure-first flow highlights a traceback). */
export type LoadOutcome = 'loaded' | 'ended' | 'not-started' | 'error' | 'aborted';

export class LogPanel {
  readonly node: HTMLElement;
  readonly log: LogView;
  private readonly _replica: HTMLSelectElement;
  private readonly _tail: HTMLInputElement;
  private readonly _follow: HTMLInputElement;
  private readonly _previous: HTMLInputElement;
  private readonly _noise: HTMLInputElement;
  private readonly _search: HTMLInputElement;
  private readonly _searchStatus: HTMLElement;
  private readonly _status: HTMLElement;
  private _replicas: IReplica[] = [];
  private _ranks = 1;
  /** The job has a requirements file: its installer's log is offered too. */
  private _environment = false;
  private _abort: AbortController | null = null;
  private _waitingToStart: string | null = null;

  constructor(
    private readonly _api: PaddleApi,
    private readonly _job: string,
    options: ILogPanelOptions
  ) {
    this._replica = h('select', {
      className: 'pn-input',
      'data-testid': 'paddle-log-replica',
      'aria-label': __('Replica')
    });
    this._replica.addEventListener('change', () => void this.show());
    this._tail = h('input', {
      className: 'pn-input pn-narrow',
      type: 'number',
      min: 1,
      value: options.tail,
      'data-testid': 'paddle-log-tail',
      'aria-label': __('Last lines'),
      title: __('Show the last N lines (empty: the whole log)')
    });
    this._follow = h('input', {
      type: 'checkbox',
      'data-testid': 'paddle-log-follow',
      checked: options.follow === true
    });
    this._follow.addEventListener('change', () => void this.show());
    this._previous = h('input', { type: 'checkbox', 'data-testid': 'paddle-log-previous' });
    this._previous.addEventListener('change', () => void this.show());
    this._noise = h('input', {
      type: 'checkbox',
      'data-testid': 'paddle-log-noise',
      checked: true
    });
    this._noise.addEventListener('change', () => void this.show());
    const load = h(
      'button',
      { className: 'pn-button', type: 'button', 'data-testid': 'paddle-log-load' },
      __('Show log')
    );
    load.addEventListener('click', () => void this.show());
    this._search = h('input', {
      className: 'pn-input pn-log-search',
      type: 'search',
      placeholder: __('Search the log'),
      'aria-label': __('Search the log'),
      'data-testid': 'paddle-log-search'
    });
    this._searchStatus = h('span', {
      className: 'pn-log-status',
      'data-testid': 'paddle-log-search-status'
    });
    this._search.addEventListener('keydown', event => {
      if (event.key === 'Enter') {
        event.preventDefault();
        this.find(event.shiftKey ? -1 : 1);
      } else if (event.key === 'Escape' && this._search.value) {
        event.stopPropagation();
        this._search.value = '';
        this.find(0);
      }
    });
    this._search.addEventListener('input', () => this.find(0));
    const download = h(
      'button',
      {
        className: 'pn-button',
        type: 'button',
        'data-testid': 'paddle-log-download',
        title: __('Download the whole log of this replica')
      },
      __('Download')
    );
    download.addEventListener('click', () => void this.download());
    let openTab: HTMLButtonElement | null = null;
    if (options.openInTab) {
      const open = options.openInTab;
      openTab = h(
        'button',
        {
          className: 'pn-button',
          type: 'button',
          'data-testid': 'paddle-log-open-tab',
          title: __('Open this log in a tab of its own')
        },
        __('Open in tab')
      );
      openTab.addEventListener('click', () => {
        const ref = this.selected;
        if (ref) {
          open(ref);
        }
      });
    }
    this._status = h('span', { className: 'pn-log-status', 'data-testid': 'paddle-log-status' });
    this.log = new LogView();
    this.node = h(
      'div',
      { className: 'pn-log-panel' },
      h(
        'div',
        { className: 'pn-log-controls' },
        this._replica,
        h('label', {}, __('last'), ' ', this._tail),
        h(
          'label',
          { title: __('Stream new lines as they are written') },
          this._follow,
          ' ',
          __('follow')
        ),
        h(
          'label',
          { title: __('The log of the previous (restarted) attempt') },
          this._previous,
          ' ',
          __('previous attempt')
        ),
        h(
          'label',
          { title: __("Hide Paddle's own logging: glog lines, signal frames, shutdown lines") },
          this._noise,
          ' ',
          __('hide Paddle noise')
        ),
        load,
        download,
        openTab
      ),
      h('div', { className: 'pn-log-controls' }, this._search, this._searchStatus, this._status),
      this.log.node
    );
  }

  get job(): string {
    return this._job;
  }

  /** The replica (or rank) shown, or about to be. */
  get selected(): IReplicaRef | null {
    return parseRankKey(this._replica.value);
  }

  get following(): boolean {
    return this._follow.checked;
  }

  set tail(value: number) {
    this._tail.value = String(value);
  }

  /**
   * The job's replicas, for the selector, and the ranks each trainer runs (`ranksPerTrainer`):
   * a trainer of several ranks is offered whole and rank by rank.  The selection is kept when
   * still there.
   */
  setReplicas(
    replicas: IReplica[],
    ranks: number = this._ranks,
    environment: boolean = this._environment
  ): void {
    this._replicas = replicas;
    this._ranks = ranks;
    this._environment = environment;
    const selected = this._replica.value;
    clear(this._replica);
    const choices = logChoices(replicas, ranks, environment);
    for (const choice of choices) {
      this._replica.appendChild(
        h(
          'option',
          {
            value: choice.value,
            className: choice.ref.rank === undefined ? '' : 'pn-rank-option'
          },
          choice.label
        )
      );
    }
    if (selected && choices.some(c => c.value === selected)) {
      this._replica.value = selected;
    } else if (choices.length) {
      this._replica.value = choices[0].value;
    }
    // A replica the reader is waiting for has started: show its log now.
    if (this._waitingToStart && this._waitingToStart === this._replica.value) {
      const replica = this._current();
      if (replica && hasStarted(replica)) {
        this._waitingToStart = null;
        void this.show();
      }
    }
  }

  select(ref: IReplicaRef): void {
    this._replica.value = rankKey(ref);
  }

  /** Load the selected replica's log (and keep streaming it while "follow" is on). */
  async show(): Promise<LoadOutcome> {
    const ref = this.selected;
    if (!ref) {
      return 'aborted';
    }
    this.stop();
    this.log.clear();
    this._searchStatus.textContent = '';
    const name = rankName(ref);
    this.log.setLabel(__('Log of %1', name));
    const replica = this._current();
    if (replica && !hasStarted(replica)) {
      this._waitingToStart = rankKey(ref);
      this._status.textContent = __('%1 has not started yet; its log appears once it does.', name);
      this.node.setAttribute('data-log-state', 'not-started');
      return 'not-started';
    }
    this._waitingToStart = null;
    const tailText = this._tail.value.trim();
    const tail = tailText ? Math.max(1, parseInt(tailText, 10) || 1) : null;
    const previous = this._previous.checked;
    const options = { role: ref.role, index: ref.index, tail, previous };
    const abort = new AbortController();
    this._abort = abort;
    const label = previous ? __('%1 (previous attempt)', name) : name;
    const filter = new NoiseFilter(this._noise.checked);
    // One rank of a trainer: its lines of the trainer's log, without their `[rank r] ` prefix.
    const ranks = ref.rank === undefined ? null : new RankFilter(ref.rank);
    const write = (text: string): void =>
      this.log.append(filter.feed(ranks ? ranks.feed(text) : text));
    let outcome: LoadOutcome;
    try {
      if (this._follow.checked && !previous) {
        this._status.textContent = __('following %1…', label);
        this.node.setAttribute('data-log-state', 'following');
        await this._api.followLogs(this._job, options, write, abort.signal);
        this.log.append(filter.feed(ranks?.end() ?? '') + filter.end());
        this._status.textContent = __('%1: replica ended', label);
        outcome = 'ended';
      } else {
        this._status.textContent = __('loading %1…', label);
        write(await this._api.logs(this._job, options, abort.signal));
        this.log.append(filter.feed(ranks?.end() ?? '') + filter.end());
        this._status.textContent = label;
        outcome = 'loaded';
      }
      if (ranks?.hidden) {
        this._status.textContent += ` · ${__('%1 lines of other ranks hidden', ranks.hidden)}`;
      }
      if (filter.hidden) {
        this._status.textContent += ` · ${__('%1 Paddle noise lines hidden', filter.hidden)}`;
      }
      await this.log.whenFlushed();
      this.node.setAttribute('data-log-state', 'loaded');
    } catch (error) {
      if (abort.signal.aborted) {
        return 'aborted';
      }
      this._status.textContent = `${label}: ${(error as Error).message}`;
      this.node.setAttribute('data-log-state', 'error');
      outcome = 'error';
    } finally {
      if (this._abort === abort) {
        this._abort = null;
      }
    }
    if (this._search.value) {
      this.find(0);
    }
    return outcome;
  }

  /** Move to the next (1), previous (-1) or first (0) match of the search box. */
  find(step: 1 | -1 | 0): void {
    const query = this._search.value;
    if (!query) {
      this.log.clearSearch();
      this._searchStatus.textContent = '';
      return;
    }
    const [current, total] = this.log.search(query, step);
    this._searchStatus.textContent = total ? __('%1 of %2', current, total) : __('no match');
  }

  /** Save the replica's whole log (not only the lines shown) as a file. */
  async download(): Promise<void> {
    const ref = this.selected;
    if (!ref) {
      return;
    }
    try {
      const text = await this._api.logs(this._job, {
        role: ref.role,
        index: ref.index,
        tail: null,
        previous: this._previous.checked
      });
      const url = URL.createObjectURL(new Blob([text], { type: 'text/plain' }));
      const link = h('a', {
        href: url,
        download: `${this._job}-${replicaKey(ref)}${this._previous.checked ? '-previous' : ''}.log`
      });
      document.body.appendChild(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (error) {
      this._status.textContent = `${__('Download failed')}: ${(error as ApiError).message}`;
    }
  }

  stop(): void {
    this._abort?.abort();
    this._abort = null;
  }

  private _current(): IReplica | undefined {
    const ref = this.selected;
    return ref ? this._replicas.find(r => replicaKey(r) === replicaKey(ref)) : undefined;
  }
}

function hasStarted(replica: IReplica): boolean {
  return replica.started !== null || replica.phase !== 'Pending';
}
