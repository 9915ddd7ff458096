/**
 * The job list: a listbox of one option per job (name, phase badge, replica summary, age),
 * compact enough for a 250 px sidebar, where nothing in a row is cut: a long name wraps, and so
 * does the summary, between roles first, then between a role's phrases.
 *
 * Keyboard: one Tab stop (roving tabindex), arrows/Home/End move, Enter or Space opens.  Rows
 * are keyed by job name and redrawn only when the job's status object changed, so an event
 * touches one row even with 1,000 jobs; a phase change is announced once, politely.
 */
import { absoluteTime, countsText, formatAge, phaseClass, roleSummaries } from '../logic/format';
import { __ } from '../i18n';
import { h } from './dom';
import { IListFilter, ListFilterBar, NO_FILTER, jobMatches } from './listfilter';
import { shownPhase } from '../logic/preparing';
import { IJobsState } from '../state/state';
import { IJobStatus, TERMINAL_PHASES } from '../api/types';

/**
 * A role summary's phrases, each with its comma ("trainers 1/2 succeeded," "1 failed"): a
 * narrow row wraps between them, never inside "1 failed", and never cuts a count off.
 */
export function countPhrases(text: string): string[] {
  return text.split(', ').map((phrase, n, all) => (n < all.length - 1 ? `${phrase},` : phrase));
}

interface IRow {
  job: IJobStatus;
  node: HTMLLIElement;
  age: HTMLElement;
}

export class JobListView {
  readonly node: HTMLElement;
  private readonly _list: HTMLUListElement;
  private readonly _empty: HTMLElement;
  private readonly _loading: HTMLElement;
  private _rows = new Map<string, IRow>();
  private _order: readonly string[] = [];
  /** The row that holds the list's one Tab stop. */
  private _current: string | null = null;
  private _selected: string | null = null;
  private _filter: IListFilter = NO_FILTER;
  private _state: IJobsState | null = null;
  private readonly _noMatch: HTMLElement;
  /** Search, phase filter and Delete ended… (`listfilter.ts`). */
  readonly filterBar: ListFilterBar;

  constructor(
    /** Open a job: a click previews it, a double-click (`keep`) opens it in a tab of its own. */
    private readonly _open: (name: string, keep?: boolean) => void,
    private readonly _announce: (text: string) => void = () => undefined,
    /** Delete these ended jobs, asking first (`bulkdelete.ts`). */
    deleteEnded: (names: string[]) => void = () => undefined
  ) {
    this.filterBar = new ListFilterBar(
      filter => this.setFilter(filter),
      () => deleteEnded(this.endedShown())
    );
    this._noMatch = h(
      'p',
      { className: 'pn-empty', 'data-testid': 'paddle-no-match', hidden: true },
      __('No job matches the search.')
    );
    this._list = h('ul', {
      className: 'pn-job-list',
      'data-testid': 'paddle-job-list',
      role: 'listbox',
      'aria-label': __('Paddle jobs')
    });
    this._empty = h(
      'div',
      { className: 'pn-empty', 'data-testid': 'paddle-empty', hidden: true },
      h('p', {}, __('No jobs yet.')),
      h(
        'p',
        {},
        __(
          'Submit one with the + button above, with %1 in a notebook, or with %2 in a terminal. It appears here without a reload.',
          '%%paddle_submit',
          'paddle-nbext submit'
        )
      )
    );
    this._loading = h(
      'div',
      { className: 'pn-loading', 'data-testid': 'paddle-loading' },
      __('Loading jobs…')
    );
    this.node = h(
      'div',
      { className: 'pn-list-view' },
      this.filterBar.node,
      this._loading,
      this._empty,
      this._noMatch,
      this._list
    );
    this._list.addEventListener('click', event => {
      const row = (event.target as Element).closest('[data-job]');
      if (row) {
        const name = row.getAttribute('data-job')!;
        this._setCurrent(name, false);
        this._open(name);
      }
    });
    this._list.addEventListener('dblclick', event => {
      const row = (event.target as Element).closest('[data-job]');
      if (row) {
        this._open(row.getAttribute('data-job')!, true);
      }
    });
    this._list.addEventListener('keydown', event => this._onKey(event));
  }

  /** The job whose view is in front (`aria-selected`). */
  setSelected(name: string | null): void {
    if (name === this._selected) {
      return;
    }
    if (this._selected) {
      this._rows.get(this._selected)?.node.setAttribute('aria-selected', 'false');
    }
    this._selected = name;
    if (name) {
      this._rows.get(name)?.node.setAttribute('aria-selected', 'true');
      this._setCurrent(name, false);
    }
  }

  /** Put keyboard focus on a job's row (coming back from its view). */
  focusRow(name: string): boolean {
    const row = this._rows.get(name);
    if (!row) {
      return false;
    }
    this._setCurrent(name, true);
    return true;
  }

  /** Show only the jobs that match (`listfilter.ts`); the others' rows are hidden, not dropped. */
  setFilter(filter: IListFilter): void {
    this._filter = filter;
    this._applyFilter();
  }

  /** The ended jobs the list shows under its filter, in its order (what Delete ended… deletes). */
  endedShown(): string[] {
    return this._shownOrder().filter(name => {
      const job = this._rows.get(name)?.job;
      return job !== undefined && TERMINAL_PHASES.has(job.phase);
    });
  }

  private _shownOrder(): string[] {
    return this._order.filter(name => {
      const row = this._rows.get(name);
      return row !== undefined && jobMatches(row.job, this._filter);
    });
  }

