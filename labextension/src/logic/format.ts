/**
 * Words and short figures the panel shows: ages, replica counts per phase, replica reasons.
 */
import { isPreparing } from './preparing';
import { Fraction, formatBytes } from './quantity';
import { ICheckpoints, IJobStatus, IReplica, IRoleCounts, TERMINAL_PHASES } from '../api/types';

/** "5s", "3m", "2h 5m", "3d 4h" from an ISO time to `now` (ms since the epoch). */
export function formatAge(iso: string | null, now: number): string {
  if (!iso) {
    return '';
  }
  const then = Date.parse(iso);
  if (Number.isNaN(then)) {
    return '';
  }
  const seconds = Math.max(0, Math.floor((now - then) / 1000));
  if (seconds < 60) {
    return `${seconds}s`;
  }
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) {
    return `${minutes}m`;
  }
  const hours = Math.floor(minutes / 60);
  if (hours < 24) {
    return minutes % 60 ? `${hours}h ${minutes % 60}m` : `${hours}h`;
  }
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days}d ${hours % 24}h` : `${days}d`;
}

/** Duration between two ISO times ("1m 5s"), or '' when one is missing. */
export function formatDuration(start: string | null, end: string | null): string {
  if (!start || !end) {
    return '';
  }
  const seconds = Math.max(0, Math.round((Date.parse(end) - Date.parse(start)) / 1000));
  if (Number.isNaN(seconds)) {
    return '';
  }
  if (seconds < 60) {
    return `${seconds}s`;
  }
  const minutes = Math.floor(seconds / 60);
  return seconds % 60 ? `${minutes}m ${seconds % 60}s` : `${minutes}m`;
}

const ROLE_ORDER = ['pserver', 'trainer'];

/** The job's roles, pservers first, each with its counts. */
function orderedRoles(job: IJobStatus): Array<[string, IRoleCounts]> {
  return Object.keys(job.roles || {})
    .sort((a, b) => (ROLE_ORDER.indexOf(a) + 1 || 99) - (ROLE_ORDER.indexOf(b) + 1 || 99))
    .map(role => [role, job.roles[role]]);
}

/** `tone` drives the colour: a finished job's stopped pservers are `ok`, not a failure. */
export type CountTone = 'active' | 'ok' | 'bad' | 'neutral';

export interface IRoleSummary {
  role: string;
  /** "trainers 1/2 running", "trainers 2/2 succeeded", "trainers 1/2 succeeded, 1 failed". */
  text: string;
  tone: CountTone;
  /** Every count in words, for the tooltip. */
  title: string;
}

function roleLabel(role: string, count: number): string {
  return count === 1 ? role : `${role}s`;
}

/**
 * One summary per role that reads naturally for the job's phase.
 *
 * Counts alone ("trainer 0/2") are running/desired, which makes a finished job look broken;
 * so while the job is active the fraction is what runs, and once it has ended the fraction is
 * what happened to the replicas.  Parameter servers never exit on their own: the runner stops
 * them when the trainers are done, so in a succeeded job they read "finished". A job in phase
 * `Unknown` (its record cannot be read) claims no count: "trainers ?/2".  While the replicas
 * build the job's requirements environment their processes run but do not train yet: "trainers
 * 2/2 preparing".
 */
export function roleSummaries(job: IJobStatus): IRoleSummary[] {
  const ended = TERMINAL_PHASES.has(job.phase);
  const activeWord = isPreparing(job) ? 'preparing' : 'running';
  return orderedRoles(job).map(([role, c]) => {
    const desired = c.desired;
    const label = roleLabel(role, desired);
    const title = [
      `${desired} ${roleLabel(role, desired)} wanted`,
      `${c.pending} pending`,
      `${c.running} running`,
      `${c.succeeded} succeeded`,
      `${c.failed} failed`,
      `${c.stopped} stopped`
    ].join(', ');
    if (job.phase === 'Unknown') {
      return {
        role,
        text: `${label} ?/${desired}`,
        tone: 'neutral',
        title: `${desired} ${label} wanted, state unknown`
      };
    }
    const parts: Array<[number, string]> = ended
      ? [
          [c.succeeded, 'succeeded'],
          [c.failed, 'failed'],
          [c.stopped, job.phase === 'Succeeded' ? 'finished' : 'stopped'],
          [c.running, 'still running'],
          [c.pending, 'never started']
        ]
      : [
          [c.succeeded, 'succeeded'],
          [c.failed, 'failed'],
          [c.stopped, 'stopped']
        ];
    const present = parts.filter(([n]) => n > 0);
    let text: string;
    if (!ended) {
      text = [
        `${label} ${c.running}/${desired} ${activeWord}`,
        ...present.map(([n, word]) => `${n} ${word}`)
      ].join(', ');
    } else if (present.length) {
      const [[n, word], ...rest] = present;
      text = [`${label} ${n}/${desired} ${word}`, ...rest.map(([m, w]) => `${m} ${w}`)].join(', ');
    } else {
      text = `${label} 0/${desired}`;
    }
    let tone: CountTone;
    if (c.failed > 0) {
      tone = 'bad';
    } else if (!ended) {
      tone = 'active';
    } else {
      tone = job.phase === 'Succeeded' ? 'ok' : 'neutral';
    }
    return { role, text, tone, title };
  });
}

/** "pserver 1/1 running · trainers 1/2 running, 1 succeeded" (the list row and detail view). */
export function countsText(job: IJobStatus): string {
  return roleSummaries(job)
    .map(summary => summary.text)
    .join(' · ');
}

/**
 * The replica's state in words, for the detail table (`jobPhase` explains a stop).  It says
 * what the phase column does not: what a running replica does (a trainer trains, a pserver
 * serves; "Running" beside the Running badge said nothing), and why one stopped (the user
 * cancelled the job, or the runner stopped the pservers once the trainers were done).
 */
export function replicaReason(replica: IReplica, jobPhase?: string): string {
  if (replica.reason) {
    return replica.reason;
  }
  switch (replica.phase) {
    case 'Pending':
      return 'Waiting to start';
    case 'Running': {
      const doing = replica.role === 'pserver' ? 'Serving parameters' : 'Training';
      return replica.restarts ? `${doing} (restarted ${replica.restarts}×)` : doing;
    }
    case 'Succeeded':
      return 'Completed (exit code 0)';
    case 'Failed':
      return replica.exit_code !== null && replica.exit_code !== undefined
        ? `Exit code ${replica.exit_code}`
        : 'Failed';
    case 'Stopped':
      if (jobPhase === 'Succeeded') {
        return 'Stopped by the job runner once the trainers finished';
      }
      return jobPhase === 'Cancelled'
        ? 'Stopped: the job was cancelled'
        : 'Stopped by the job runner (job ended)';
    default:
      return replica.phase;
  }
}

/** CSS-safe lower-case phase for the badge class. */
export function phaseClass(phase: string): string {
  return `pn-phase-${phase.toLowerCase().replace(/[^a-z]/g, '')}`;
}

/** The log of a job's requirements step (the server's `?role=environment`), not a replica. */
export const ENVIRONMENT_LOG = 'environment';

/** "trainer 1": how every surface names a replica (never "trainer-1"); "environment" for the installer's log. */
export function replicaName(role: string, index: number): string {
  return role === ENVIRONMENT_LOG ? role : `${role} ${index}`;
}

/** The local date and time of an ISO time, for hover titles ('' when unknown). */
export function absoluteTime(iso: string | null): string {
  if (!iso) {
    return '';
  }
  const when = new Date(iso);
  return Number.isNaN(when.getTime()) ? '' : when.toLocaleString();
}

/** Phases a job can be resumed from (`POST /jobs/{name}/resume`). */
export const RESUMABLE_PHASES: ReadonlySet<string> = new Set(['Cancelled', 'Failed']);

/** Bytes for people (`12.5Mi`). */
export function bytesText(bytes: number): string {
  return formatBytes(Fraction.of(Math.max(0, Math.round(bytes))));
}

/**
 * The checkpoint line: `3 checkpoints, latest step 1200 (36.2Mi) · resumed from job mnist-1 at
 * step 800`; '' for a job that has none and was not resumed.  Without `origin` the job it was
 * resumed from is left out (the job view says that on a line of its own, with a link).
 */
export function checkpointsText(info: ICheckpoints, origin = true): string {
  const parts: string[] = [];
  const count = info.checkpoints.length;
  if (count && info.latest) {
    parts.push(
      `${count} checkpoint${count === 1 ? '' : 's'}, latest step ${info.latest.step} (${bytesText(info.size)})`
    );
  }
  // The API promises no key of `resumed_from` (it is the record the resume left): say what it has.
  const from = info.resumed_from;
  if (origin && from?.job) {
    parts.push(
      `resumed from job ${from.job}${from.step === undefined ? '' : ` at step ${from.step}`}`
    );
  }
  return parts.join(' · ');
}
