/**
 * The JSON shapes of the paddle-nbext REST API (docs/architecture.md, "REST API" and
 * "Job status").  Kept in one place so the panel, the state logic and the tests agree.
 */

export type JobPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Cancelled';
export type ReplicaPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Stopped';

/**
 * One of `Known`, or any other string: a newer server may report a phase this panel does not
 * know yet, and it must still be shown. Intersecting `string` with an empty object type keeps
 * the union from collapsing to plain `string`, so editors still offer the known values.
 */
export type OpenString<Known extends string> = Known | (string & Record<never, never>);

export const TERMINAL_PHASES: ReadonlySet<string> = new Set(['Succeeded', 'Failed', 'Cancelled']);

export interface IRoleCounts {
  desired: number;
  pending: number;
  running: number;
  succeeded: number;
  failed: number;
  stopped: number;
}

export interface IReplica {
  role: string;
  index: number;
  phase: OpenString<ReplicaPhase>;
  reason: string | null;
  exit_code: number | null;
  restarts: number;
  started: string | null;
  finished: string | null;
}

export interface IJobStatus {
  name: string;
  owner: string;
  backend: string;
  phase: OpenString<JobPhase>;
  message: string;
  spec: { [key: string]: unknown };
  created: string;
  started: string | null;
  finished: string | null;
  roles: { [role: string]: IRoleCounts };
  replicas: IReplica[];
}

/** Server limits, `paddle_nbext.spec.Limits.to_dict()`. */
export interface ILimits {
  max_pservers: number;
  max_trainers: number;
  max_gpu_per_replica: number;
  max_gpu_per_job: number | null;
  max_cpu_per_replica: string | null;
  max_mem_per_replica: string | null;
  max_restarts: number;
  max_timeout: number | null;
  allowed_images: string[] | null;
}

export const DEFAULT_LIMITS: ILimits = {
  max_pservers: 16,
  max_trainers: 64,
  max_gpu_per_replica: 8,
  max_gpu_per_job: null,
  max_cpu_per_replica: null,
  max_mem_per_replica: null,
  max_restarts: 10,
  max_timeout: null,
  allowed_images: null
};

export interface IBackendInfo {
  name: string;
  ok: boolean;
  error?: string | null;
  [key: string]: unknown;
}

/** `GET /config`: what drives the New job form. */
export interface IServerConfig {
  backend: IBackendInfo;
  defaults: { [field: string]: unknown };
  limits: ILimits;
  images: string[];
  default_image: string | null;
  version: string;
}

/** The REST error body `{"error", "message", "field"}`. */
export interface IErrorBody {
  error: string;
  message: string;
  field: string | null;
}
