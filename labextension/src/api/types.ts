/**
 * The JSON shapes of the paddle-nbext REST API, under the names the panel uses.
 *
 * Nothing here is written by hand from the docs: every shape is the generated one in
 * ../generated/api_types.ts, which `python -m paddle_nbext_server.codegen.openapi_gen` renders from the API's
 * OpenAPI document (server_ext/paddle_nbext_server/openapi.json), and a test fails while it is
 * stale. This module only names them, narrows what the panel relies on more tightly than the
 * document says, and opens the phase unions (see `OpenString`).  It is the panel's only way to
 * the generated file: everything else imports the API's shapes from here.
 */
import type * as api from '../generated/api_types';

/** A job's phase, as the API names them (`paddle_nbext.model.contract.Phase`). */
export type JobPhase = api.IJobStatus['phase'];
/** A replica's phase, as the API names them (`paddle_nbext.model.contract.ReplicaPhase`). */
export type ReplicaPhase = api.IReplica['phase'];

/**
 * One of `Known`, or any other string: a newer server may report a phase this panel does not
 * know yet, and it must still be shown. Intersecting `string` with an empty object type keeps
 * the union from collapsing to plain `string`, so editors still offer the known values.
 */
export type OpenString<Known extends string> = Known | (string & Record<never, never>);

/**
 * Every job phase and every replica phase the API names, each once. They are the keys of a
 * `Record` over the generated unions, so tsc fails here when the API adds or drops one (and the
 * vitest suite checks each has its badge).
 */
export const JOB_PHASES = Object.keys({
  Pending: true,
  Running: true,
  Succeeded: true,
  Failed: true,
  Cancelled: true,
  Unknown: true
} satisfies Record<JobPhase, true>) as JobPhase[];
export const REPLICA_PHASES = Object.keys({
  Pending: true,
  Running: true,
  Succeeded: true,
  Failed: true,
  Stopped: true
} satisfies Record<ReplicaPhase, true>) as ReplicaPhase[];

/**
 * The ends: a job there never changes again (`paddle_nbext.model.contract.TERMINAL_PHASES`).
 * `Unknown` is not one: the job's record could not be read, and it changes once the file is
 * written again.
 */
export const TERMINAL_PHASES: ReadonlySet<string> = new Set<JobPhase>([
  'Succeeded',
  'Failed',
  'Cancelled'
]);

export type IRoleCounts = api.IRoleCounts;

export type IReplica = Omit<api.IReplica, 'phase'> & { phase: OpenString<ReplicaPhase> };

/** `IJobStatus.resumed_from`: the job a resumed job started from. */
export type IResumedFrom = NonNullable<api.IJobStatus['resumed_from']>;

export type IJobStatus = Omit<api.IJobStatus, 'phase' | 'replicas'> & {
  phase: OpenString<JobPhase>;
  replicas: IReplica[];
};

/** `GET /jobs/{name}/checkpoints`: the job's checkpoints and what a delete frees. */
export type ICheckpoints = api.IListCheckpointsResponse;

/** One complete checkpoint (`GET /jobs/{name}/checkpoints`). */
export type ICheckpoint = ICheckpoints['checkpoints'][number];

/** `POST /jobs/{name}/resume`: the new job, which always says what it resumed from. */
export type IResumed = IJobStatus & { resumed_from: { job: string; step: number } };

/** `DELETE /jobs/{name}?keep_checkpoints=true`: where they went. */
export type IKeptCheckpoints = api.IDeleteJobResponse;

/** Server limits, `paddle_nbext.model.rules.Limits.to_dict()`. */
export type ILimits = api.ILimits;

/** How a job field is parsed and shown (`paddle_nbext.model.fields.Kind`). */
export type FieldKind = api.IJobSchemaField['x-kind'];

/**
 * One job field in the JSON Schema `GET /config` serves (`paddle_nbext/model/schema.py`): JSON Schema
 * keywords plus the form's `x-` keywords.
 */
export type IFieldSchema = api.IJobSchemaField;

/**
 * The JSON Schema of a job spec on this server: limits, defaults and backend applied. The form
 * is built from whatever fields it lists, so they are read by name rather than as the fixed set
 * the document names.
 */
export type IJobSchema = Omit<api.IJobSchema, 'properties' | 'required'> & {
  properties: { [field: string]: IFieldSchema };
  required: string[];
};

/** `GET /config`'s `backend`: its name, whether it can run jobs, and its own facts. */
export type IBackendInfo = api.IConfig['backend'];

/** `GET /config`: what drives the New job form (`job_schema` builds it). */
export type IServerConfig = Omit<api.IConfig, 'job_schema'> & { job_schema: IJobSchema };

/** One quota object's figures for one resource (Kubernetes quantities; `limit` null: no known bound). */
export type IQuotaBound = api.IQuotaCheck['bounds'][number];

/** The dry run's `quota`: the job against the namespace's and its queue's quota (Kubernetes). */
export type IQuotaCheck = api.IQuotaCheck;

/** `POST /jobs?dry_run=true`: nothing is created. */
export type IDryRun = Omit<api.IDryRun, 'job'> & { job: IJobStatus };

/** The REST error body `{"error", "message", "field"}` (422: `errors` per field too). */
export type IErrorBody = api.IError;

/** A job's resource use per replica (`GET /jobs/{name}/usage`, and `usage` events without history). */
export type IUsage = api.IUsage;
export type IReplicaUsage = api.IReplicaUsage;
export type IUsageSample = api.IUsageSample;

/** A job's timeline (`GET /jobs/{name}/timeline`) and one of its entries. */
export type ITimeline = api.ITimeline;
export type ITimelineEntry = api.ITimelineEntry;

/** The job's progress: its slowest replica that reports a total. */
export type IProgress = api.IProgress;

/** One metric of one replica as columns of equal length, in the order reported. */
export type IMetricSeries = api.IMetricSeries;

/**
 * One replica's (or one rank's) points: `rank` is null or absent for a replica of one process;
 * `restarts` says where a later process of it started reporting, `replaced` that an answer to a
 * cursor carries the whole series.
 */
export type IReplicaMetrics = api.IReplicaMetrics;

/** `GET /jobs/{name}/metrics`. */
export type IMetrics = api.IMetrics;

/** The data of a `metrics` event on `/events`. */
export type IMetricsSummary = api.IMetricsSummary;

/**
 * `GET /compare?jobs=a,b`: runs side by side — the spec fields and snapshot files that differ,
 * and each job's final and best metrics, progress and colour.
 */
export type IComparison = api.IComparison;

/** One compared job (`IComparison.runs`). */
export type ICompareRun = api.ICompareRun;

/** One metric of one compared job: final and best value, and the replica whose series it is. */
export type IRunMetric = api.IRunMetric;

/** `GET /notifications`: the user's settings, the events, and how each channel's deliveries go. */
export type INotifications = api.INotifications;
export type INotificationSettings = api.INotificationSettings;
export type INotificationChannel = api.INotificationChannel;
