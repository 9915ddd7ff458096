// @vitest-environment happy-dom
import { Signal } from '@lumino/signaling';
import { describe, expect, it } from 'vitest';

import { ITimelineEvent } from '../state/model';
import { TimelineView, lastSeq, mergeEntries } from '../views/timelineview';
import { ITimeline, ITimelineEntry, IUsage } from '../api/types';
import {
  UsageHistory,
  gib,
  memoryFraction,
  ranksSummary,
  sparklinePoints,
  unavailableText,
  usageSummary
} from '../logic/usage';
import { UsageView } from '../views/usageview';

const GiB = 2 ** 30;

function usage(memory: number | null, extra: Partial<IUsage> = {}): IUsage {
  return {
    name: 'job-a',
    available: true,
    reason: null,
    sampled: '2026-12-05T14:02:11.000Z',
    interval: 2,
    replicas: [
      {
        role: 'trainer',
        index: 1,
        phase: 'Running',
        cpu: 0.984,
        memory,
        processes: 2,
        peak_cpu: 1.2,
        peak_memory: 1.9 * GiB,
        cpu_request: 1,
        cpu_limit: null,
        memory_request: 2 * GiB,
        memory_limit: 2 * GiB,
        history: [
          { t: 1, cpu: null, memory: GiB },
          { t: 3, cpu: 0.5, memory: 1.5 * GiB }
        ]
      }
    ],
    ...extra
  };
}

function entry(seq: number, kind: ITimelineEntry['kind'], text: string): ITimelineEntry {
  return { seq, t: '2026-12-05T14:02:11.000Z', kind, text };
}

class FakeModel {
  usage = new Signal<this, IUsage>(this);
  timeline = new Signal<this, ITimelineEvent>(this);
}

async function settle(): Promise<void> {
  await new Promise(resolve => setTimeout(resolve, 0));
}

describe('resource use in words', () => {
  it('says memory beside its limit and CPU beside its request', () => {
    const replica = usage(1.84 * GiB).replicas[0];
    expect(gib(1.84 * GiB)).toBe('1.8 GiB');
    expect(gib(512 * 2 ** 20)).toBe('512 MiB');
    expect(gib(null)).toBe('-');
    expect(usageSummary(replica)).toBe('0.98 of 1 cores · 1.8 GiB of 2 GiB');
    expect(memoryFraction(replica)).toBeCloseTo(0.92);
  });

  it('says no limit, and only the peak once the replica stopped', () => {
    const replica = { ...usage(GiB).replicas[0], memory_limit: null };
    expect(usageSummary(replica)).toBe('0.98 of 1 cores · 1 GiB (no limit)');
    expect(memoryFraction(replica)).toBeNull();
    const ended = { ...usage(null).replicas[0], cpu: null };
    expect(usageSummary(ended)).toBe('peak 1.9 GiB');
  });

  it('says each rank of a trainer of several', () => {
    const replica = {
      ...usage(GiB).replicas[0],
      ranks: [
        { rank: 0, cpu: 0.5, memory: 300 * 2 ** 20, peak_cpu: 0.6, peak_memory: 310 * 2 ** 20 },
        { rank: 1, cpu: null, memory: null, peak_cpu: 0.7, peak_memory: 320 * 2 ** 20 }
      ]
    };
    expect(ranksSummary(replica)).toBe('rank 0: 0.50 cores · 300 MiB; rank 1: - cores · 320 MiB');
    expect(ranksSummary(usage(GiB).replicas[0])).toBe('');
  });

  it('says why there are no figures', () => {
    expect(
      unavailableText({ reason: 'the job has not started yet, so nothing runs to measure' })
    ).toBe(
      'Resource use is not available: the job has not started yet, so nothing runs to measure.'
    );
  });

  it('draws a sparkline from zero, skipping gaps', () => {
    expect(sparklinePoints([1, null, 2], 10, 10)).toBe('0.0,5.0 10.0,0.0');
    expect(sparklinePoints([null], 10, 10)).toBe('');
    expect(sparklinePoints([1, 1], 10, 10, 2)).toBe('0.0,5.0 10.0,5.0');
  });

  it('keeps the history of the answer and appends each event once', () => {
    const history = new UsageHistory();
    history.add(usage(GiB));
    expect(history.samples('trainer-1').map(s => s.memory)).toEqual([GiB, 1.5 * GiB]);
    const event = usage(1.8 * GiB, { sampled: '2026-12-05T14:02:13.000Z' });
    delete event.replicas[0].history;
    history.add(event);
    history.add(event);
    expect(history.samples('trainer-1').map(s => s.memory)).toEqual([GiB, 1.5 * GiB, 1.8 * GiB]);
  });
});

