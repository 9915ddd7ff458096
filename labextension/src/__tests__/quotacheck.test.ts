import { afterEach, describe, expect, it, vi } from 'vitest';

import { IDryRun, IQuotaCheck } from '../api/types';
import { QUOTA_CHECK_DELAY, QuotaCheck, STALE, checksQuota, quotaNote } from '../logic/quota';
import { job } from './fixtures';

const WAITS: IQuotaCheck = {
  verdict: 'waits',
  words: 'This job needs 8 CPU; free now: 4 CPU — it will wait.',
  need: { cpu: '8' },
  bounds: [{ resource: 'cpu', source: 'ResourceQuota team-a', limit: '16', free: '4' }],
  field: null,
  unknown: []
};
const NEVER: IQuotaCheck = {
  ...WAITS,
  verdict: 'never',
  words: 'This job needs 32 CPU — it can never run: ResourceQuota team-a has at most 16 CPU.',
  field: 'trainers'
};

/** A dry run answering `quota` (none: a backend that checks no quota). */
function answer(quota?: IQuotaCheck): () => Promise<IDryRun> {
  return () => Promise.resolve({ dry_run: true, job: job('x'), plan: {}, quota });
}

/** A dry run that answers only when `release` is called. */
function held(quota: IQuotaCheck): { dryRun: () => Promise<IDryRun>; release: () => void } {
  let release = (): void => undefined;
  const reply = new Promise<IDryRun>(resolve => {
    release = () => resolve({ dry_run: true, job: job('x'), plan: {}, quota });
  });
  return { dryRun: () => reply, release: () => release() };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('the quota line reads the dry run', () => {
  it('asks only a backend that checks quota', () => {
    expect(checksQuota({ name: 'kubernetes', ok: true, error: null, quota_check: true })).toBe(
      true
    );
    expect(checksQuota({ name: 'local', ok: true, error: null })).toBe(false);
    expect(checksQuota(null)).toBe(false);
  });

  it('says the server’s sentence at its level, unknown for a level it does not know', () => {
    expect(quotaNote(undefined)).toBeNull();
    expect(quotaNote({ ...WAITS, words: '' })).toBeNull();
    expect(quotaNote(WAITS)).toEqual({ text: WAITS.words, level: 'waits' });
    expect(quotaNote({ ...WAITS, verdict: 'later' as IQuotaCheck['verdict'] })?.level).toBe(
      'unknown'
    );
  });
});

describe('QuotaCheck: when to ask, and which answer counts', () => {
  it('asks once, a moment after the last of several quick edits', () => {
    vi.useFakeTimers();
    const check = new QuotaCheck();
    check.enabled = true;
    const run = vi.fn();
    check.schedule(run);
    vi.advanceTimersByTime(QUOTA_CHECK_DELAY / 2);
    check.clear();
    check.schedule(run);
    vi.advanceTimersByTime(QUOTA_CHECK_DELAY - 1);
    expect(run).not.toHaveBeenCalled();
    vi.advanceTimersByTime(1);
    expect(run).toHaveBeenCalledTimes(1);
  });

  it('never schedules for a backend that checks no quota, and a cancelled question stays unasked', () => {
    vi.useFakeTimers();
    const check = new QuotaCheck();
    const run = vi.fn();
    check.schedule(run);
    vi.advanceTimersByTime(QUOTA_CHECK_DELAY * 2);
    expect(run).not.toHaveBeenCalled();
    check.enabled = true;
    check.schedule(run);
    check.cancelTimer();
    vi.advanceTimersByTime(QUOTA_CHECK_DELAY * 2);
    expect(run).not.toHaveBeenCalled();
  });

  it('keeps the verdict: a job that can never run blocks Submit until the values change', async () => {
    const check = new QuotaCheck();
    expect(check.verdict).toBeNull();
    expect(await check.ask(answer(WAITS))).toEqual({ text: WAITS.words, level: 'waits' });
    expect(check.blocksSubmit).toBe(false);
    expect(await check.ask(answer(NEVER))).toEqual({ text: NEVER.words, level: 'never' });
    expect(check.verdict).toBe('never');
    expect(check.blocksSubmit).toBe(true);
    check.clear();
    expect(check.verdict).toBeNull();
    expect(check.blocksSubmit).toBe(false);
  });

  it('says nothing when the dry run has no check or fails', async () => {
    const check = new QuotaCheck();
    await check.ask(answer(NEVER));
    expect(await check.ask(answer(undefined))).toBeNull();
    expect(check.verdict).toBeNull();
    await check.ask(answer(NEVER));
    expect(await check.ask(() => Promise.reject(new Error('503')))).toBeNull();
    expect(check.blocksSubmit).toBe(false);
  });

  it('drops an answer about values edited while it was on its way', async () => {
    const check = new QuotaCheck();
    const slow = held(NEVER);
    const asking = check.ask(slow.dryRun);
    check.clear();
    slow.release();
    expect(await asking).toBe(STALE);
    expect(check.verdict).toBeNull();
  });

  it('drops an older answer once a newer question was asked', async () => {
    const check = new QuotaCheck();
    const slow = held(NEVER);
    const first = check.ask(slow.dryRun);
    expect(await check.ask(answer(WAITS))).toEqual({ text: WAITS.words, level: 'waits' });
    slow.release();
    expect(await first).toBe(STALE);
    expect(check.verdict).toBe('waits');
  });
});
