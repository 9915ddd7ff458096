// @vitest-environment happy-dom
/// <reference types="node" />
/**
 * A job row says its replica summary whole: the words the notebook uses
 * (tests/vectors/replica_words.json), split only into phrases a narrow sidebar may wrap between,
 * never cut ("trainers 1/2 succeeded, 1 failed" once read "trainers 1/…" at 250 px; the browser
 * suite checks the layout, tests/browser/test_workspace.py::test_sidebar_list_fits).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { countsText } from '../logic/format';
import { JobListView, countPhrases } from '../views/listview';
import { initialState, reduce } from '../state/state';
import { IJobStatus, IRoleCounts } from '../api/types';
import { job } from './fixtures';

const WORDS = JSON.parse(
  readFileSync(join(__dirname, '..', '..', '..', 'tests', 'vectors', 'replica_words.json'), 'utf-8')
) as { cases: Array<{ phase: string; roles: { [role: string]: IRoleCounts }; text: string }> };

/** The row the list draws for `status`. */
function row(status: IJobStatus): HTMLElement {
  const list = new JobListView(() => undefined);
  list.update(reduce({ ...initialState }, { type: 'snapshot', jobs: [status] }));
  return list.node.querySelector<HTMLElement>('[data-testid="paddle-job-row"]')!;
}

const ONE_OF_TWO = job('one-of-two', {
  phase: 'Failed',
  roles: {
    pserver: { desired: 1, pending: 0, running: 0, succeeded: 0, failed: 0, stopped: 1 },
    trainer: { desired: 2, pending: 0, running: 0, succeeded: 1, failed: 1, stopped: 0 }
  }
});

describe('the job row says its summary whole', () => {
  it('keeps the failed count of a job whose trainers succeeded and failed', () => {
    const trainers = row(ONE_OF_TWO).querySelector<HTMLElement>('.pn-count[data-role="trainer"]')!;
    expect(trainers.textContent).toBe('trainers 1/2 succeeded, 1 failed');
    expect([...trainers.querySelectorAll('.pn-count-phrase')].map(p => p.textContent)).toEqual([
      'trainers 1/2 succeeded,',
      '1 failed'
    ]);
    expect(trainers.getAttribute('data-tone')).toBe('bad');
    expect(trainers.title).toBe(
      '2 trainers wanted, 0 pending, 0 running, 1 succeeded, 1 failed, 0 stopped'
    );
  });

  it('says the whole summary to the list and to screen readers, with no ellipsis', () => {
    const node = row(ONE_OF_TWO);
    const summary = 'pserver 1/1 stopped · trainers 1/2 succeeded, 1 failed';
    expect(countsText(ONE_OF_TWO)).toBe(summary);
    expect(node.querySelector<HTMLElement>('.pn-counts')!.title).toBe(summary);
    expect(node.getAttribute('aria-label')).toContain(summary);
    expect(node.textContent).not.toContain('…');
    expect(node.querySelector('.pn-job-name')!.textContent).toBe('one-of-two');
  });

  it.each(WORDS.cases.map(c => [c.text, c] as const))('draws "%s" word for word', (text, c) => {
    const counts = [
      ...row(job('x', { phase: c.phase, roles: c.roles })).querySelectorAll('.pn-count')
    ];
    expect(counts.map(count => count.textContent).join(' · ')).toBe(text);
  });
});

describe('countPhrases', () => {
  it("splits a role's summary after its commas, keeping each count with its word", () => {
    expect(countPhrases('trainers 2/2 running')).toEqual(['trainers 2/2 running']);
    expect(countPhrases('trainers 1/4 succeeded, 2 failed, 1 stopped')).toEqual([
      'trainers 1/4 succeeded,',
      '2 failed,',
      '1 stopped'
    ]);
    expect(countPhrases('trainers 1/4 succeeded, 2 failed, 1 stopped').join(' ')).toBe(
      'trainers 1/4 succeeded, 2 failed, 1 stopped'
    );
  });
});
