import { describe, expect, it } from 'vitest';

import { validateSpec } from '../logic/validate';
import { SCHEMAS, VECTORS } from './schemas';

describe('shared vectors: the panel validates a body as JobSpec.check does', () => {
  it('has every limits set the vectors name', () => {
    expect(Object.keys(SCHEMAS).sort()).toEqual(Object.keys(VECTORS.limits).sort());
  });

  it.each(VECTORS.cases.map(c => [c.name, c] as const))('%s', (_name, vector) => {
    expect(validateSpec(vector.input, SCHEMAS[vector.limits])).toEqual(vector.errors);
  });
});
