/**
 * Keeps the job list live: one `/events` stream (fetch + streaming reader, so token and XSRF
 * go with it), reconnect with exponential backoff, and a fallback poll of `GET /jobs` while
 * the stream is down.  Problems (extension missing, backend unreachable) become a
 * `problem` in the state, which the panel shows in words.
 */
import { IDisposable } from '@lumino/disposable';
import { ISignal, Signal } from '@lumino/signaling';

import { ApiError, PaddleApi, readText } from '../api/client';
import { SseParser, backoffDelay } from '../api/sse';
import {
  Action,
  IJobsState,
  IProblem,
  ITransition,
  finishedJobs,
  initialState,
  reduce
} from './state';
import { IJobStatus, IMetricsSummary, IServerConfig, ITimelineEntry, IUsage } from '../api/types';

/** A `timeline` event: new entries of one job's timeline. */
export interface ITimelineEvent {
  name: string;
  entries: ITimelineEntry[];
}

export function problemFrom(error: unknown): IProblem {
  if (error instanceof ApiError) {
    if (error.missingExtension) {
      return { kind: 'missing', message: error.message };
    }
    if (error.status === 503 && error.code === 'forbidden_by_cluster') {
      // RBAC refuses the server's own calls: the message names the verb, resource and Role
      return {
        kind: 'unreachable',
        message: `The job backend is not allowed to work: ${error.message}`
      };
    }
    if (error.status === 503) {
      return { kind: 'unreachable', message: `The job backend is unreachable: ${error.message}` };
    }
    return { kind: 'error', message: error.message };
  }
  return { kind: 'error', message: String((error as Error)?.message ?? error) };
}

export class JobsModel implements IDisposable {
  private _state: IJobsState = initialState;
  private _changed = new Signal<this, IJobsState>(this);
  private _finished = new Signal<this, ITransition[]>(this);
  private _metrics = new Signal<this, IMetricsSummary>(this);
  private _usage = new Signal<this, IUsage>(this);
  private _timeline = new Signal<this, ITimelineEvent>(this);
  private _disposed = false;
  private _started = false;
  private _abort: AbortController | null = null;
  private _poll: ReturnType<typeof setInterval> | null = null;
  private _wake: (() => void) | null = null;
  private _config: IServerConfig | null = null;
  private _refreshSeconds = 10;

  constructor(readonly api: PaddleApi) {}

  get state(): IJobsState {
    return this._state;
  }

  get changed(): ISignal<this, IJobsState> {
    return this._changed;
  }

  /** Jobs that just reached Succeeded or Failed (for notifications). */
  get finished(): ISignal<this, ITransition[]> {
    return this._finished;
  }

  /** A running job's replicas reported new points (the server sends at most two a second per job). */
  get metrics(): ISignal<this, IMetricsSummary> {
    return this._metrics;
  }

  /** A running job's newest resource-use sample (no history), once per sample. */
  get usage(): ISignal<this, IUsage> {
    return this._usage;
  }

  /** New entries of a job's timeline (warnings among them). */
  get timeline(): ISignal<this, ITimelineEvent> {
    return this._timeline;
  }

  get config(): IServerConfig | null {
    return this._config;
  }

  get isDisposed(): boolean {
    return this._disposed;
  }

  /** Fallback poll interval in seconds (from the settings). */
  set refreshSeconds(value: number) {
    this._refreshSeconds = Math.max(1, value);
    if (this._poll !== null) {
      this._stopPoll();
      this._startPoll();
    }
  }

  dispatch(action: Action): void {
    const before = this._state;
    const after = reduce(before, action);
    if (after === before) {
      return;
    }
    this._state = after;
    const done = finishedJobs(before, after);
    this._changed.emit(after);
    if (done.length) {
      this._finished.emit(done);
    }
  }

  job(name: string): IJobStatus | undefined {
    return this._state.jobs.get(name);
  }

  /** Start streaming (idempotent). */
  start(): void {
    if (this._started || this._disposed) {
      return;
    }
    this._started = true;
    void this._loop();
  }

  /** Reconnect now (the Retry button) instead of waiting out the backoff. */
  retry(): void {
    this._abort?.abort();
    this._wake?.();
    void this.reload();
  }

