import { describe, expect, it } from 'vitest';

import { jobMatches } from '../views/listfilter';
import { job } from './fixtures';

describe('the list filter', () => {
  it('matches any part of the name in any case, and the phase groups', () => {
    const failed = job('Resnet-Sweep-3', { phase: 'Failed' });
    expect(jobMatches(failed, { text: 'sweep', phase: '' })).toBe(true);
    expect(jobMatches(failed, { text: 'mnist', phase: '' })).toBe(false);
    expect(jobMatches(failed, { text: '', phase: 'ended' })).toBe(true);
    expect(jobMatches(failed, { text: '', phase: 'active' })).toBe(false);
    expect(jobMatches(failed, { text: '', phase: 'Failed' })).toBe(true);
    expect(jobMatches(job('x'), { text: ' ', phase: 'active' })).toBe(true);
  });
});
