/// <reference types="node" />
/**
 * The phases the API names (the generated unions of ../generated/api_types.ts, listed once in
 * ../api/types) are the ones the OpenAPI document names, and every one of them reads right in the
 * panel: a badge colour of its own, and words that claim nothing the phase does not say.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

import { phaseClass, roleSummaries } from '../logic/format';
import { JOB_PHASES, REPLICA_PHASES, TERMINAL_PHASES } from '../api/types';
import { job } from './fixtures';

const ROOT = join(__dirname, '..', '..', '..');
const OPENAPI = JSON.parse(
  readFileSync(join(ROOT, 'server_ext', 'paddle_nbext_server', 'openapi.json'), 'utf-8')
) as {
  components: { schemas: { [name: string]: { properties: { phase: { enum: string[] } } } } };
};
const CSS = readFileSync(join(ROOT, 'labextension', 'style', 'base.css'), 'utf-8');

describe('the phases are the API’s', () => {
  it('lists every job and replica phase of the OpenAPI document', () => {
    expect(JOB_PHASES).toEqual(OPENAPI.components.schemas.JobStatus.properties.phase.enum);
    expect(REPLICA_PHASES).toEqual(OPENAPI.components.schemas.Replica.properties.phase.enum);
  });

  it('ends a job only in Succeeded, Failed or Cancelled (Unknown may still change)', () => {
    expect([...TERMINAL_PHASES].every(phase => (JOB_PHASES as string[]).includes(phase))).toBe(
      true
    );
    expect(JOB_PHASES.filter(phase => TERMINAL_PHASES.has(phase))).toEqual([
      'Succeeded',
      'Failed',
      'Cancelled'
    ]);
  });

  it.each([...new Set<string>([...JOB_PHASES, ...REPLICA_PHASES])])(
    'gives %s a badge colour of its own',
    phase => {
      const rule = new RegExp(`\\.${phaseClass(phase)} \\{\\s*background: (#[0-9a-f]{6});`).exec(
        CSS
      );
      expect(rule?.[1]).toBeTruthy();
    }
  );

  it('colours no two job phases alike', () => {
    const colours = JOB_PHASES.map(
      phase => new RegExp(`\\.${phaseClass(phase)} \\{\\s*background: ([^;]+);`).exec(CSS)?.[1]
    );
    expect(new Set(colours).size).toBe(JOB_PHASES.length);
  });

  it('claims no replica count for a job whose record cannot be read', () => {
    const unknown = job('damaged', { phase: 'Unknown', message: 'job.json cannot be read' });
    expect(roleSummaries(unknown).map(summary => [summary.text, summary.tone])).toEqual([
      ['pserver ?/1', 'neutral'],
      ['trainers ?/2', 'neutral']
    ]);
  });
});
