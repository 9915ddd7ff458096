import { describe, expect, it } from 'vitest';

import type { INotificationChannel } from '../api/types';
import { jobFromLink } from '../logic/joblink';
import { channelWords } from '../logic/notifywords';

const base: INotificationChannel = {
  available: true,
  set: true,
  ok: null,
  last_error: null,
  failing_since: null,
  gave_up: false,
  last_attempt: null,
  last_delivered: null,
  pending: 0
};

describe('a notification channel in words', () => {
  it('says when the admin does not offer it, or the user has not set it up', () => {
    expect(channelWords({ ...base, available: false, set: false })).toEqual({
      state: 'off',
      text: 'Not offered on this server (ask your admin).'
    });
    expect(channelWords({ ...base, set: false }).state).toBe('unset');
    expect(channelWords(base)).toEqual({ state: 'idle', text: 'Nothing sent yet.' });
  });

  it("quotes a failing channel's error, since when, and what waits", () => {
    const words = channelWords({
      ...base,
      ok: false,
      last_error: 'the receiver answered 500 Internal Server Error (attempt 3; next in 20 s)',
      failing_since: 'not a time',
      pending: 2
    });
    expect(words.state).toBe('failing');
    expect(words.text).toBe(
      'Failing since not a time: the receiver answered 500 Internal Server Error (attempt 3; next in 20 s) 2 waiting.'
    );
  });

  it('says a message was given up, and a delivery that worked', () => {
    const gaveUp = channelWords({
      ...base,
      ok: false,
      gave_up: true,
      last_error: 'the receiver answered 404 Not Found'
    });
    expect(gaveUp).toEqual({
      state: 'gave-up',
      text: 'Given up: the receiver answered 404 Not Found'
    });
    const ok = channelWords({ ...base, ok: true, last_delivered: '2026-12-07T03:14:00.000Z' });
    expect(ok.state).toBe('ok');
    expect(ok.text).toMatch(/^Delivered .+\.$/);
  });
});

describe("a notification's link", () => {
  it('names the job to open', () => {
    expect(jobFromLink('?paddle-job=bert-3')).toBe('bert-3');
    expect(jobFromLink('?reset&paddle-job=a%2Db')).toBe('a-b');
    expect(jobFromLink('?paddle-job=')).toBeNull();
    expect(jobFromLink('')).toBeNull();
  });
});
