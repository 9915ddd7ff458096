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
  /** Only on a job that Resume started: the ended job and the step of its checkpoint. */
  resumed_from?: IResumedFrom;
}

/** `IJobStatus.resumed_from`: the job a resumed job started from. */
export interface IResumedFrom {
  job: string;
  step: number | null;
}

/** One complete checkpoint (`GET /jobs/{name}/checkpoints`). */
export interface ICheckpoint {
  step: number;
  time: string;
  size: number;
  path: string;
}

/** `GET /jobs/{name}/checkpoints`: the job's checkpoints and what a delete frees. */
export interface ICheckpoints {
  name: string;
  directory: string;
  checkpoints: ICheckpoint[];
  latest: ICheckpoint | null;
  /** Bytes of the checkpoint directory. */
  size: number;
  /** Bytes of the whole job dir in the home (logs, snapshot, checkpoints): what a delete frees. */
  job_size: number;
  resumed_from: { job: string; step: number; path?: string } | null;
}

/** `POST /jobs/{name}/resume`: the new job. */
export interface IResumed extends IJobStatus {
  resumed_from: { job: string; step: number };
}

/** `DELETE /jobs/{name}?keep_checkpoints=true`: where they went. */
export interface IKeptCheckpoints {
  kept: string;
  size: number;
}

/** Server limits, `paddle_nbext.spec.Limits.to_dict()`. */
export interface ILimits {
  max_pservers: number;
  max_trainers: number;
  max_gpu_per_replica: number;
  max_gpu_per_job: number | null;
  /** Absent from servers older than procs_per_trainer. */
  max_procs_per_trainer?: number;
  max_cpu_per_replica: string | null;
  max_mem_per_replica: string | null;
  max_restarts: number;
  max_timeout: number | null;
  allowed_images: string[] | null;
}

/** How a job field is parsed and shown (`paddle_nbext.fields.Kind`). */
export type FieldKind =
  | 'name'
  | 'command'
  | 'path'
  | 'image'
  | 'choice'
  | 'count'
  | 'cpu'
  | 'memory'
  | 'env'
  | 'switch'
  | 'duration';

/**
 * One job field in the JSON Schema `GET /config` serves (`paddle_nbext/schema.py`): JSON Schema
 * keywords plus the form's `x-` keywords.
 */
export interface IFieldSchema {
  title: string;
  description: string;
  default?: unknown;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  pattern?: string;
  examples?: string[];
  propertyNames?: { pattern?: string };
  'x-kind': FieldKind;
  'x-group': string;
  'x-modes': string[];
  'x-backends'?: string[];
  'x-flag': string;
  'x-placeholder'?: string;
  'x-rule'?: string;
  'x-choice-labels'?: { [value: string]: string };
  'x-mode-defaults'?: { [mode: string]: unknown };
  'x-maximum-quantity'?: string;
  'x-maximum-seconds'?: number;
  'x-reserved-names'?: string[];
  'x-reserved-prefix'?: string;
}

/** The JSON Schema of a job spec on this server: limits, defaults and backend applied. */
export interface IJobSchema {
  properties: { [field: string]: IFieldSchema };
  required: string[];
  'x-groups': string[];
  'x-backend'?: string;
  'x-limits': ILimits;
}

export interface IBackendInfo {
  name: string;
  ok: boolean;
  error?: string | null;
  [key: string]: unknown;
}

/** `GET /config`: what drives the New job form (`job_schema` builds it). */
export interface IServerConfig {
  backend: IBackendInfo;
  defaults: { [field: string]: unknown };
  job_schema: IJobSchema;
  limits: ILimits;
  images: string[];
  default_image: string | null;
  version: string;
}

/** One quota object's figures for one resource (Kubernetes quantities; `limit` null: no known bound). */
export interface IQuotaBound {
  resource: string;
  source: string;
  limit: string | null;
  free: string;
}

/** The dry run's `quota`: the job against the namespace's and its queue's quota (Kubernetes). */
export interface IQuotaCheck {
  verdict: 'fits' | 'waits' | 'never' | 'unknown';
  words: string;
  need: { [resource: string]: string };
  bounds: IQuotaBound[];
  field: string | null;
  unknown: string[];
}

/** `POST /jobs?dry_run=true`: nothing is created. */
export interface IDryRun {
  dry_run: true;
  job: IJobStatus;
  plan: { [key: string]: unknown };
  quota?: IQuotaCheck;
}

/** The REST error body `{"error", "message", "field"}`. */
export interface IErrorBody {
  error: string;
  message: string;
  field: string | null;
}
