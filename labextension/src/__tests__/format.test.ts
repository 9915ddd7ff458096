import { describe, expect, it } from 'vitest';

import {
  countsText,
  formatAge,
  formatDuration,
  replicaReason,
  roleSummaries
} from '../logic/format';
import { IRoleCounts } from '../api/types';
import { IReplica } from '../api/types';
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

function counts(desired: number, c: Partial<IRoleCounts> = {}): IRoleCounts {
  return { desired, pending: 0, running: 0, succeeded: 0, failed: 0, stopped: 0, ...c };
}

describe('replica counts in words', () => {
  it('while active: running/desired per role, pservers first, with what already ended', () => {
    expect(countsText(job('a'))).toBe('pserver 1/1 running · trainers 1/2 running, 1 succeeded');
    const summaries = roleSummaries(job('a'));
    expect(summaries.map(s => s.role)).toEqual(['pserver', 'trainer']);
    expect(summaries.map(s => s.tone)).toEqual(['active', 'active']);
    expect(summaries[1].title).toBe(
      '2 trainers wanted, 0 pending, 1 running, 1 succeeded, 0 failed, 0 stopped'
    );
  });

  it('a pending job shows nothing running yet', () => {
    const pending = job('p', { phase: 'Pending', roles: { trainer: counts(2, { pending: 2 }) } });
    expect(countsText(pending)).toBe('trainers 0/2 running');
  });

  it('a succeeded PS job: trainers succeeded, pservers finished (not a failure)', () => {
    const done = job('s', {
      phase: 'Succeeded',
      roles: { trainer: counts(2, { succeeded: 2 }), pserver: counts(1, { stopped: 1 }) }
    });
    expect(countsText(done)).toBe('pserver 1/1 finished · trainers 2/2 succeeded');
    expect(roleSummaries(done).map(s => s.tone)).toEqual(['ok', 'ok']);
  });

  it('a failed job says how many failed', () => {
    const failed = job('f', {
      phase: 'Failed',
      roles: { trainer: counts(2, { succeeded: 1, failed: 1 }), pserver: counts(2, { stopped: 2 }) }
    });
    expect(countsText(failed)).toBe('pservers 2/2 stopped · trainers 1/2 succeeded, 1 failed');
    expect(roleSummaries(failed).map(s => s.tone)).toEqual(['neutral', 'bad']);
    const allFailed = job('g', { phase: 'Failed', roles: { trainer: counts(1, { failed: 1 }) } });
    expect(countsText(allFailed)).toBe('trainer 1/1 failed');
  });

  it('a cancelled job: stopped, and replicas that never ran say so', () => {
    const cancelled = job('x', {
      phase: 'Cancelled',
      roles: { trainer: counts(3, { stopped: 2, pending: 1 }) }
    });
    expect(countsText(cancelled)).toBe('trainers 2/3 stopped, 1 never started');
    expect(roleSummaries(cancelled)[0].tone).toBe('neutral');
  });

  it('a failure while running is flagged at once', () => {
    const running = job('r', { roles: { trainer: counts(4, { running: 3, failed: 1 }) } });
    expect(countsText(running)).toBe('trainers 3/4 running, 1 failed');
    expect(roleSummaries(running)[0].tone).toBe('bad');
  });

  it('an ended job whose replicas were all cleaned up falls back to the bare figure', () => {
    expect(countsText(job('e', { phase: 'Succeeded', roles: { trainer: counts(2) } }))).toBe(
      'trainers 0/2'
    );
  });
});

describe('replica reasons in words', () => {
  const base: IReplica = {
    role: 'trainer',
    index: 0,
    phase: 'Running',
    reason: null,
    exit_code: null,
    restarts: 0,
    started: null,
    finished: null
  };
  it('prefers the server reason', () => {
    expect(replicaReason({ ...base, phase: 'Failed', reason: 'OOMKilled', exit_code: 137 })).toBe(
      'OOMKilled'
    );
    expect(
      replicaReason({
        ...base,
        phase: 'Pending',
        reason: 'Unschedulable: 0/3 nodes have enough nvidia.com/gpu'
      })
    ).toContain('Unschedulable');
  });
  it('explains the phase otherwise', () => {
    expect(replicaReason({ ...base, phase: 'Failed', exit_code: 3 })).toBe('Exit code 3');
    expect(replicaReason({ ...base, phase: 'Pending' })).toBe('Waiting to start');
    expect(replicaReason({ ...base, phase: 'Stopped' })).toMatch(/Stopped by the job runner/);
    expect(replicaReason({ ...base, role: 'pserver', phase: 'Stopped' }, 'Succeeded')).toBe(
      'Stopped by the job runner once the trainers finished'
    );
    expect(replicaReason({ ...base, restarts: 2 })).toBe('Training (restarted 2×)');
    expect(replicaReason({ ...base })).toBe('Training');
    expect(replicaReason({ ...base, role: 'pserver' })).toBe('Serving parameters');
    expect(replicaReason({ ...base, phase: 'Stopped' }, 'Cancelled')).toBe(
      'Stopped: the job was cancelled'
    );
  });
});
