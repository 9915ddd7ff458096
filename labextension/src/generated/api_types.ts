/**
 * GENERATED FILE, DO NOT EDIT: the JSON shapes of the paddle-nbext REST API, written by
 * `python -m paddle_nbext_server.codegen.openapi_gen` from server_ext/paddle_nbext_server/openapi.json
 * (itself generated from openapi_base.json and the job field table).
 *
 * Regenerate after changing the API: .venv/bin/python -m paddle_nbext_server.codegen.openapi_gen
 * (tests/server/test_openapi_generated.py fails while this file differs from what it writes).
 * The panel imports these through ../api/types, which names them and opens the phase unions.
 */

export interface IError {
  /** Machine-readable code: bad_request, forbidden, not_found, name_taken, conflict, too_large (a body over 4 MiB), invalid, too_many (streams per user), unavailable, forbidden_by_cluster (503: the cluster refuses the notebook's ServiceAccount a permission the backend needs; the message names verb, resource, namespace and the fix), ... */
  error: string;
  /** A sentence saying what is wrong and how to fix it. */
  message: string;
  field: string | null;
  /** 422 only: every invalid field with its message. */
  errors?: { [key: string]: string };
}

/** JobSpec fields (docs: Job model) plus an optional entry_script. Unknown fields are refused with 422. The job fields are written by openapi_gen from the job field table. */
export interface ISubmitBody {
  /** DNS label: lower-case letters, digits and '-', at most 40 characters; generated when empty */
  job_name?: string | null;
  /** command to run in the package dir, e.g. 'python train.py --epochs 3' */
  entry_point: string;
  /** directory with the code, inside your home; the current directory when left out of a notebook or the CLI */
  trainer_package?: string | null;
  /** pip requirements file inside the package, installed once into a cached environment over the image's Python before the replicas start; empty: requirements.txt when the package has one */
  requirements?: string | null;
  /** container image of every replica (Kubernetes backend); empty: the server default */
  image?: string | null;
  /** parameter servers + trainers, or collective (trainers only); default: ps when pservers are asked for, else collective */
  mode?: 'ps' | 'collective' | null;
  /** parameter-server replicas */
  pservers?: number | null;
  /** trainer replicas */
  trainers?: number | null;
  /** CPU per pserver, e.g. 500m, 2 */
  pserver_cpu?: string | null;
  /** memory per pserver, e.g. 512Mi, 4Gi */
  pserver_mem?: string | null;
  /** CPU per trainer, e.g. 500m, 2 */
  trainer_cpu?: string | null;
  /** memory per trainer, e.g. 512Mi, 4Gi */
  trainer_mem?: string | null;
  /** GPUs per trainer */
  trainer_gpu?: number | null;
  /** processes (ranks) each trainer runs, one per device as paddle.distributed.launch does; a GPU trainer runs one per GPU, so leave it 1 or set it to trainer_gpu */
  procs_per_trainer?: number | null;
  /** environment variables for every replica, NAME=value */
  env?: { [key: string]: string } | null;
  /** copy the package into the job's own dir at submit */
  snapshot?: boolean | null;
  /** times the whole job starts again after a trainer fails (from its latest checkpoint) */
  max_restarts?: number | null;
  /** complete checkpoints kept in the job's checkpoint directory (paddle_nbext_job.save_checkpoint); 0 keeps all */
  keep_checkpoints?: number | null;
  /** wall-clock limit, e.g. 600, 30m, 2h */
  timeout?: number | string | null;
  /** a running job whose trainer neither report()s nor logs for this long is marked stalled (only once a trainer has reported), e.g. 600, 10m */
  stall_timeout?: number | string | null;
  /** what follows a stall: warn, restart (the whole job, from its latest checkpoint; counts as a restart) or fail */
  on_stall?: 'warn' | 'restart' | 'fail' | null;
  /** regular expression for the trainers' own progress lines, with named groups step (required), total, epoch, loss and any metric; empty: Model.fit and common Paddle log lines are read by themselves */
  progress_pattern?: string | null;
  /** queue that admits the job on a shared cluster (Kubernetes backend: a Kueue LocalQueue, or a Volcano Queue with Volcano); empty: the server default */
  queue?: string | null;
  /** Python source written as paddle_entry.py into the package snapshot: valid Unicode without NUL, at most 1 MiB of UTF-8. */
  entry_script?: string;
}

