/**
 * A job whose replicas are still building its requirements environment.  The API reports such
 * a job as `Running` (its replicas' processes run: they install packages), with the message
 * `Preparing environment: 12 packages (uv)` (`runtime/environments.py: phase_message`); read as
 * Running, the row and the replica table looked as if training had started.  Every surface asks
 * here instead, and says "Preparing" until training starts.
 */
import { IJobStatus, IReplica, TERMINAL_PHASES } from '../api/types';

/** How the server's message begins while the environment is built. */
export const PREPARING_MESSAGE = 'Preparing environment';

/** The phase word shown for a preparing job (its badge, its row). */
export const PREPARING_PHASE = 'Preparing';

/** Whether the job's replicas are building its environment (training has not started). */
export function isPreparing(job: IJobStatus): boolean {
  return (
    !TERMINAL_PHASES.has(job.phase) && (job.message ?? '').trimStart().startsWith(PREPARING_MESSAGE)
  );
}

/** The phase to show: `Preparing` while the environment is built, else the job's phase. */
export function shownPhase(job: IJobStatus): string {
  return isPreparing(job) ? PREPARING_PHASE : job.phase;
}

/** A replica's phase to show: a running replica of a preparing job is preparing. */
export function shownReplicaPhase(job: IJobStatus, replica: IReplica): string {
  return replica.phase === 'Running' && isPreparing(job) ? PREPARING_PHASE : replica.phase;
}
