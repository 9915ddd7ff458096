/**
 * Finding jobs in a long list: a search box (by name, any part, any case), a phase filter
 * (active, ended, or one phase) and "Delete ended…", which deletes the ended jobs shown after
 * one question.  Rendering 1,000 rows was already fast; what a user with hundreds of jobs
 * lacked was a way to find one and to clear out the ended ones.
 */
import { h } from './dom';
import { __ } from '../i18n';
import { IJobStatus, JOB_PHASES, TERMINAL_PHASES } from '../api/types';

export interface IListFilter {
  /** Part of the name, any case; '' matches every job. */
  text: string;
  /** '' (all), 'active', 'ended', or a phase. */
  phase: string;
}

export const NO_FILTER: IListFilter = { text: '', phase: '' };

/** Whether the job is shown under the filter. */
export function jobMatches(job: IJobStatus, filter: IListFilter): boolean {
  const text = filter.text.trim().toLowerCase();
  if (text && !job.name.toLowerCase().includes(text)) {
    return false;
  }
  const ended = TERMINAL_PHASES.has(job.phase);
  switch (filter.phase) {
    case '':
      return true;
    case 'active':
      return !ended;
    case 'ended':
      return ended;
    default:
      return job.phase === filter.phase;
  }
}

/** The search box, the phase filter and the Delete ended… button above the list. */
export class ListFilterBar {
  readonly node: HTMLElement;
  readonly search: HTMLInputElement;
  readonly phase: HTMLSelectElement;
  readonly deleteEnded: HTMLButtonElement;

  constructor(changed: (filter: IListFilter) => void, deleteEnded: () => void) {
    this.search = h('input', {
      type: 'search',
      className: 'pn-input pn-list-search',
      placeholder: __('Search jobs'),
      'aria-label': __('Search jobs by name'),
      'data-testid': 'paddle-list-search'
    });
    this.phase = h(
      'select',
      {
        className: 'pn-input pn-list-phase',
        'aria-label': __('Show jobs by phase'),
        'data-testid': 'paddle-list-phase'
      },
      h('option', { value: '' }, __('All')),
      h('option', { value: 'active' }, __('Active')),
      h('option', { value: 'ended' }, __('Ended')),
      ...JOB_PHASES.map(phase => h('option', { value: phase }, phase))
    );
    this.deleteEnded = h(
      'button',
      {
        type: 'button',
        className: 'pn-button pn-small pn-danger',
        title: __('Delete the ended jobs shown (asks first)'),
        'data-testid': 'paddle-delete-ended'
      },
      __('Delete ended…')
    );
    const emit = (): void => changed(this.filter);
    this.search.addEventListener('input', emit);
    this.phase.addEventListener('change', emit);
    this.deleteEnded.addEventListener('click', deleteEnded);
    this.node = h(
      'div',
      { className: 'pn-list-filter', role: 'search' },
      this.search,
      this.phase,
      this.deleteEnded
    );
  }

  get filter(): IListFilter {
    return { text: this.search.value, phase: this.phase.value };
  }
}
