/**
 * What a job's replicas `report()`: the pure bookkeeping the metrics view does with the answers
 * of `GET /jobs/{name}/metrics` and the `metrics` events (their shapes are in ../api/types) —
 * appending the points after a cursor, knowing when to ask for a fresh downsampled overview, and
 * the words of the progress bar.  Pure so vitest covers it without a browser.
 */

import { IMetricSeries, IMetrics, IProgress } from '../api/types';

/** Points per replica and metric the overview asks for. */
export const OVERVIEW_POINTS = 500;
/** Past this many points in one line (appended since the overview), the overview is fetched again. */
export const REFETCH_POINTS = 4 * OVERVIEW_POINTS;

/** The server's key of a replica's series (as in a cursor): `trainer-0`, `trainer-0.rank-2`. */
export function replicaId(replica: { role: string; index: number; rank?: number | null }): string {
  const base = `${replica.role}-${replica.index}`;
  return replica.rank ? `${base}.rank-${replica.rank}` : base;
}

/**
 * A series' name in charts, as the replica table names the replica: `trainer 0`, and each rank
 * of a trainer of several, `trainer 0 · rank 2` (legends said `trainer-0` beside tables that say
 * `trainer 0`).
 */
export function seriesName(replica: { role: string; index: number; rank?: number | null }): string {
  const base = `${replica.role} ${replica.index}`;
  return replica.rank === null || replica.rank === undefined
    ? base
    : `${base} · rank ${replica.rank}`;
}

/** Counts per replica of a cursor (`trainer-0:12,trainer-1:10`). */
export function cursorCounts(cursor: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const part of cursor.split(',')) {
    const at = part.lastIndexOf(':');
    if (at > 0) {
      counts.set(part.slice(0, at), Number(part.slice(at + 1)));
    }
  }
  return counts;
}

/**
 * `base` with the points of `newer` (an answer to `since=base.cursor`) appended.  A replica
 * whose count went down started its file over, and one the server marks `replaced` (a restart
 * dropped points `base` holds): its series are replaced, not appended.
 */
export function mergeMetrics(base: IMetrics, newer: IMetrics): IMetrics {
  const old = new Map(base.replicas.map(r => [replicaId(r), r]));
  const replicas = newer.replicas.map(replica => {
    const before = old.get(replicaId(replica));
    if (!before || replica.count < before.count || replica.replaced) {
      return replica;
    }
    const series: { [metric: string]: IMetricSeries } = {};
    for (const [name, columns] of Object.entries(before.series)) {
      series[name] = columns;
    }
    for (const [name, columns] of Object.entries(replica.series)) {
      const had = series[name];
      series[name] = had
        ? {
            step: had.step.concat(columns.step),
            time: had.time.concat(columns.time),
            value: had.value.concat(columns.value)
          }
        : columns;
    }
    return { ...replica, series };
  });
  return { ...newer, points: base.points, replicas };
}

/** The steps where any replica restarted (a whole-job restart), each once, in order. */
export function restartSteps(metrics: IMetrics): number[] {
  const steps = new Set<number>();
  for (const replica of metrics.replicas) {
    for (const mark of replica.restarts ?? []) {
      steps.add(mark.step);
    }
  }
  return [...steps].sort((a, b) => a - b);
}

/** The longest line (points of one replica's metric) in `metrics`. */
export function longestSeries(metrics: IMetrics): number {
  let longest = 0;
  for (const replica of metrics.replicas) {
    for (const columns of Object.values(replica.series)) {
      longest = Math.max(longest, columns.step.length);
    }
  }
  return longest;
}

/** Every metric name reported by any replica, `loss` first, then in first-seen order. */
export function metricNames(metrics: IMetrics): string[] {
  const names: string[] = [];
  for (const replica of metrics.replicas) {
    for (const name of Object.keys(replica.series)) {
      if (!names.includes(name)) {
        names.push(name);
      }
    }
  }
  return names.sort((a, b) => (a === 'loss' ? -1 : b === 'loss' ? 1 : 0));
}

/** `1h 5m`, `3m 20s`, `45s`. */
export function etaText(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) {
    return '';
  }
  const whole = Math.max(0, Math.round(seconds));
  const hours = Math.floor(whole / 3600);
  const minutes = Math.floor((whole % 3600) / 60);
  const secs = whole % 60;
  if (hours) {
    return `${hours}h ${minutes}m`;
  }
  return minutes ? `${minutes}m ${secs}s` : `${secs}s`;
}

export interface IProgressView {
  /** 0..1 */
  fraction: number;
  /** `step 120/400 · 30%` */
  label: string;
  /** `ETA 3m 20s`, or empty. */
  eta: string;
}

/**
 * What the bar shows for a job's progress and phase: a succeeded job is complete whatever its
 * last report said; an ended one shows no ETA.  Null when nothing reports a total.
 */
export function progressView(progress: IProgress | null, phase: string): IProgressView | null {
  if (!progress && phase !== 'Succeeded') {
    return null;
  }
  if (!progress) {
    return { fraction: 1, label: '100%', eta: '' };
  }
  const fraction = phase === 'Succeeded' ? 1 : Math.min(1, Math.max(0, progress.fraction));
  const step = phase === 'Succeeded' ? Math.max(progress.step, progress.total) : progress.step;
  const running = phase === 'Running';
  const eta = running && fraction < 1 ? etaText(progress.eta_seconds) : '';
  return {
    fraction,
    label: `${step}/${progress.total} · ${Math.round(fraction * 100)}%`,
    eta: eta ? `ETA ${eta}` : ''
  };
}
