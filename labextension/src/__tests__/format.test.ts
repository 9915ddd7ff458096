import { describe, expect, it } from 'vitest';

import { countsText, formatAge, formatDuration, replicaReason, roleCounts } from '../format';
import { IReplica } from '../types';
import { job } from './fixtures';

const T0 = Date.parse('2026-11-29T16:00:00.000Z');

describe('age', () => {
  it.each([
    [0, '0s'],
    [59, '59s'],
    [60, '1m'],
    [3599, '59m'],
    [3600, '1h'],
    [3600 + 5 * 60, '1h 5m'],
    [86400, '1d'],
    [86400 * 3 + 4 * 3600, '3d 4h']
  ])('%i seconds is %s', (seconds, text) => {
    expect(formatAge('2026-11-29T16:00:00.000Z', T0 + seconds * 1000)).toBe(text);
  });

  it('clock skew never shows a negative age; missing times show nothing', () => {
    expect(formatAge('2026-11-29T16:00:10.000Z', T0)).toBe('0s');
    expect(formatAge(null, T0)).toBe('');
    expect(formatAge('not a time', T0)).toBe('');
  });

  it('durations', () => {
    expect(formatDuration('2026-11-29T16:00:00Z', '2026-11-29T16:01:05Z')).toBe('1m 5s');
    expect(formatDuration('2026-11-29T16:00:00Z', null)).toBe('');
  });
});

describe('replica counts', () => {
  it('running/total per role, pservers first', () => {
    expect(roleCounts(job('a'))).toEqual([
      { role: 'pserver', running: 1, total: 1 },
      { role: 'trainer', running: 1, total: 2 }
    ]);
    expect(countsText(job('a'))).toBe('pserver 1/1 · trainer 1/2');
  });

  it('collective jobs have only trainers', () => {
    const collective = job('c', { roles: { trainer: { desired: 4, pending: 1, running: 3, succeeded: 0, failed: 0, stopped: 0 } } });
    expect(countsText(collective)).toBe('trainer 3/4');
  });
});

describe('replica reasons in words', () => {
  const base: IReplica = { role: 'trainer', index: 0, phase: 'Running', reason: null, exit_code: null, restarts: 0, started: null, finished: null };
  it('prefers the server reason', () => {
    expect(replicaReason({ ...base, phase: 'Failed', reason: 'OOMKilled', exit_code: 137 })).toBe('OOMKilled');
    expect(replicaReason({ ...base, phase: 'Pending', reason: 'Unschedulable: 0/3 nodes have enough nvidia.com/gpu' })).toContain('Unschedulable');
  });
  it('explains the phase otherwise', () => {
    expect(replicaReason({ ...base, phase: 'Failed', exit_code: 3 })).toBe('Exit code 3');
    expect(replicaReason({ ...base, phase: 'Pending' })).toBe('Waiting to start');
    expect(replicaReason({ ...base, phase: 'Stopped' })).toMatch(/Stopped by the job runner/);
    expect(replicaReason({ ...base, restarts: 2 })).toBe('Running (restarted 2×)');
  });
});
