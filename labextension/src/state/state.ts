/**
 * The panel's job list as a pure reducer over the `/events` stream (`snapshot`, `job`,
 * `deleted`, `resync`) and the fallback poll.
 *
 * Pure so it can be unit tested and so the view can diff by object identity: a job whose
 * status object did not change keeps its row untouched, which keeps 1,000-job lists cheap.
 */
import { IJobStatus, TERMINAL_PHASES } from '../api/types';

/** Why the list may be stale or empty: the view shows it as a banner in words. */
export interface IProblem {
  kind: 'missing' | 'unreachable' | 'error';
  message: string;
}

export type Connection = 'connecting' | 'live' | 'polling' | 'stopped';

export interface IJobsState {
  /** Jobs by name. */
  readonly jobs: ReadonlyMap<string, IJobStatus>;
  /** Names, newest first (by `created`, then name for a stable order). */
  readonly order: readonly string[];
  /** True once a snapshot (stream or poll) arrived. */
  readonly loaded: boolean;
  readonly connection: Connection;
  readonly problem: IProblem | null;
  /** Set by `resync`: the controller must reload the whole list. */
  readonly needsReload: boolean;
}

export type Action =
  | { type: 'snapshot'; jobs: IJobStatus[] }
  | { type: 'job'; job: IJobStatus }
  | { type: 'deleted'; name: string }
  | { type: 'resync' }
  | { type: 'connection'; connection: Connection }
  | { type: 'problem'; problem: IProblem | null };

export const initialState: IJobsState = {
  jobs: new Map(),
  order: [],
  loaded: false,
  connection: 'connecting',
  problem: null,
  needsReload: false
};

/** Newest first; ties broken by name so the order never flickers. */
export function compareJobs(a: IJobStatus, b: IJobStatus): number {
  if (a.created !== b.created) {
    return a.created < b.created ? 1 : -1;
  }
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

function insertOrdered(
  order: readonly string[],
  jobs: ReadonlyMap<string, IJobStatus>,
  job: IJobStatus
): string[] {
  let low = 0;
  let high = order.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (compareJobs(jobs.get(order[mid])!, job) < 0) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  const next = order.slice();
  next.splice(low, 0, job.name);
  return next;
}

export function reduce(state: IJobsState, action: Action): IJobsState {
  switch (action.type) {
    case 'snapshot': {
      const jobs = new Map<string, IJobStatus>();
      for (const job of action.jobs) {
        const previous = state.jobs.get(job.name);
        // Keep the old object when nothing changed so its row is not redrawn.
        jobs.set(
          job.name,
          previous && JSON.stringify(previous) === JSON.stringify(job) ? previous : job
        );
      }
      const order = [...jobs.values()].sort(compareJobs).map(job => job.name);
      return { ...state, jobs, order, loaded: true, needsReload: false };
    }
    case 'job': {
      const job = action.job;
      const jobs = new Map(state.jobs);
      const previous = jobs.get(job.name);
      jobs.set(job.name, job);
      let order = state.order as string[];
      if (!previous) {
        order = insertOrdered(state.order, state.jobs, job);
      } else if (previous.created !== job.created) {
        order = insertOrdered(
          state.order.filter(name => name !== job.name),
          state.jobs,
          job
        );
      }
      return { ...state, jobs, order };
    }
    case 'deleted': {
      if (!state.jobs.has(action.name)) {
        return state;
      }
      const jobs = new Map(state.jobs);
      jobs.delete(action.name);
      return { ...state, jobs, order: state.order.filter(name => name !== action.name) };
    }
    case 'resync':
      return { ...state, needsReload: true };
    case 'connection':
      return state.connection === action.connection
        ? state
        : { ...state, connection: action.connection };
    case 'problem':
      return { ...state, problem: action.problem };
  }
}

/** A job that just reached Succeeded or Failed (what notifications announce). */
export interface ITransition {
  name: string;
  phase: string;
  message: string;
}

/**
 * Jobs whose phase went from a known non-terminal phase to Succeeded or Failed between two
 * states.  Jobs first seen already finished (page load, reconnect) are not announced.
 */
export function finishedJobs(before: IJobsState, after: IJobsState): ITransition[] {
  const out: ITransition[] = [];
  if (before.jobs === after.jobs) {
    return out;
  }
  for (const [name, job] of after.jobs) {
    const previous = before.jobs.get(name);
    if (
      previous &&
      previous !== job &&
      !TERMINAL_PHASES.has(previous.phase) &&
      (job.phase === 'Succeeded' || job.phase === 'Failed')
    ) {
      out.push({ name, phase: job.phase, message: job.message });
    }
  }
  return out;
}
