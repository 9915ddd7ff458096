/// <reference types="node" />
/**
 * The panel says what the notebook says: the replica words are checked against the cases
 * `python -m paddle_nbext.words` writes (tests/vectors/replica_words.json), and the badge
 * colours of the stylesheet against the ones the notebook's HTML uses.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { phaseClass, replicaName, roleSummaries } from '../logic/format';
import { IRoleCounts } from '../api/types';
import { job } from './fixtures';

interface ICase {
  phase: string;
  roles: { [role: string]: IRoleCounts };
  summaries: Array<{ role: string; text: string; tone: string; title: string }>;
  text: string;
}

const WORDS = JSON.parse(
  readFileSync(join(__dirname, '..', '..', '..', 'tests', 'vectors', 'replica_words.json'), 'utf-8')
) as {
  replica_name: { role: string; index: number; text: string };
  phase_colours: { [phase: string]: string };
  cases: ICase[];
};

describe('one vocabulary with the Python side', () => {
  it('names replicas the same way', () => {
    const { role, index, text } = WORDS.replica_name;
    expect(replicaName(role, index)).toBe(text);
  });

  it.each(WORDS.cases.map(c => [c.text, c] as const))('summarises %s', (_text, c) => {
    const summaries = roleSummaries(job('x', { phase: c.phase, roles: c.roles }));
    expect(summaries).toEqual(c.summaries);
  });

  it('colours badges as the notebook does', () => {
    const css = readFileSync(join(__dirname, '..', '..', 'style', 'base.css'), 'utf-8');
    for (const [phase, colour] of Object.entries(WORDS.phase_colours)) {
      const rule = new RegExp(`\\.${phaseClass(phase)} \\{\\s*background: ([^;]+);`).exec(css);
      expect(rule?.[1]).toBe(colour);
    }
  });
});
