/**
 * The job list: one row per job (name, phase badge, replica counts in words per role, age).
 *
 * Rows are keyed by job name and redrawn only when the job's status object changed, so an
 * event touches one row even with 1,000 jobs.
 */
import { Child, h } from './dom';
import { formatAge, phaseClass, roleSummaries } from './format';
import { IJobsState } from './state';
import { IJobStatus } from './types';

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

  constructor(private readonly _open: (name: string) => void) {
    this._list = h('ul', { className: 'pn-job-list', 'data-testid': 'paddle-job-list' });
    this._empty = h(
      'div',
      { className: 'pn-empty', 'data-testid': 'paddle-empty', hidden: true },
      h('p', {}, 'No jobs yet.'),
      h(
        'p',
        {},
        'Submit one with “New job” above, with %%paddle_submit in a notebook, ' +
          'or with paddle-nbext submit in a terminal. It appears here without a reload.'
      )
    );
    this._loading = h(
      'div',
      { className: 'pn-loading', 'data-testid': 'paddle-loading' },
      'Loading jobs…'
    );
    this.node = h('div', { className: 'pn-list-view' }, this._loading, this._empty, this._list);
    this._list.addEventListener('click', event => {
      const row = (event.target as Element).closest('[data-job]');
      if (row) {
        this._open(row.getAttribute('data-job')!);
      }
    });
    this._list.addEventListener('keydown', event => {
      const row = (event.target as Element).closest('[data-job]');
      if (row && (event.key === 'Enter' || event.key === ' ')) {
        event.preventDefault();
        this._open(row.getAttribute('data-job')!);
      }
    });
  }

  /** Bring the DOM in line with the state, touching only rows whose job changed. */
  update(state: IJobsState): void {
    this._loading.hidden = state.loaded || state.problem !== null;
    this._empty.hidden = !state.loaded || state.order.length > 0;
    const now = Date.now();
    for (const [name, row] of this._rows) {
      if (!state.jobs.has(name)) {
        row.node.remove();
        this._rows.delete(name);
      }
    }
    for (const name of state.order) {
      const job = state.jobs.get(name)!;
      const row = this._rows.get(name);
      if (!row) {
        this._rows.set(name, this._createRow(job, now));
      } else if (row.job !== job) {
        const fresh = this._createRow(job, now);
        row.node.replaceWith(fresh.node);
        this._rows.set(name, fresh);
      }
    }
    if (state.order !== this._order || this._list.childElementCount !== state.order.length) {
      this._reorder(state.order);
      this._order = state.order;
    }
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

  private _createRow(job: IJobStatus, now: number): IRow {
    const counts: Child[] = roleSummaries(job).map(({ role, text, tone, title }) =>
      h('span', { className: 'pn-count', 'data-role': role, 'data-tone': tone, title }, text)
    );
    const age = h('span', { className: 'pn-age', title: job.created }, formatAge(job.created, now));
    const node = h(
      'li',
      {
        className: 'pn-job-row',
        'data-testid': 'paddle-job-row',
        'data-job': job.name,
        'data-phase': job.phase,
        tabindex: 0,
        role: 'button',
        title: job.message || job.phase
      },
      h(
        'div',
        { className: 'pn-row-top' },
        h('span', { className: 'pn-job-name' }, job.name),
        h(
          'span',
          { className: `pn-badge ${phaseClass(job.phase)}`, 'data-testid': 'paddle-job-phase' },
          job.phase
        )
      ),
      h(
        'div',
        { className: 'pn-row-bottom' },
        h('span', { className: 'pn-counts' }, ...counts),
        age
      )
    );
    return { job, node, age };
  }
}
