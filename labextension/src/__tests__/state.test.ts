import { describe, expect, it } from 'vitest';

import { IJobsState, finishedJobs, initialState, reduce } from '../state/state';
import { job } from './fixtures';

function apply(state: IJobsState, ...actions: Parameters<typeof reduce>[1][]): IJobsState {
  return actions.reduce(reduce, state);
}

describe('job list reducer', () => {
  it('a snapshot replaces the list, newest first, and marks it loaded', () => {
    const state = apply(initialState, {
      type: 'snapshot',
      jobs: [
        job('old', { created: '2026-11-29T10:00:00.000Z' }),
        job('new', { created: '2026-11-29T12:00:00.000Z' }),
        job('mid', { created: '2026-11-29T11:00:00.000Z' })
      ]
    });
    expect(state.loaded).toBe(true);
    expect(state.order).toEqual(['new', 'mid', 'old']);
    const again = reduce(state, { type: 'snapshot', jobs: [job('only')] });
    expect(again.order).toEqual(['only']);
    expect(again.jobs.has('old')).toBe(false);
  });

  it('an empty snapshot is a loaded, empty list (the empty state)', () => {
    const state = reduce(initialState, { type: 'snapshot', jobs: [] });
    expect(state.loaded).toBe(true);
    expect(state.order).toEqual([]);
  });

  it('a snapshot keeps unchanged job objects so their rows are not redrawn', () => {
    const a = job('a');
    const first = reduce(initialState, { type: 'snapshot', jobs: [a, job('b')] });
    const second = reduce(first, {
      type: 'snapshot',
      jobs: [{ ...a }, job('b', { phase: 'Failed' })]
    });
    expect(second.jobs.get('a')).toBe(first.jobs.get('a'));
    expect(second.jobs.get('b')).not.toBe(first.jobs.get('b'));
    expect(second.jobs.get('b')!.phase).toBe('Failed');
  });

  it('a job event inserts a new job in order and updates a known one in place', () => {
    let state = reduce(initialState, {
      type: 'snapshot',
      jobs: [
        job('a', { created: '2026-11-29T10:00:00.000Z' }),
        job('c', { created: '2026-11-29T08:00:00.000Z' })
      ]
    });
    state = reduce(state, { type: 'job', job: job('b', { created: '2026-11-29T09:00:00.000Z' }) });
    expect(state.order).toEqual(['a', 'b', 'c']);
    state = reduce(state, { type: 'job', job: job('z', { created: '2026-11-30T00:00:00.000Z' }) });
    expect(state.order).toEqual(['z', 'a', 'b', 'c']);
    const order = state.order;
    state = reduce(state, {
      type: 'job',
      job: job('b', { created: '2026-11-29T09:00:00.000Z', phase: 'Succeeded' })
    });
    expect(state.order).toBe(order);
    expect(state.jobs.get('b')!.phase).toBe('Succeeded');
  });

  it('deleted removes the job; an unknown name changes nothing', () => {
    const state = reduce(initialState, { type: 'snapshot', jobs: [job('a'), job('b')] });
    const after = reduce(state, { type: 'deleted', name: 'a' });
    expect([...after.jobs.keys()]).toEqual(['b']);
    expect(after.order).toEqual(['b']);
    expect(reduce(after, { type: 'deleted', name: 'nope' })).toBe(after);
  });

  it('resync asks for a reload, which the next snapshot satisfies', () => {
    const state = reduce(initialState, { type: 'resync' });
    expect(state.needsReload).toBe(true);
    expect(reduce(state, { type: 'snapshot', jobs: [] }).needsReload).toBe(false);
  });

  it('problems and connection state are kept until replaced', () => {
    let state = reduce(initialState, {
      type: 'problem',
      problem: { kind: 'missing', message: 'not enabled' }
    });
    state = reduce(state, { type: 'snapshot', jobs: [] });
    expect(state.problem?.kind).toBe('missing');
    state = reduce(state, { type: 'connection', connection: 'polling' });
    expect(state.connection).toBe('polling');
    expect(reduce(state, { type: 'connection', connection: 'polling' })).toBe(state);
  });
});

describe('finished jobs (notifications)', () => {
  it('announces Running → Succeeded and Running → Failed, not Cancelled', () => {
    const before = reduce(initialState, { type: 'snapshot', jobs: [job('a'), job('b'), job('c')] });
    let after = reduce(before, {
      type: 'job',
      job: job('a', { phase: 'Succeeded', message: 'done' })
    });
    after = reduce(after, {
      type: 'job',
      job: job('b', { phase: 'Failed', message: 'trainer 0 exit code 3' })
    });
    after = reduce(after, { type: 'job', job: job('c', { phase: 'Cancelled' }) });
    expect(finishedJobs(before, after)).toEqual([
      { name: 'a', phase: 'Succeeded', message: 'done' },
      { name: 'b', phase: 'Failed', message: 'trainer 0 exit code 3' }
    ]);
  });

  it('does not announce jobs first seen finished, or finished again', () => {
    const loaded = reduce(initialState, {
      type: 'snapshot',
      jobs: [job('a', { phase: 'Succeeded' })]
    });
    expect(finishedJobs(initialState, loaded)).toEqual([]);
    const again = reduce(loaded, {
      type: 'job',
      job: job('a', { phase: 'Succeeded', message: 'x' })
    });
    expect(finishedJobs(loaded, again)).toEqual([]);
  });
});
