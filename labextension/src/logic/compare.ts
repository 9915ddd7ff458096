/**
 * Runs side by side: what the comparison view decides without drawing.  The facts (which spec
 * fields and code files differ, final and best values, each job's colour) come from the server's
 * `GET /compare`, the same answer `paddle_nbext.compare()` draws in a notebook; here they become
 * lines for the chart (one per job, in its colour, x in steps or wall time), the rows of the
 * tables in words, and which job did best on each metric.
 */
import { ICompareRun, IComparison, IMetrics, IRunMetric } from '../api/types';
import { replicaId } from './metrics';

/** What the x axis counts (as `views/chart.ts` has it). */
export type CompareAxis = 'step' | 'time';

/** One job's line of the chosen metric (`views/chart.ts`'s `ILine`, coloured). */
export interface ICompareLine {
  name: string;
  colour: string;
  x: number[];
  y: number[];
}

/** At most this many jobs in one comparison (the server's `comparison.MAX_COMPARED`). */
export const MAX_COMPARED = 12;

/** The metric to show: the one chosen while it is still reported, else the first (`loss` first). */
export function shownMetric(comparison: IComparison | null, chosen: string | null): string | null {
  const names = comparison?.metrics ?? [];
  if (chosen !== null && names.includes(chosen)) {
    return chosen;
  }
  return names.length ? names[0] : null;
}

/** Seconds since the epoch when the run started (else was created), for the wall-time axis. */
export function runStart(run: ICompareRun): number | null {
  const text = run.started ?? run.created;
  const when = text ? Date.parse(text) : NaN;
  return Number.isFinite(when) ? when / 1000 : null;
}

/**
 * One line per job that reports `metric`, from the replica the server names as the job's
 * (trainer 0, else the first reporting it), in the job's colour; on the wall-time axis x is
 * seconds since the job started (since its first point when the start is unknown), so runs
 * started hours apart overlay.
 */
export function compareLines(
  comparison: IComparison,
  metrics: ReadonlyMap<string, IMetrics>,
  metric: string,
  axis: CompareAxis
): ICompareLine[] {
  const lines: ICompareLine[] = [];
  for (const run of comparison.runs) {
    const summary: IRunMetric | undefined = run.metrics[metric];
    const answer = metrics.get(run.name);
    const replica = summary && answer?.replicas.find(r => replicaId(r) === summary.replica);
    const columns = replica ? replica.series[metric] : undefined;
    if (!columns || !columns.step.length) {
      continue;
    }
    let x = columns.step;
    if (axis === 'time') {
      const start = runStart(run) ?? columns.time[0];
      x = columns.time.map(t => Math.max(0, t - start));
    }
    lines.push({ name: run.name, colour: run.colour, x, y: columns.value });
  }
  return lines;
}

/** A spec value in words: `–` for none, JSON for lists and objects. */
export function valueText(value: unknown): string {
  if (value === null || value === undefined || value === '') {
    return '–';
  }
  if (typeof value === 'string') {
    return value;
  }
  if (typeof value === 'number' || typeof value === 'boolean') {
    return String(value);
  }
  return JSON.stringify(value);
}

export interface ISpecRow {
  field: string;
  label: string;
  /** Each job's value in words, in the comparison's order. */
  values: string[];
}

/** The differing spec fields as rows of words, one cell per job in the comparison's order. */
export function specRows(comparison: IComparison): ISpecRow[] {
  return comparison.spec.map(row => ({
    field: row.field,
    label: row.label,
    values: comparison.jobs.map(name => valueText(row.values[name]))
  }));
}

/** Characters of a content hash shown (as `paddle_nbext.comparison.SHORT_HASH`). */
export const SHORT_HASH = 12;

export interface ICodeRow {
  path: string;
  /** Per job in the comparison's order: its short hash, `missing`, or `–` (no snapshot). */
  cells: string[];
}

/** The files that differ, one cell per job: a short hash, `missing`, or `–` without a snapshot. */
export function codeRows(comparison: IComparison): ICodeRow[] {
  const compared = new Set(comparison.code.compared);
  return comparison.code.files.map(file => ({
    path: file.path,
    cells: comparison.jobs.map(name => {
      if (!compared.has(name)) {
        return '–';
      }
      const hash = file.hashes[name];
      return hash ? hash.slice(0, SHORT_HASH) : 'missing';
    })
  }));
}

export interface IMetricCell {
  /** `0.312 (step 400)` */
  final: string;
  /** `0.298 (step 350)`, or `–` when the metric's name says not which way is better. */
  best: string;
  /** This job's best is the best of all compared (ties: every one of them). */
  leads: boolean;
}

/** `0.0123`, `1.2e-5`: four significant digits. */
export function numberText(value: number): string {
  if (!Number.isFinite(value)) {
    return String(value);
  }
  const size = Math.abs(value);
  if (value !== 0 && (size >= 1e6 || size < 1e-4)) {
    return value.toExponential(3).replace('e+', 'e');
  }
  return String(Number(value.toPrecision(4)));
}

/**
 * Final and best of `metric` for each job in the comparison's order (null: the job does not
 * report it), marking the job(s) whose best is the best of all.
 */
export function metricCells(comparison: IComparison, metric: string): (IMetricCell | null)[] {
  const summaries = comparison.runs.map(run => run.metrics[metric] ?? null);
  const bests = summaries
    .filter((s): s is IRunMetric => s !== null && s.best !== null && s.goal !== null)
    .map(s => ({ best: s.best as number, goal: s.goal }));
  let leader: number | null = null;
  if (bests.length > 1) {
    const values = bests.map(b => b.best);
    leader = bests[0].goal === 'min' ? Math.min(...values) : Math.max(...values);
  }
  return summaries.map(summary => {
    if (summary === null) {
      return null;
    }
    const best =
      summary.best === null || summary.best_step === null
        ? '–'
        : `${numberText(summary.best)} (step ${summary.best_step})`;
    return {
      final: `${numberText(summary.final)} (step ${summary.final_step})`,
      best,
      leads: leader !== null && summary.best === leader
    };
  });
}

/** The comparison's jobs that may still change (not ended): the view keeps them live. */
export function liveJobs(comparison: IComparison | null, ended: ReadonlySet<string>): string[] {
  return (comparison?.runs ?? []).filter(run => !ended.has(run.phase)).map(run => run.name);
}
