/**
 * Ranks inside a trainer: a trainer runs one process per GPU, or `procs_per_trainer` CPU
 * ranks, and its one log carries every rank's lines prefixed `[rank r] ` (runtime/gang.py).
 * The job status stays per trainer; what is per rank is the log lines, the `report()` series
 * (`rank` in the metrics answer) and the failure the job's message names
 * (`trainer 1 rank 2 failed: ...`).  These pure functions let the replica table group ranks
 * under their trainer, the log picker offer `trainer 1 · rank 2` and filter the trainer's log
 * by that prefix, and the charts name each rank's curve.  Pure so vitest covers them.
 */
import { ENVIRONMENT_LOG, replicaName } from './format';
import { launchEntry } from './validate';
import { IJobStatus, IReplica } from '../api/types';

/** A replica, or one rank of a trainer of several processes (`rank` absent: the whole log). */
export interface IRankRef {
  role: string;
  index: number;
  rank?: number;
}

/**
 * Processes each trainer of a job runs, as the launcher starts them: one per GPU, else
 * `procs_per_trainer`; 1 for an entry point that runs `paddle.distributed.launch` itself (its
 * ranks' lines carry no prefix of ours).  Mirrors the server's `metrics.ranks_per_trainer`.
 */
export function ranksPerTrainer(spec: { [key: string]: unknown }): number {
  const entry = spec.entry_point;
  if (typeof entry === 'string' && launchEntry(entry)) {
    return 1;
  }
  const count = spec.trainer_gpu || spec.procs_per_trainer || 1;
  return typeof count === 'number' && Number.isInteger(count) && count > 0 ? count : 1;
}

/** The ranks a replica runs (pservers and single-process trainers: 1). */
export function ranksOf(replica: { role: string }, ranks: number): number {
  return replica.role === 'trainer' ? ranks : 1;
}

/** `trainer-1`, `trainer-1.rank-2`: the server's own key of a series (and the picker's value). */
export function rankKey(ref: IRankRef): string {
  const base = `${ref.role}-${ref.index}`;
  return ref.rank === undefined ? base : `${base}.rank-${ref.rank}`;
}

/** The reference a `rankKey` names, or null for anything else. */
export function parseRankKey(key: string): IRankRef | null {
  const found = /^([a-z]+)-(\d+)(?:\.rank-(\d+))?$/.exec(key);
  if (!found) {
    return null;
  }
  const ref: IRankRef = { role: found[1], index: Number(found[2]) };
  if (found[3] !== undefined) {
    ref.rank = Number(found[3]);
  }
  return ref;
}

/** `trainer 1`, `trainer 1 · rank 2`. */
export function rankName(ref: IRankRef): string {
  const name = replicaName(ref.role, ref.index);
  return ref.rank === undefined ? name : `${name} · rank ${ref.rank}`;
}

/** The rank the job's message says failed trainer `index` (`trainer 1 rank 2 failed`), or null. */
export function failedRank(job: IJobStatus, index: number): number | null {
  const found = new RegExp(`\\btrainer ${index} rank (\\d+) failed\\b`).exec(job.message);
  return found ? Number(found[1]) : null;
}

/** What the failed rank's row says: the message's words after `failed` (`ValueError: ...`). */
export function failedRankReason(job: IJobStatus, index: number): string {
  const found = new RegExp(
    `\\btrainer ${index} rank \\d+ failed(?: after \\d+ restarts?)?:? ?(.*)$`
  ).exec(job.message);
  return found ? found[1].replace(/^with /, '') : '';
}

/** One row group of the replica table: a replica and, for a trainer of several ranks, its ranks. */
export interface IReplicaGroup {
  replica: IReplica;
  /** Processes it runs; rank rows only when more than one. */
  ranks: number;
  /** The rank the job's message blames, or null. */
  failed: number | null;
}

export function replicaGroups(job: IJobStatus): IReplicaGroup[] {
  const ranks = ranksPerTrainer(job.spec);
  return job.replicas.map(replica => {
    const count = ranksOf(replica, ranks);
    const failed = count > 1 && replica.role === 'trainer' ? failedRank(job, replica.index) : null;
    return { replica, ranks: count, failed: failed !== null && failed < count ? failed : null };
  });
}

/** One choice of the log picker. */
export interface ILogChoice {
  value: string;
  label: string;
  ref: IRankRef;
}

/**
 * The log picker's choices: each replica's whole log, and after a trainer of several ranks one
 * choice per rank (`trainer 1 · rank 2`), so the closed picker always says which trainer.  A job
 * with a requirements file (`environment`) also offers its installer's log, last.
 */
export function logChoices(replicas: IReplica[], ranks: number, environment = false): ILogChoice[] {
  const choices: ILogChoice[] = [];
  for (const replica of replicas) {
    const base: IRankRef = { role: replica.role, index: replica.index };
    const count = ranksOf(replica, ranks);
    choices.push({
      value: rankKey(base),
      label: count > 1 ? `${rankName(base)} · ${count} ranks` : rankName(base),
      ref: base
    });
    for (let rank = 0; count > 1 && rank < count; rank++) {
      const ref = { ...base, rank };
      choices.push({ value: rankKey(ref), label: rankName(ref), ref });
    }
  }
  if (environment) {
    const ref: IRankRef = { role: ENVIRONMENT_LOG, index: 0 };
    choices.push({ value: rankKey(ref), label: 'environment (requirements)', ref });
  }
  return choices;
}

/** The prefix rank `rank`'s lines carry in its trainer's log (runtime/gang.py `rank_prefix`). */
export function rankPrefix(rank: number): string {
  return `[rank ${rank}] `;
}

const ANY_RANK = /^\[rank \d+\] /;

/**
 * Keeps, of a stream of a trainer's log chunks, rank `rank`'s lines without their prefix and the
 * launcher's own lines (no prefix: waiting for pservers, `trainer 1 rank 2 failed: ...`); other
 * ranks' lines are counted as hidden.  A chunk may end mid-line: that part waits for its newline
 * (or `end()`).
 */
export class RankFilter {
  private _partial = '';
  private _hidden = 0;
  private readonly _prefix: string;

  constructor(readonly rank: number) {
    this._prefix = rankPrefix(rank);
  }

  /** Other ranks' lines dropped so far. */
  get hidden(): number {
    return this._hidden;
  }

  feed(chunk: string): string {
    const text = this._partial + chunk;
    const cut = text.lastIndexOf('\n') + 1;
    this._partial = text.slice(cut);
    return this._keep(text.slice(0, cut));
  }

  end(): string {
    const rest = this._partial;
    this._partial = '';
    return this._keep(rest);
  }

  private _keep(text: string): string {
    if (!text) {
      return '';
    }
    const lines = text.split('\n');
    const kept: string[] = [];
    lines.forEach((line, i) => {
      const last = i === lines.length - 1;
      if (last && line === '') {
        return;
      }
      const end = last ? '' : '\n';
      if (line.startsWith(this._prefix)) {
        kept.push(line.slice(this._prefix.length) + end);
      } else if (ANY_RANK.test(line)) {
        this._hidden++;
      } else {
        kept.push(line + end);
      }
    });
    return kept.join('');
  }
}
