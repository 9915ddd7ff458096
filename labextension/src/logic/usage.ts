/**
 * Resource use in words and shapes, without DOM: the figures of one replica (`0.98 cores`,
 * `1.8 GiB of 2 GiB`), the fraction of its memory limit a bar fills, the points of a sparkline,
 * and the recent samples kept per replica between the first `GET /usage` and later `usage` events.
 */
import { __ } from '../i18n';
import { IReplicaUsage, IUsage, IUsageSample } from '../api/types';

/** Samples kept per replica for its sparkline (the server keeps as many). */
export const HISTORY = 60;
/** Where a bar turns to a warning, as the server warns (90 % of the limit). */
export const WARN_FRACTION = 0.9;

/** Bytes for people: `1.8 GiB`, `512 MiB`, `-` for none (the server's words use the same units). */
export function gib(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined) {
    return '-';
  }
  const units: Array<[string, number]> = [
    ['TiB', 2 ** 40],
    ['GiB', 2 ** 30],
    ['MiB', 2 ** 20],
    ['KiB', 2 ** 10]
  ];
  for (const [unit, size] of units) {
    if (bytes >= size) {
      return `${(bytes / size).toFixed(1).replace(/\.0$/, '')} ${unit}`;
    }
  }
  return `${Math.round(bytes)} B`;
}

/** `0.98` cores, or `-` before the second sample and after the end. */
export function coresText(cores: number | null | undefined): string {
  return cores === null || cores === undefined ? '-' : cores.toFixed(2);
}

/** The replica table's key of a replica (`trainer-1`, as `replicaKey`). */
export function usageKey(replica: Pick<IReplicaUsage, 'role' | 'index'>): string {
  return `${replica.role}-${replica.index}`;
}

/** How much of its memory limit the replica uses (0..1+), or null without a limit or a reading. */
export function memoryFraction(replica: IReplicaUsage): number | null {
  if (replica.memory === null || !replica.memory_limit) {
    return null;
  }
  return replica.memory / replica.memory_limit;
}

/** `0.98 cores of 1 · 1.8 GiB of 2 GiB`: the replica table's figures. */
export function usageSummary(replica: IReplicaUsage): string {
  if (replica.memory === null) {
    return replica.peak_memory ? __('peak %1', gib(replica.peak_memory)) : '';
  }
  const cpu =
    replica.cpu_request !== null
      ? __('%1 of %2 cores', coresText(replica.cpu), String(replica.cpu_request))
      : __('%1 cores', coresText(replica.cpu));
  const memory = replica.memory_limit
    ? __('%1 of %2', gib(replica.memory), gib(replica.memory_limit))
    : __('%1 (no limit)', gib(replica.memory));
  return `${cpu} · ${memory}`;
}

/** `rank 0: 0.98 cores · 300 MiB; rank 1: ...`: each rank's own figures, for a trainer of several. */
export function ranksSummary(replica: IReplicaUsage): string {
  return (replica.ranks ?? [])
    .map(rank =>
      __(
        'rank %1: %2 cores · %3',
        rank.rank,
        coresText(rank.cpu),
        gib(rank.memory ?? rank.peak_memory)
      )
    )
    .join('; ');
}

/** The words the panel shows instead of figures. */
export function unavailableText(usage: Pick<IUsage, 'reason'>): string {
  return __('Resource use is not available: %1.', usage.reason ?? __('the server did not say why'));
}

/**
 * SVG polyline points of `values` in a `width` × `height` box, oldest left; gaps (null) are
 * skipped.  The scale starts at 0 so a flat line near the top means "near its highest".
 */
export function sparklinePoints(
  values: Array<number | null>,
  width: number,
  height: number,
  top?: number
): string {
  const known = values.filter((v): v is number => v !== null && Number.isFinite(v));
  if (!known.length) {
    return '';
  }
  const highest = Math.max(top ?? 0, ...known) || 1;
  const step = values.length > 1 ? width / (values.length - 1) : 0;
  const points: string[] = [];
  values.forEach((value, i) => {
    if (value === null || !Number.isFinite(value)) {
      return;
    }
    const x = (i * step).toFixed(1);
    const y = (height - (value / highest) * height).toFixed(1);
    points.push(`${x},${y}`);
  });
  return points.join(' ');
}

/** Recent samples per replica: filled by `GET /usage`, extended by each `usage` event. */
export class UsageHistory {
  private readonly _samples = new Map<string, IUsageSample[]>();
  private _sampled: string | null = null;

  /** Take a whole answer (with history) or an event (without): what is new is appended. */
  add(usage: IUsage): void {
    if (usage.sampled !== null && usage.sampled === this._sampled) {
      return;
    }
    this._sampled = usage.sampled;
    const at = usage.sampled ? Date.parse(usage.sampled) / 1000 : Date.now() / 1000;
    for (const replica of usage.replicas) {
      const key = usageKey(replica);
      if (replica.history) {
        this._samples.set(key, replica.history.slice(-HISTORY));
        continue;
      }
      const samples = this._samples.get(key) ?? [];
      samples.push({ t: at, cpu: replica.cpu, memory: replica.memory });
      this._samples.set(key, samples.slice(-HISTORY));
    }
  }

  samples(key: string): IUsageSample[] {
    return this._samples.get(key) ?? [];
  }
}
