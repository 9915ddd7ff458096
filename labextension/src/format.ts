/**
 * Words and short figures the panel shows: ages, replica counts, replica reasons.
 */
import { IJobStatus, IReplica } from './types';

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

/** One entry per role: running/desired, e.g. `[{role: 'pserver', text: '1/1'}, ...]`. */
export function roleCounts(job: IJobStatus): Array<{ role: string; running: number; total: number }> {
  const roles = Object.keys(job.roles || {}).sort(
    (a, b) => (ROLE_ORDER.indexOf(a) + 1 || 99) - (ROLE_ORDER.indexOf(b) + 1 || 99)
  );
  return roles.map(role => {
    const counts = job.roles[role];
    return { role, running: counts.running, total: counts.desired };
  });
}

/** "pserver 1/1 · trainer 2/2" (running/total per role). */
export function countsText(job: IJobStatus): string {
  return roleCounts(job)
    .map(({ role, running, total }) => `${role} ${running}/${total}`)
    .join(' · ');
}

/** The replica's state in words, for the detail table. */
export function replicaReason(replica: IReplica): string {
  if (replica.reason) {
    return replica.reason;
  }
  switch (replica.phase) {
    case 'Pending':
      return 'Waiting to start';
    case 'Running':
      return replica.restarts ? `Running (restarted ${replica.restarts}×)` : 'Running';
    case 'Succeeded':
      return 'Completed (exit code 0)';
    case 'Failed':
      return replica.exit_code !== null && replica.exit_code !== undefined
        ? `Exit code ${replica.exit_code}`
        : 'Failed';
    case 'Stopped':
      return 'Stopped by the job runner (job ended)';
    default:
      return replica.phase;
  }
}

/** CSS-safe lower-case phase for the badge class. */
export function phaseClass(phase: string): string {
  return `pn-phase-${phase.toLowerCase().replace(/[^a-z]/g, '')}`;
}
