import { describe, expect, it } from 'vitest';

import { countsText } from '../logic/format';
import { REPORT_HINT_SECONDS, TrainingClock, metricsWaitText } from '../logic/metricswait';
import { isPreparing, shownPhase } from '../logic/preparing';
import { job } from './fixtures';

const T0 = Date.parse('2026-11-29T16:00:01.000Z');
const PREPARING = 'Preparing environment: 12 packages (uv)';

describe('a job building its environment', () => {
  it('shows Preparing and "preparing" counts, not Running', () => {
    const preparing = job('a', { message: PREPARING });
    expect(isPreparing(preparing)).toBe(true);
    expect(shownPhase(preparing)).toBe('Preparing');
    expect(countsText(preparing)).toBe(
      'pserver 1/1 preparing · trainers 1/2 preparing, 1 succeeded'
    );
    expect(shownPhase(job('b'))).toBe('Running');
    // An ended job's message is its end, whatever words it keeps.
    expect(isPreparing(job('c', { phase: 'Failed', message: PREPARING }))).toBe(false);
  });
});

describe('the Training section with no metrics', () => {
  it('waits for the environment, then for the first report(), then hints at report()', () => {
    expect(metricsWaitText(job('p', { phase: 'Pending' }), null, T0)).toMatch(/not started/);
    expect(metricsWaitText(job('e', { message: PREPARING }), null, T0)).toBe(
      'No metrics yet: training starts once the environment is prepared.'
    );
    const running = job('r');
    expect(metricsWaitText(running, T0, T0 + 5000)).toBe('Waiting for the first report()…');
    const late = metricsWaitText(running, T0, T0 + REPORT_HINT_SECONDS * 1000);
    expect(late).toMatch(/^No report\(\) after 2m of training\. Call report\(step/);
    expect(metricsWaitText(job('f', { phase: 'Succeeded' }), T0, T0)).toMatch(
      /^This job reported no metrics\. Call report\(/
    );
  });

  it('counts training from the end of the preparation it saw, else from the job start', () => {
    const clock = new TrainingClock();
    expect(clock.update(job('x', { message: PREPARING }), T0 + 1000)).toBeNull();
    expect(clock.update(job('x'), T0 + 90_000)).toBe(T0 + 90_000);
    expect(clock.update(job('x'), T0 + 95_000)).toBe(T0 + 90_000);
    expect(new TrainingClock().update(job('y'), T0 + 90_000)).toBe(T0);
  });
});
