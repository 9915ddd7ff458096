/**
 * What the panel's plugin offers other JupyterLab extensions: the live job list it keeps, so an
 * extension can show the user's Paddle jobs, react to a job that finished or ask the REST API
 * without opening a second `/events` stream of its own.
 *
 * An extension requires `IJobsModel` and imports it from `paddle-nbext-labextension`, which it
 * lists as a shared package that it does not bundle (`"sharedPackages":
 * {"paddle-nbext-labextension": {"bundled": false, "singleton": true}}` in its package.json's
 * `jupyterlab` section), so both use the one token this module creates.
 */
import { Token } from '@lumino/coreutils';
import { ISignal } from '@lumino/signaling';

import { PaddleApi } from './api/client';
import { IJobStatus, IMetricsSummary, IServerConfig, IUsage } from './api/types';
import { ITimelineEvent } from './state/model';
import { IJobsState, ITransition } from './state/state';

/** The user's jobs as the panel sees them, live from the server's `/events` stream. */
export interface IJobsModel {
  /** The REST client of `{base_url}paddle/api/v1` the panel uses. */
  readonly api: PaddleApi;
  /** The job list now: jobs by name, newest first, the connection and any problem. */
  readonly state: IJobsState;
  /** The list changed (a new state object each time; unchanged jobs keep their objects). */
  readonly changed: ISignal<IJobsModel, IJobsState>;
  /** Jobs that just reached Succeeded or Failed. */
  readonly finished: ISignal<IJobsModel, ITransition[]>;
  /** A running job's replicas reported new points. */
  readonly metrics: ISignal<IJobsModel, IMetricsSummary>;
  /** A running job's newest resource-use sample. */
  readonly usage: ISignal<IJobsModel, IUsage>;
  /** New entries of a job's timeline (warnings among them). */
  readonly timeline: ISignal<IJobsModel, ITimelineEvent>;
  /** The server's `GET /config` once loaded (backend, limits, the job schema), else null. */
  readonly config: IServerConfig | null;
  /** One job's status, if it is in the list. */
  job(name: string): IJobStatus | undefined;
  /** Reload the whole list with `GET /jobs` now. */
  reload(): Promise<void>;
}

/** The token of the panel's job model (provided by `paddle-nbext-labextension:plugin`). */
export const IJobsModel = new Token<IJobsModel>(
  'paddle-nbext-labextension:IJobsModel',
  "The live list of the user's Paddle jobs that the Paddle jobs panel keeps, with its REST client."
);