  /** Reload the whole list with `GET /jobs`. */
  async reload(): Promise<void> {
    try {
      const jobs = await this.api.listJobs();
      this.dispatch({ type: 'snapshot', jobs });
      if (this._state.problem && this._state.problem.kind !== 'unreachable') {
        this.dispatch({ type: 'problem', problem: null });
      }
    } catch (error) {
      this.dispatch({ type: 'problem', problem: problemFrom(error) });
    }
  }

  /** Fetch `/config`; a backend that reports `ok: false` is shown as unreachable. */
  async loadConfig(): Promise<IServerConfig | null> {
    try {
      const config = await this.api.config();
      this._config = config;
      if (config.backend && config.backend.ok === false) {
        this.dispatch({
          type: 'problem',
          problem: {
            kind: 'unreachable',
            message: `The ${config.backend.name} backend is ${
              Array.isArray(config.backend.forbidden) && config.backend.forbidden.length > 0
                ? 'not allowed to work'
                : 'unreachable'
            }: ${config.backend.error ?? 'no details'}`
          }
        });
      } else if (this._state.problem?.kind === 'unreachable') {
        this.dispatch({ type: 'problem', problem: null });
      }
      return config;
    } catch (error) {
      this.dispatch({ type: 'problem', problem: problemFrom(error) });
      return null;
    }
  }

  private async _loop(): Promise<void> {
    let attempt = 0;
    while (!this._disposed) {
      const abort = new AbortController();
      this._abort = abort;
      this.dispatch({ type: 'connection', connection: 'connecting' });
      try {
        const response = await this.api.events(abort.signal);
        this._stopPoll();
        this.dispatch({ type: 'connection', connection: 'live' });
        if (this._state.problem && this._state.problem.kind !== 'unreachable') {
          this.dispatch({ type: 'problem', problem: null });
        }
        void this.loadConfig();
        const parser = new SseParser();
        await readText(response, text => {
          for (const event of parser.feed(text)) {
            attempt = 0;
            this._handle(event.event, event.data);
          }
        });
      } catch (error) {
        if (this._disposed) {
          return;
        }
        if (!abort.signal.aborted) {
          this.dispatch({ type: 'problem', problem: problemFrom(error) });
        }
      }
      if (this._disposed) {
        return;
      }
      this.dispatch({ type: 'connection', connection: 'polling' });
      this._startPoll();
      await this._sleep(backoffDelay(attempt++));
    }
  }

  private _handle(event: string, data: string): void {
    let payload: unknown;
    try {
      payload = JSON.parse(data);
    } catch {
      return; // not ours (e.g. a proxy's message); the next snapshot or poll corrects the view
    }
    switch (event) {
      case 'snapshot':
        this.dispatch({ type: 'snapshot', jobs: (payload as { jobs: IJobStatus[] }).jobs });
        break;
      case 'job':
        this.dispatch({ type: 'job', job: payload as IJobStatus });
        break;
      case 'deleted':
        this.dispatch({ type: 'deleted', name: (payload as { name: string }).name });
        break;
      case 'resync':
        this.dispatch({ type: 'resync' });
        void this.reload();
        break;
      case 'metrics':
        this._metrics.emit(payload as IMetricsSummary);
        break;
      case 'usage':
        this._usage.emit(payload as IUsage);
        break;
      case 'timeline':
        this._timeline.emit(payload as ITimelineEvent);
        break;
    }
  }

  private _startPoll(): void {
    if (this._poll !== null || this._disposed) {
      return;
    }
    void this.reload();
    this._poll = setInterval(() => void this.reload(), this._refreshSeconds * 1000);
  }

  private _stopPoll(): void {
    if (this._poll !== null) {
      clearInterval(this._poll);
      this._poll = null;
    }
  }

  private _sleep(ms: number): Promise<void> {
    return new Promise(resolve => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this._wake = done;
    });
  }

  dispose(): void {
    if (this._disposed) {
      return;
    }
    this._disposed = true;
    this._abort?.abort();
    this._stopPoll();
    this._wake?.();
    Signal.clearData(this);
  }
}
