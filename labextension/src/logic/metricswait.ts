/**
 * What the job view's Training section says while there is nothing to draw.  At the start of
 * every job there are no metrics yet: a hint to call report() then reads as if the script were
 * wrong.  So it says what the job is waiting for, and gives the report() hint only once a job
 * has trained a while (or ended) without a single report.
 */
import { __ } from '../i18n';
import { formatDuration } from './format';
import { isPreparing } from './preparing';
import { IJobStatus, TERMINAL_PHASES } from '../api/types';

/** Training time without a report after which the report() hint shows. */
export const REPORT_HINT_SECONDS = 120;

const HINT =
  'Call report(step, total=..., loss=...) from paddle_nbext_job in the training script to see progress here.';

/**
 * The words for a job with no metrics.  `trainingSince` is when its training started (ms since
 * the epoch; after the environment was prepared), null when it has not.
 */
export function metricsWaitText(
  job: IJobStatus | undefined,
  trainingSince: number | null,
  now: number
): string {
  if (!job || job.phase === 'Pending' || job.phase === 'Unknown') {
    return __('No metrics yet: the job has not started.');
  }
  if (TERMINAL_PHASES.has(job.phase)) {
    return __('This job reported no metrics.') + ' ' + __(HINT);
  }
  if (isPreparing(job) || trainingSince === null) {
    return __('No metrics yet: training starts once the environment is prepared.');
  }
  const seconds = (now - trainingSince) / 1000;
  if (seconds < REPORT_HINT_SECONDS) {
    return __('Waiting for the first report()…');
  }
  const since = formatDuration(new Date(trainingSince).toISOString(), new Date(now).toISOString());
  return __('No report() after %1 of training.', since) + ' ' + __(HINT);
}

/**
 * When training started, as far as the view can tell: the moment it saw the environment's
 * preparation end, else the job's start (a job with no requirements trains from its start).
 */
export class TrainingClock {
  private _sawPreparing = false;
  private _since: number | null = null;

  /** Follow the job's status; returns when its training started, or null. */
  update(job: IJobStatus | undefined, now: number): number | null {
    if (!job || job.phase === 'Pending' || job.phase === 'Unknown') {
      return this._since;
    }
    if (isPreparing(job)) {
      this._sawPreparing = true;
      this._since = null;
    } else if (this._since === null) {
      const started = job.started ? Date.parse(job.started) : NaN;
      this._since = this._sawPreparing || Number.isNaN(started) ? now : started;
    }
    return this._since;
  }
}