  private _applyFilter(): void {
    let shown = 0;
    for (const row of this._rows.values()) {
      const match = jobMatches(row.job, this._filter);
      if (row.node.hidden === match) {
        row.node.hidden = !match;
      }
      shown += match ? 1 : 0;
    }
    this._noMatch.hidden = !this._state?.loaded || this._rows.size === 0 || shown > 0;
    this.filterBar.deleteEnded.disabled = this.endedShown().length === 0;
  }

  /** Bring the DOM in line with the state, touching only rows whose job changed. */
  update(state: IJobsState): void {
    this._state = state;
    this._loading.hidden = state.loaded || state.problem !== null;
    this._empty.hidden = !state.loaded || state.order.length > 0;
    const now = Date.now();
    for (const [name, row] of this._rows) {
      if (!state.jobs.has(name)) {
        row.node.remove();
        this._rows.delete(name);
        if (this._current === name) {
          this._current = null;
        }
      }
    }
    for (const name of state.order) {
      const job = state.jobs.get(name)!;
      const row = this._rows.get(name);
      if (!row) {
        this._rows.set(name, this._createRow(job, now));
      } else if (row.job !== job) {
        const fresh = this._createRow(job, now);
        const hadFocus = row.node === document.activeElement;
        row.node.replaceWith(fresh.node);
        this._rows.set(name, fresh);
        if (hadFocus) {
          fresh.node.focus();
        }
        if (row.job.phase !== job.phase) {
          this._announce(__('Job %1 is now %2', name, job.phase));
        }
      }
    }
    if (state.order !== this._order || this._list.childElementCount !== state.order.length) {
      this._reorder(state.order);
      this._order = state.order;
    }
    if (this._current === null && state.order.length) {
      this._setCurrent(state.order[0], false);
    }
    this._applyFilter();
  }

  private _reorder(order: readonly string[]): void {
    let cursor = this._list.firstElementChild;
    const fragment = document.createDocumentFragment();
    if (!cursor) {
      for (const name of order) {
        fragment.appendChild(this._rows.get(name)!.node);
      }
      this._list.appendChild(fragment);
      return;
    }
    for (const name of order) {
      const node = this._rows.get(name)!.node;
      if (cursor === node) {
        cursor = cursor.nextElementSibling;
      } else {
        this._list.insertBefore(node, cursor);
      }
    }
  }

  /** Refresh the age column (called on a timer). */
  tick(): void {
    const now = Date.now();
    for (const row of this._rows.values()) {
      const text = formatAge(row.job.created, now);
      if (row.age.textContent !== text) {
        row.age.textContent = text;
      }
    }
  }

  private _onKey(event: KeyboardEvent): void {
    const row = (event.target as Element).closest('[data-job]');
    if (!row) {
      return;
    }
    const name = row.getAttribute('data-job')!;
    const order = this._shownOrder(); // the arrows skip rows the filter hides
    const at = order.indexOf(name);
    let next: string | undefined;
    switch (event.key) {
      case 'Enter':
      case ' ':
        event.preventDefault();
        this._open(name);
        return;
      case 'ArrowDown':
        next = order[Math.min(order.length - 1, at + 1)];
        break;
      case 'ArrowUp':
        next = order[Math.max(0, at - 1)];
        break;
      case 'Home':
        next = order[0];
        break;
      case 'End':
        next = order[order.length - 1];
        break;
      default:
        return;
    }
    event.preventDefault();
    if (next) {
      this._setCurrent(next, true);
    }
  }

  private _setCurrent(name: string, focus: boolean): void {
    if (this._current !== name) {
      if (this._current) {
        this._rows.get(this._current)?.node.setAttribute('tabindex', '-1');
      }
      this._current = name;
    }
    const row = this._rows.get(name);
    if (row) {
      row.node.setAttribute('tabindex', '0');
      if (focus) {
        row.node.focus();
        row.node.scrollIntoView({ block: 'nearest' });
      }
    }
  }

  private _createRow(job: IJobStatus, now: number): IRow {
    const summaries = roleSummaries(job);
    const summary = countsText(job);
    const phase = shownPhase(job);
    const age = h(
      'span',
      { className: 'pn-age', title: absoluteTime(job.created) },
      formatAge(job.created, now)
    );
    const node = h(
      'li',
      {
        className: 'pn-job-row',
        'data-testid': 'paddle-job-row',
        'data-job': job.name,
        'data-phase': job.phase,
        id: `pn-job-row-${job.name}`,
        role: 'option',
        tabindex: job.name === this._current ? 0 : -1,
        'aria-selected': job.name === this._selected ? 'true' : 'false',
        'aria-label': [job.name, phase, summary, __('created %1 ago', formatAge(job.created, now))]
          .filter(Boolean)
          .join(', '),
        title: job.message ? `${job.name}: ${job.message}` : job.name
      },
      h(
        'div',
        { className: 'pn-row-top' },
        h('span', { className: 'pn-job-name', title: job.name }, job.name),
        h(
          'span',
          { className: `pn-badge ${phaseClass(phase)}`, 'data-testid': 'paddle-job-phase' },
          phase
        )
      ),
      h(
        'div',
        { className: 'pn-row-bottom' },
        h(
          'span',
          { className: 'pn-counts', title: summary },
          ...summaries.map(({ role, text, tone, title }) =>
            h(
              'span',
              { className: 'pn-count', 'data-role': role, 'data-tone': tone, title },
              ...countPhrases(text).flatMap((phrase, n) => [
                ...(n ? [' '] : []),
                h('span', { className: 'pn-count-phrase' }, phrase)
              ])
            )
          )
        ),
        age
      )
    );
    return { job, node, age };
  }
}
