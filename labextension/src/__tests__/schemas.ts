/// <reference types="node" />
/**
 * The job schemas a server with the vectors' limits serves, and the vectors themselves: both
 * live in tests/vectors/ (the schemas are written by `python -m paddle_nbext_server.codegen.openapi_gen`
 * from the job field table, so these tests see exactly what `GET /config` sends).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { IJobSchema } from '../api/types';

const VECTORS_DIR = join(__dirname, '..', '..', '..', 'tests', 'vectors');

function load<T>(name: string): T {
  return JSON.parse(readFileSync(join(VECTORS_DIR, name), 'utf-8')) as T;
}

export interface IVectorCase {
  name: string;
  input: unknown;
  limits: string;
  errors: { [field: string]: string };
}

export const VECTORS = load<{ limits: { [name: string]: object }; cases: IVectorCase[] }>(
  'job_spec_validation.json'
);

/** limits-set name -> the served job schema. */
export const SCHEMAS = load<{ [limits: string]: IJobSchema }>('job_spec_schemas.json');

/** A copy of a served schema with some field facts changed (what another server would send). */
export function withFields(schema: IJobSchema, changes: { [field: string]: object }): IJobSchema {
  const copy = JSON.parse(JSON.stringify(schema)) as IJobSchema;
  for (const [name, change] of Object.entries(changes)) {
    Object.assign(copy.properties[name], change);
  }
  return copy;
}