/** JSON Schema (draft 2020-12) of a job spec on this server: limits, defaults and backend applied. */
export interface IJobSchema {
  $schema: string;
  type: 'object';
  additionalProperties?: boolean;
  required: Array<'job_name' | 'entry_point' | 'trainer_package' | 'requirements' | 'image' | 'mode' | 'pservers' | 'trainers' | 'pserver_cpu' | 'pserver_mem' | 'trainer_cpu' | 'trainer_mem' | 'trainer_gpu' | 'procs_per_trainer' | 'env' | 'snapshot' | 'max_restarts' | 'keep_checkpoints' | 'timeout' | 'stall_timeout' | 'on_stall' | 'progress_pattern' | 'queue'>;
  properties: {
    job_name: IJobSchemaField;
    entry_point: IJobSchemaField;
    trainer_package: IJobSchemaField;
    requirements: IJobSchemaField;
    image: IJobSchemaField;
    mode: IJobSchemaField;
    pservers: IJobSchemaField;
    trainers: IJobSchemaField;
    pserver_cpu: IJobSchemaField;
    pserver_mem: IJobSchemaField;
    trainer_cpu: IJobSchemaField;
    trainer_mem: IJobSchemaField;
    trainer_gpu: IJobSchemaField;
    procs_per_trainer: IJobSchemaField;
    env: IJobSchemaField;
    snapshot: IJobSchemaField;
    max_restarts: IJobSchemaField;
    keep_checkpoints: IJobSchemaField;
    timeout: IJobSchemaField;
    stall_timeout: IJobSchemaField;
    on_stall: IJobSchemaField;
    progress_pattern: IJobSchemaField;
    queue: IJobSchemaField;
  };
  'x-groups': Array<'Code' | 'Replicas' | 'Resources' | 'Run'>;
  'x-backend'?: string;
  'x-limits': ILimits;
}

