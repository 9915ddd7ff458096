/**
 * REST client for `{base_url}paddle/api/v1` (docs/architecture.md, "REST API").
 *
 * Every request goes through `ServerConnection.makeRequest`, which adds the Jupyter token and
 * the XSRF header; the streaming calls (`/events`, followed logs) use it too and read the
 * response body incrementally.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import {
  ICheckpoints,
  IComparison,
  IDryRun,
  IErrorBody,
  IJobStatus,
  IKeptCheckpoints,
  IMetrics,
  INotificationSettings,
  INotifications,
  IResumed,
  IServerConfig,
  ITimeline,
  IUsage
} from './types';

export const API_PATH = 'paddle/api/v1';

/** A failed API call, carrying the HTTP status and the server's `field` when it named one. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly field: string | null = null
  ) {
    super(message);
  }

  /** The server extension is not installed/enabled (Jupyter answers 404 for the API root). */
  get missingExtension(): boolean {
    return this.status === 404 && this.code === 'no_extension';
  }
}

export interface ILogOptions {
  role: string;
  index: number;
  tail?: number | null;
  previous?: boolean;
}

async function errorFrom(response: Response, what: string): Promise<ApiError> {
  let body: Partial<IErrorBody> | null = null;
  const text = await response.text().catch(() => '');
  try {
    body = JSON.parse(text) as Partial<IErrorBody>;
  } catch {
    body = null;
  }
  // Our own error body always has `error`; a 404 without it comes from Jupyter itself, which
  // means no route is mounted at paddle/api/v1: the server extension is not enabled.
  if (body && typeof body.error === 'string' && typeof body.message === 'string') {
    return new ApiError(response.status, body.error ?? 'error', body.message, body.field ?? null);
  }
  if (response.status === 404) {
    return new ApiError(
      404,
      'no_extension',
      'The paddle-nbext server extension is not enabled on this Jupyter server ' +
        `(${what} answered 404). Enable it with ` +
        '"jupyter server extension enable paddle_nbext_server" and restart Jupyter.'
    );
  }
  if (body && typeof body.message === 'string' && body.message) {
    return new ApiError(response.status, 'http_error', `${what} failed: ${body.message}`);
  }
  return new ApiError(
    response.status,
    'http_error',
    `${what} failed with HTTP ${response.status} ${response.statusText}`.trim()
  );
}