describe('UsageView', () => {
  it('shows each replica with a bar and fills the replica table, live from events', async () => {
    const model = new FakeModel();
    const rows = document.createElement('tbody');
    rows.innerHTML = '<tr data-replica="trainer-1"><td class="pn-usage"></td></tr>';
    const view = new UsageView({
      api: { usage: () => Promise.resolve(usage(GiB)) },
      model,
      name: 'job-a',
      replicaRows: () => rows
    });
    await settle();
    const line = view.node.querySelector('[data-testid="paddle-usage-replica"]')!;
    expect(line.textContent).toContain('trainer 1');
    expect(line.textContent).toContain('1 GiB of 2 GiB');
    expect(line.querySelector('polyline')!.getAttribute('points')).not.toBe('');
    expect(rows.querySelector('.pn-usage')!.textContent).toBe('0.98 of 1 cores · 1 GiB of 2 GiB');
    const high = usage(1.84 * GiB, { sampled: '2026-12-05T14:02:13.000Z' });
    model.usage.emit(high);
    model.usage.emit({ ...high, name: 'job-b', replicas: [] }); // another job's: ignored
    expect(view.node.querySelector('.pn-usage-bar')!.classList.contains('pn-usage-high')).toBe(
      true
    );
    expect(rows.querySelector('.pn-usage-bar')!.getAttribute('aria-label')).toBe(
      '92% of its memory limit'
    );
    view.dispose();
  });

  it('shows a dash in the table for a replica with neither figures nor a peak yet', async () => {
    const rows = document.createElement('tbody');
    rows.innerHTML = '<tr data-replica="trainer-1"><td class="pn-usage"></td></tr>';
    const fresh = usage(null);
    fresh.replicas[0] = { ...fresh.replicas[0], cpu: null, peak_memory: 0, history: [] };
    const view = new UsageView({
      api: { usage: () => Promise.resolve(fresh) },
      model: new FakeModel(),
      name: 'job-a',
      replicaRows: () => rows
    });
    await settle();
    expect(rows.querySelector('.pn-usage')!.textContent).toBe('—');
    view.dispose();
  });

  it('says why resource use is not available', async () => {
    const view = new UsageView({
      api: {
        usage: () =>
          Promise.resolve({
            ...usage(null),
            available: false,
            reason: 'resource use is off on this server (c.LocalBackend.usage_interval = 0)',
            replicas: []
          })
      },
      model: new FakeModel(),
      name: 'job-a'
    });
    await settle();
    expect(view.node.querySelector('[data-testid="paddle-usage-reason"]')!.textContent).toBe(
      'Resource use is not available: resource use is off on this server (c.LocalBackend.usage_interval = 0).'
    );
    view.dispose();
  });
});

describe('TimelineView', () => {
  it('lists entries oldest first, marks warnings and adds new ones once', async () => {
    const model = new FakeModel();
    const answer: ITimeline = {
      name: 'job-a',
      available: true,
      reason: null,
      entries: [
        entry(1, 'submitted', 'Submitted.'),
        entry(2, 'started', 'trainer 0 started on this machine (pid 7).')
      ],
      last: 2
    };
    const view = new TimelineView({
      api: { timeline: () => Promise.resolve(answer) },
      model,
      name: 'job-a'
    });
    await settle();
    const warning = entry(
      3,
      'warning',
      'Memory: trainer 1 uses 1.8 GiB of its 2 GiB limit; it is stopped if it goes over.'
    );
    model.timeline.emit({ name: 'job-a', entries: [warning] });
    model.timeline.emit({ name: 'job-a', entries: [warning] });
    model.timeline.emit({ name: 'job-b', entries: [entry(9, 'ended', 'Succeeded.')] });
    const items = [...view.node.querySelectorAll('[data-testid="paddle-timeline-entry"]')];
    expect(items.map(item => item.getAttribute('data-kind'))).toEqual([
      'submitted',
      'started',
      'warning'
    ]);
    expect(items[2].classList.contains('pn-timeline-warning')).toBe(true);
    expect(items[2].textContent).toContain('trainer 1 uses 1.8 GiB of its 2 GiB limit');
    expect(view.node.querySelector('summary')!.textContent).toBe('Timeline (3)');
    view.dispose();
  });

  it('fetches the list again when an event skips entries it never saw', async () => {
    const model = new FakeModel();
    const served: ITimelineEntry[] = [];
    let calls = 0;
    const view = new TimelineView({
      api: {
        timeline: () => {
          calls++;
          return Promise.resolve({
            name: 'job-a',
            available: true,
            reason: null,
            entries: [...served],
            last: served.length
          });
        }
      },
      model,
      name: 'job-a'
    });
    await settle(); // the first GET came before the job's master wrote anything
    served.push(
      entry(1, 'submitted', 'Submitted.'),
      entry(2, 'admitted', 'Admitted.'),
      entry(3, 'started', 'Started.')
    );
    model.timeline.emit({ name: 'job-a', entries: [entry(3, 'started', 'Started.')] });
    await settle();
    expect(calls).toBe(2);
    expect(view.entries.map(e => e.seq)).toEqual([1, 2, 3]);
    model.timeline.emit({ name: 'job-a', entries: [entry(4, 'ended', 'Succeeded.')] });
    await settle();
    expect(calls).toBe(2); // no gap: no new GET
    view.dispose();
  });

  it('says why a backend has no timeline', async () => {
    const view = new TimelineView({
      api: {
        timeline: () =>
          Promise.resolve({
            name: 'job-a',
            available: false,
            reason: 'the kubernetes backend keeps no timeline',
            entries: [],
            last: 0
          })
      },
      model: new FakeModel(),
      name: 'job-a'
    });
    await settle();
    expect(view.node.querySelector('.pn-timeline-empty')!.textContent).toBe(
      'No timeline: the kubernetes backend keeps no timeline.'
    );
    view.dispose();
  });

  it('merges by seq', () => {
    const merged = mergeEntries(
      [entry(2, 'started', 'b')],
      [entry(1, 'submitted', 'a'), entry(2, 'started', 'b')]
    );
    expect(merged.map(e => e.seq)).toEqual([1, 2]);
  });

  it('orders by time: an entry written late goes where it happened', () => {
    const late = { ...entry(3, 'waiting', 'queued'), t: '2026-12-05T14:00:00.000Z' };
    const merged = mergeEntries([entry(1, 'submitted', 'a'), entry(2, 'started', 'b')], [late]);
    expect(merged.map(e => e.seq)).toEqual([3, 1, 2]);
    expect(lastSeq(merged)).toBe(3);
    expect(lastSeq([])).toBe(0);
  });
});