/** A job field as the New job form shows it: JSON Schema keywords plus x- keywords (see paddle_nbext/model/schema.py). */
export interface IJobSchemaField {
  title: string;
  description: string;
  type?: string | string[];
  oneOf?: Array<{ [key: string]: unknown }>;
  default?: unknown;
  enum?: unknown[];
  examples?: string[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  propertyNames?: {
    pattern?: string;
  };
  additionalProperties?: { [key: string]: unknown };
  'x-kind': 'name' | 'command' | 'path' | 'image' | 'choice' | 'count' | 'cpu' | 'memory' | 'env' | 'switch' | 'duration' | 'pattern';
  'x-group': 'Code' | 'Replicas' | 'Resources' | 'Run';
  'x-modes': Array<'ps' | 'collective'>;
  'x-backends'?: string[];
  'x-flag': string;
  'x-placeholder'?: string;
  'x-rule'?: string;
  'x-mode-defaults'?: { [key: string]: unknown };
  'x-choice-labels'?: { [key: string]: string };
  'x-maximum-quantity'?: string;
  'x-maximum-seconds'?: number;
  'x-reserved-names'?: string[];
  'x-reserved-prefix'?: string;
}

export interface IRoleCounts {
  desired: number;
  pending: number;
  running: number;
  succeeded: number;
  failed: number;
  stopped: number;
}

export interface IReplica {
  role: 'pserver' | 'trainer';
  index: number;
  phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Stopped';
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
  phase: 'Pending' | 'Running' | 'Succeeded' | 'Failed' | 'Cancelled' | 'Unknown';
  message: string;
  /** JobSpec.to_dict() */
  spec: { [key: string]: unknown };
  created: string;
  started: string | null;
  finished: string | null;
  roles: { [key: string]: IRoleCounts };
  replicas: IReplica[];
  /** Only on a job that Resume started (POST /jobs/{name}/resume): the ended job it resumed from and the step of that job's checkpoint it started from. Kept with the job's record (local job.json, Kubernetes record annotation paddle-nbext/resumed-from). */
  resumed_from?: {
    job: string;
    step: number | null;
  };
}

export interface IJobList {
  jobs: IJobStatus[];
}

export interface IDryRun {
  dry_run: true;
  job: IJobStatus;
  /** Backend specific: processes (local) or manifests (kubernetes). */
  plan: { [key: string]: unknown };
  quota?: IQuotaCheck;
}

/** Kubernetes backend: the job against the namespace's ResourceQuotas and the ClusterQueue behind its Kueue LocalQueue. A submit whose verdict is never is refused with 422 naming `field`. */
export interface IQuotaCheck {
  /** fits: room now; waits: within every limit but more than is free now (it queues); never: over a hard limit, it can never run; unknown: no quota could be read. */
  verdict: 'fits' | 'waits' | 'never' | 'unknown';
  /** One sentence for people, e.g. 'This job needs 8 CPU, 32Gi, 4 GPUs; free now: 16 CPU, 64Gi, 2 GPUs — it will wait (short of 2 GPUs in ClusterQueue team-a).' */
  words: string;
  /** The job's total request per resource name, as Kubernetes quantities. */
  need: { [key: string]: string };
  bounds: Array<{
    resource: string;
    /** 'ResourceQuota <name>' or 'ClusterQueue <name>'. */
    source: string;
    /** The most this source ever allows; null when it sets no known upper bound (borrowing in a cohort). */
    limit: string | null;
    free: string;
  }>;
  /** With verdict never: the job field to change (e.g. trainer_gpu, or trainers when the count is what exceeds). */
  field: string | null;
  /** What could not be read, one reason each (a 403 or 404 never fails the request). */
  unknown: string[];
}

export interface ILimits {
  max_pservers: number;
  max_trainers: number;
  max_gpu_per_replica: number;
  max_gpu_per_job: number | null;
  /** Most processes (ranks) one trainer may run: procs_per_trainer, or trainer_gpu with GPUs. */
  max_procs_per_trainer: number;
  max_cpu_per_replica: string | null;
  max_mem_per_replica: string | null;
  max_restarts: number;
  max_timeout: number | null;
  allowed_images: string[] | null;
}

export interface IConfig {
  /** The backend and what it says of itself: name, ok and error, plus its own facts (local: paddle, jobs_dir, capacity; kubernetes: namespace, quota_check, workload_mode, ...). */
  backend: {
    /** `local`, `kubernetes`, or the name a site's own backend class gives itself (c.PaddleNbext.backend_class). */
    name: string;
    ok: boolean;
    error: string | null;
    [key: string]: unknown;
  };
  /** Every job field's value when a request leaves it out. */
  defaults: { [key: string]: unknown };
  limits: ILimits;
  images: string[];
  default_image: string | null;
  version: string;
  /** The owner name jobs are recorded under. */
  user?: string;
  /** Trainer packages must live under this directory. */
  home?: string;
  job_schema: IJobSchema;
}

/** The job's progress: its slowest replica that reports a total. Null when none does. */
export interface IProgress {
  step: number;
  total: number;
  fraction: number;
  /** Seconds left at the pace so far; null when unknown. */
  eta_seconds: number | null;
}

/** One metric of one replica as columns of equal length, in the order reported. */
export interface IMetricSeries {
  step: number[];
  /** Epoch seconds. */
  time: number[];
  value: number[];
}

export interface IReplicaMetrics {
  role: 'pserver' | 'trainer';
  index: number;
  /** The rank inside a trainer of several processes (each rank is an entry of its own; 0 is the trainer's own file); null for a replica of one process. */
  rank?: number | null;
  /** Points read from the replica's file so far. */
  count: number;
  step: number | null;
  total: number | null;
  /** Epoch seconds of the newest point. */
  updated: number | null;
  eta_seconds: number | null;
  /** Lines or values in the file that are not points (skipped). */
  invalid: number;
  /** The file is larger than the server reads. */
  truncated: boolean;
  /** Where a later process of this replica (a whole-job restart) started reporting; its points replace the earlier ones from that step on. */
  restarts?: Array<{
    step: number;
    time: number;
    /** When the previous process reported its last point (epoch seconds): where the recovery began. */
    stopped?: number;
  }>;
  /** A restart since the `since` cursor dropped points the asker holds: this answer carries the replica's whole series, to replace them. */
  replaced?: boolean;
  series: { [key: string]: IMetricSeries };
}

export interface IMetrics {
  name: string;
  /** Pass as `since` to get only newer points. */
  cursor: string;
  points: number | null;
  progress: IProgress | null;
  replicas: IReplicaMetrics[];
}

/** The data of a `metrics` event. */
export interface IMetricsSummary {
  name: string;
  cursor: string;
  progress: IProgress | null;
  /** Per replica (`trainer-0`...; a rank r > 0 of a trainer of several processes `trainer-0.rank-r`, with `rank`): its step, total and latest value of each metric. */
  latest: {
    [key: string]: {
      step: number;
      total: number | null;
      /** Only for the ranks of a trainer of several processes. */
      rank?: number;
      values: { [key: string]: number };
    };
  };
}

/** One metric of one job, from one replica's series (`replica`). */
export interface IRunMetric {
  /** The replica whose series stands for the job (`trainer-0`). */
  replica: string;
  /** Which way is better, from the metric's name; null when the name says neither (no best then). */
  goal: 'min' | 'max' | null;
  /** The last value reported. */
  final: number;
  final_step: number;
  best: number | null;
  best_step: number | null;
  /** Points reported. */
  points: number;
}

/** One compared job. */
export interface ICompareRun {
  name: string;
  phase: string;
  message: string;
  created: string;
  started: string | null;
  finished: string | null;
  /** `#rrggbb`, derived from the job's name: the same in every comparison unless two compared names hash alike. */
  colour: string;
  progress: IProgress | null;
  code: {
    /** Files in its package snapshot; null when there is none. */
    files: number | null;
    /** Why its code is not compared, in words. */
    reason: string | null;
  };
  metrics: { [key: string]: IRunMetric };
}

export interface IComparison {
  /** The compared jobs, in the order asked. */
  jobs: string[];
  runs: ICompareRun[];
  /** Every metric any job reports, `loss` first. */
  metrics: string[];
  /** One row per spec field that differs (`env.NAME` per variable). */
  spec: Array<{
    field: string;
    label: string;
    /** Each job's value (null: not set). */
    values: { [key: string]: unknown };
  }>;
  code: {
    /** Files whose content differs, or that some snapshots lack. */
    files: Array<{
      path: string;
      /** Each compared job's sha256 of the file; null: the snapshot lacks it. */
      hashes: { [key: string]: string | null };
    }>;
    /** Files the same in every snapshot. */
    same: number;
    /** The jobs that have a snapshot to compare. */
    compared: string[];
    /** More files differ than are listed (500). */
    truncated: boolean;
  };
}

/** One of the user's jobs' Python environments (built from a job's requirements file, kept in `~/.paddle-jobs/envs/<key>/`). */
export interface IEnvironment {
  /** The environment's key: 16 hexadecimal digits, a digest of the requirements, the interpreter, its installed packages and the index settings. */
  key: string;
  /** The requirement lines it was built from. */
  requirements: string[];
  /** The requirements file, relative to the package. */
  requirements_file: string | null;
  /** Python version of the interpreter it was built with. */
  python: string | null;
  /** The image of the job that built it (Kubernetes). */
  image: string | null;
  /** uv or pip. */
  installer: string | null;
  /** What it installed (`name==version`): only what the image lacks. */
  packages: string[];
  /** Bytes of its files. */
  size: number;
  built: string | null;
  /** The job that built it, when it is one of the caller's jobs. */
  built_by: string | null;
  /** When a job last started with it. */
  last_used: string | null;
  /** The caller's jobs that have not ended and use it. */
  in_use_by: string[];
}

export interface IEnvironmentList {
  /** The environments' folder, as the server sees it. */
  path: string;
  /** Most recently used first. */
  environments: IEnvironment[];
  count: number;
  /** Bytes of all environments. */
  bytes: number;
  /** Bytes of the installers' download cache (`envs/.cache`). */
  cache_bytes: number;
}

export interface IPruneResult {
  /** True: nothing was removed; the lists say what would be. */
  dry_run: boolean;
  unused_days: number;
  removed: Array<{
    key: string;
    size: number;
    last_used: string | null;
    /** How many packages it held. */
    packages: number;
  }>;
  /** Environments unused long enough but kept, and why (a running job uses it, it is being built or used right now). */
  kept: Array<{
    key: string;
    reason: string;
  }>;
  /** Hidden directories of crashed builds (older than a day) and unfinished removals. */
  leftovers: Array<{
    name: string;
    size: number;
  }>;
  /** Keys whose remembered build failure (`.locks/<key>.failed.json`) was removed; those of running jobs stay. */
  failures: string[];
  /** The download cache, when `cache` was asked for. */
  cache: {
    /** Bytes freed. */
    size: number;
    emptied: boolean;
    /** Why it was kept (a build is running). */
    reason: string | null;
  } | null;
  /** Bytes freed in all (or that would be). */
  freed: number;
}

export interface IUsageSample {
  /** Seconds since the epoch. */
  t: number;
  /** Cores in use over the interval before (1 = one core busy); null while it did not run. */
  cpu: number | null;
  /** Resident bytes; null while it did not run. */
  memory: number | null;
}

export interface IRankUsage {
  rank: number;
  /** Cores the rank's own processes use. */
  cpu: number | null;
  /** Resident bytes of the rank's own processes. */
  memory: number | null;
  peak_cpu: number;
  peak_memory: number;
}

export interface IReplicaUsage {
  role: string;
  index: number;
  phase: string;
  /** Cores in use (1 = one core busy); null before its second sample and once it stopped. */
  cpu: number | null;
  /** Resident bytes of its process tree; null once it stopped. */
  memory: number | null;
  /** Processes in its tree at the last sample. */
  processes: number;
  peak_cpu: number;
  /** The most resident memory seen, in bytes. */
  peak_memory: number;
  cpu_request: number | null;
  /** null: not capped (local replicas get their cores as thread counts). */
  cpu_limit: number | null;
  memory_request: number | null;
  /** null: no limit, so no memory warning. */
  memory_limit: number | null;
  /** Recent samples, oldest first (absent in `usage` events). */
  history?: IUsageSample[];
  /** A trainer of several ranks (local backend): each rank's own figures; absent for one process. */
  ranks?: IRankUsage[];
}

export interface IUsage {
  name: string;
  available: boolean;
  /** Why there are no figures, in words; null when available. */
  reason: string | null;
  sampled: string | null;
  /** Seconds between samples. */
  interval: number | null;
  replicas: IReplicaUsage[];
  /** The share of the job's wall time spent training: its slowest trainer's first reported step to its last, less each recovery (the last point before a restart to the first after its resume), over the time since the job started (to its end). Null until a trainer has reported twice. */
  goodput?: {
    fraction: number;
    training_seconds: number;
    lost_seconds: number;
    wall_seconds: number;
    recoveries: number;
  } | null;
}

export interface ITimelineEntry {
  /** Counts entries from 1, never reused. */
  seq: number;
  t: string;
  kind: 'submitted' | 'waiting' | 'admitted' | 'started' | 'environment' | 'first_step' | 'checkpoint' | 'warning' | 'recovered' | 'restart' | 'resumed' | 'replica_ended' | 'ended' | 'omitted';
  /** What happened, in words. */
  text: string;
  /** The replica it is about, if one. */
  role?: string;
  index?: number;
}

export interface ITimeline {
  name: string;
  available: boolean;
  /** Why there is no timeline (yet), in words: a backend that keeps none, or a Kubernetes job whose folder is not in the home yet. */
  reason: string | null;
  entries: ITimelineEntry[];
  /** The highest `seq` in this answer (else `since`): the `seq` to pass as `since` next time. */
  last: number;
}

/** What the caller is told about, and where. */
export interface INotificationSettings {
  /** The events to be told about: failed, succeeded, stalled (no progress for the job's stall time), memory (a replica nears its memory limit, before it is OOMKilled), started (after waiting in a queue). Default: failed, succeeded, stalled, memory. */
  events?: Array<'failed' | 'succeeded' | 'stalled' | 'memory' | 'started'>;
  /** Where webhooks go (a host the admin allows); empty or null: no webhook. */
  webhook_url?: string | null;
  /** json: the event as a JSON object (id, event, job, owner, phase, title, message, time, link, text); slack: Slack's and Mattermost's incoming-webhook {"text": ...}. Default json. */
  webhook_format?: 'json' | 'slack';
  /** The address e-mails go to; empty or null: no e-mail. */
  email?: string | null;
  /** When they were set (ignored in a request). */
  updated?: string;
}

export interface INotificationChannel {
  /** The admin enabled this channel. */
  available: boolean;
  /** The caller set it up (a webhook URL, an e-mail address). */
  set: boolean;
  /** Whether the last delivery worked (null: none tried yet). */
  ok: boolean | null;
  /** Why the last delivery failed, in words ("the receiver answered 500 Internal Server Error", "cannot send through smtp.example.org:587: Connection refused"), with the attempt and the next try; null once one works. */
  last_error: string | null;
  /** When deliveries on this channel began to fail. */
  failing_since: string | null;
  /** The last failed message was given up (the receiver refused it for good, or every attempt failed). */
  gave_up: boolean;
  last_attempt: string | null;
  last_delivered: string | null;
  /** Messages waiting for (another) attempt. */
  pending: number;
}

export interface INotifications {
  /** The admin enabled at least one channel. */
  enabled: boolean;
  /** Why notifications are off, in words. */
  error: string | null;
  /** Each event a user may pick, with what it means. */
  events: { [key: string]: string };
  settings: INotificationSettings;
  channels: {
    webhook: INotificationChannel;
    email: INotificationChannel;
  };
}

// Inline success responses of operations, named after their operationId.

/** `deleteJob`: its 200 response. */
export interface IDeleteJobResponse {
  /** Where the checkpoints are now. */
  kept: string;
  /** Their bytes. */
  size: number;
}

/** `listCheckpoints`: its 200 response. */
export interface IListCheckpointsResponse {
  name: string;
  directory: string;
  checkpoints: Array<{
    step: number;
    time: string;
    /** Bytes of its files. */
    size: number;
    path: string;
  }>;
  latest: {
    step: number;
    time: string;
    /** Bytes of its files. */
    size: number;
    path: string;
  } | null;
  /** Bytes of the checkpoint directory. */
  size: number;
  /** Bytes of the whole job dir in the home (logs, snapshot, checkpoints): what a delete frees. */
  job_size: number;
  /** The job and checkpoint this job was resumed from. */
  resumed_from: {
    job?: string;
    step?: number;
    path?: string;
  } | null;
}

/** `removeEnvironment`: its 200 response. */
export interface IRemoveEnvironmentResponse {
  key: string;
  /** Bytes freed. */
  size: number;
}

/** `getVersion`: its 200 response. */
export interface IGetVersionResponse {
  version: string;
  api: 'v1';
}