export class PaddleApi {
  constructor(readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  url(
    path: string,
    query: { [key: string]: string | number | boolean | null | undefined } = {}
  ): string {
    const base = URLExt.join(this.settings.baseUrl, API_PATH, path);
    const params = Object.entries(query)
      .filter(([, value]) => value !== null && value !== undefined && value !== '')
      .map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`);
    return params.length ? `${base}?${params.join('&')}` : base;
  }

  /** Make a request; resolve to the response (not yet read) or throw `ApiError`. */
  async raw(url: string, init: RequestInit, what: string): Promise<Response> {
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, init, this.settings);
    } catch (error) {
      if ((error as Error).name === 'AbortError') {
        throw error;
      }
      throw new ApiError(
        0,
        'network',
        `Cannot reach the Jupyter server: ${(error as Error).message}`
      );
    }
    if (!response.ok) {
      throw await errorFrom(response, what);
    }
    return response;
  }

  private async json<T>(method: string, path: string, body?: unknown, query = {}): Promise<T> {
    const init: RequestInit = { method, cache: 'no-cache' };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
    }
    const response = await this.raw(this.url(path, query), init, `${method} /${path}`);
    if (response.status === 204) {
      return undefined as T;
    }
    return (await response.json()) as T;
  }

  async listJobs(): Promise<IJobStatus[]> {
    return (await this.json<{ jobs: IJobStatus[] }>('GET', 'jobs')).jobs;
  }

  getJob(name: string): Promise<IJobStatus> {
    return this.json('GET', `jobs/${encodeURIComponent(name)}`);
  }

  submit(spec: { [field: string]: unknown }): Promise<IJobStatus> {
    return this.json('POST', 'jobs', spec);
  }

  /** Validate and plan without creating anything; on Kubernetes the answer says what quota is free. */
  dryRun(spec: { [field: string]: unknown }): Promise<IDryRun> {
    return this.json('POST', 'jobs', spec, { dry_run: 'true' });
  }

  cancel(name: string): Promise<IJobStatus> {
    return this.json('POST', `jobs/${encodeURIComponent(name)}/cancel`);
  }

  /** Delete; with `keepCheckpoints` its checkpoints are moved to ~/paddle-checkpoints/ first. */
  remove(name: string, keepCheckpoints = false): Promise<IKeptCheckpoints | undefined> {
    return this.json('DELETE', `jobs/${encodeURIComponent(name)}`, undefined, {
      keep_checkpoints: keepCheckpoints ? 'true' : null
    });
  }

  /** A Cancelled or Failed job started again as a new job from its latest checkpoint. */
  resume(name: string, changes: { [field: string]: unknown } = {}): Promise<IResumed> {
    return this.json('POST', `jobs/${encodeURIComponent(name)}/resume`, changes);
  }

  /** The job's checkpoints, their size, the job dir's size and the job it was resumed from. */
  checkpoints(name: string): Promise<ICheckpoints> {
    return this.json('GET', `jobs/${encodeURIComponent(name)}/checkpoints`);
  }

  /** What the job's replicas `report()`ed, at most `points` per replica and metric, after `since`. */
  metrics(name: string, points: number | null, since: string | null = null): Promise<IMetrics> {
    return this.json('GET', `jobs/${encodeURIComponent(name)}/metrics`, undefined, {
      points,
      since
    });
  }

  /** CPU and memory per replica beside request and limit, peaks and recent samples. */
  usage(name: string): Promise<IUsage> {
    return this.json('GET', `jobs/${encodeURIComponent(name)}/usage`);
  }

  /** What happened to the job, oldest first: the entries after `since` (a `seq`). */
  timeline(name: string, since = 0): Promise<ITimeline> {
    return this.json('GET', `jobs/${encodeURIComponent(name)}/timeline`, undefined, {
      since: since || null
    });
  }

  /** Runs side by side: what differs in the jobs' specs and code, their final and best metrics. */
  compare(names: readonly string[]): Promise<IComparison> {
    return this.json('GET', 'compare', undefined, { jobs: names.join(',') });
  }

  /** The user's notification settings and each channel's last delivery (its error in words). */
  notifications(): Promise<INotifications> {
    return this.json('GET', 'notifications');
  }

  /** Replace the user's notification settings; a refused one is an `ApiError` naming its field. */
  setNotifications(settings: Partial<INotificationSettings>): Promise<INotifications> {
    return this.json('PUT', 'notifications', settings);
  }

  config(): Promise<IServerConfig> {
    return this.json('GET', 'config');
  }

  version(): Promise<{ version: string; api: string }> {
    return this.json('GET', 'version');
  }

  private logsUrl(name: string, options: ILogOptions, follow: boolean): string {
    return this.url(`jobs/${encodeURIComponent(name)}/logs`, {
      role: options.role,
      index: options.index,
      tail: options.tail ?? null,
      previous: options.previous ? 'true' : null,
      follow: follow ? 'true' : null
    });
  }

  /** The replica's log text (its last `tail` lines when given). */
  async logs(name: string, options: ILogOptions, signal?: AbortSignal): Promise<string> {
    const response = await this.raw(
      this.logsUrl(name, options, false),
      { method: 'GET', cache: 'no-cache', signal },
      'GET logs'
    );
    return response.text();
  }

  /**
   * Stream the replica's log as it is written; `onText` gets each decoded chunk.  Resolves
   * when the replica has ended and everything was sent (or when `signal` aborts).
   */
  async followLogs(
    name: string,
    options: ILogOptions,
    onText: (text: string) => void,
    signal: AbortSignal
  ): Promise<void> {
    const response = await this.raw(
      this.logsUrl(name, options, true),
      { method: 'GET', cache: 'no-cache', signal },
      'GET logs'
    );
    await readText(response, onText);
  }

  /** Open `/events`; the caller reads the body with `readText`. */
  events(signal: AbortSignal): Promise<Response> {
    return this.raw(
      this.url('events'),
      { method: 'GET', cache: 'no-cache', signal, headers: { Accept: 'text/event-stream' } },
      'GET /events'
    );
  }
}

/** Read a streaming body as text chunks until it ends. */
export async function readText(response: Response, onText: (text: string) => void): Promise<void> {
  if (!response.body) {
    onText(await response.text());
    return;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        break;
      }
      const text = decoder.decode(value, { stream: true });
      if (text) {
        onText(text);
      }
    }
    const rest = decoder.decode();
    if (rest) {
      onText(rest);
    }
  } finally {
    reader.releaseLock();
  }
}
