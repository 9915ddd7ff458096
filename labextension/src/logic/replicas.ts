/**
 * Which replica a job view opens on.  A failed job opens on the replica that failed it (the one
 * whose error the job's message quotes), never on a pserver the runner stopped afterwards; any
 * other job opens on its first trainer, whose log is where training shows.  When the message
 * names the rank of a trainer that failed (`trainer 1 rank 2 failed: ...`), it opens on that
 * rank's lines, where the traceback is whole.
 */
import { IJobStatus, IReplica } from '../api/types';
import { IRankRef, failedRank, ranksOf, ranksPerTrainer } from './ranks';

function byRoleThenIndex(a: IReplica, b: IReplica): number {
  if (a.role !== b.role) {
    return a.role === 'trainer' ? -1 : b.role === 'trainer' ? 1 : a.role < b.role ? -1 : 1;
  }
  return a.index - b.index;
}

export function replicaToOpen(job: IJobStatus): IRankRef | null {
  const replicas = [...job.replicas].sort(byRoleThenIndex);
  if (!replicas.length) {
    return null;
  }
  if (job.phase === 'Failed') {
    const failed = replicas.filter(r => r.phase === 'Failed');
    const named = failed.find(r => new RegExp(`\\b${r.role} ${r.index}\\b`).test(job.message));
    const quoted = failed.find(r => r.reason && job.message.includes(r.reason));
    const pick = named ?? quoted ?? failed[0];
    if (pick) {
      const rank = pick.role === 'trainer' ? failedRank(job, pick.index) : null;
      const ranks = ranksOf(pick, ranksPerTrainer(job.spec));
      return rank !== null && ranks > 1 && rank < ranks
        ? { role: pick.role, index: pick.index, rank }
        : { role: pick.role, index: pick.index };
    }
  }
  const first = replicas[0];
  return { role: first.role, index: first.index };
}
