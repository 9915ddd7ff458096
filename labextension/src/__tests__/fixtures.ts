import { IJobStatus, IServerConfig } from '../api/types';
import { SCHEMAS } from './schemas';

/** A job status as the server sends it (docs/architecture.md, "Job status"). */
export function job(name: string, overrides: Partial<IJobStatus> = {}): IJobStatus {
  return {
    name,
    owner: 'alice',
    backend: 'local',
    phase: 'Running',
    message: '',
    spec: { job_name: name, mode: 'ps', pservers: 1, trainers: 2 },
    created: '2026-11-29T16:00:00.000Z',
    started: '2026-11-29T16:00:01.000Z',
    finished: null,
    roles: {
      trainer: { desired: 2, pending: 0, running: 1, succeeded: 1, failed: 0, stopped: 0 },
      pserver: { desired: 1, pending: 0, running: 1, succeeded: 0, failed: 0, stopped: 0 }
    },
    replicas: [],
    ...overrides
  };
}

/** What `GET /config` answers for `backend`, with the job schema of one limits set
 * (tests/vectors/job_spec_schemas.json) and `extra` backend facts (capacity, quota_check). */
export function serverConfig(
  backend: string,
  limits: 'default' | 'tight' = 'tight',
  extra: Partial<IServerConfig['backend']> = {}
): IServerConfig {
  const schema = { ...SCHEMAS[limits], 'x-backend': backend };
  return {
    backend: { name: backend, ok: true, error: null, ...extra },
    defaults: {},
    job_schema: schema,
    limits: schema['x-limits'],
    images: [],
    default_image: null,
    version: '0'
  };
}
