// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import { LineChart, formatValue, nearest, niceTicks } from '../views/chart';
import { IMetrics, IReplicaMetrics } from '../api/types';
import {
  cursorCounts,
  etaText,
  longestSeries,
  mergeMetrics,
  metricNames,
  progressView,
  restartSteps
} from '../logic/metrics';
import { linesOf } from '../views/metricsview';

function replica(
  index: number,
  steps: number[],
  extra: Partial<IReplicaMetrics> = {}
): IReplicaMetrics {
  return {
    role: 'trainer',
    index,
    count: steps.length,
    step: steps.length ? steps[steps.length - 1] : null,
    total: 100,
    updated: null,
    eta_seconds: null,
    invalid: 0,
    truncated: false,
    series: {
      loss: { step: steps, time: steps.map(s => 1000 + s), value: steps.map(s => 1 / s) }
    },
    ...extra
  };
}

function answer(replicas: IReplicaMetrics[], cursor: string): IMetrics {
  return { name: 'job', cursor, points: 500, progress: null, replicas };
}

describe('merging answers after a cursor', () => {
  it('appends each replica’s new points in order', () => {
    const base = answer([replica(0, [1, 2]), replica(1, [1])], 'trainer-0:2,trainer-1:1');
    const newer = answer(
      [
        { ...replica(0, [3]), count: 3 },
        { ...replica(1, []), count: 1, series: {} }
      ],
      'trainer-0:3,trainer-1:1'
    );
    const merged = mergeMetrics(base, newer);
    expect(merged.cursor).toBe('trainer-0:3,trainer-1:1');
    expect(merged.replicas[0].series.loss.step).toEqual([1, 2, 3]);
    expect(merged.replicas[1].series.loss.step).toEqual([1]);
    expect(longestSeries(merged)).toBe(3);
  });

  it('replaces a replica whose file started over', () => {
    const base = answer([replica(0, [1, 2, 3])], 'trainer-0:3');
    const merged = mergeMetrics(base, answer([replica(0, [1])], 'trainer-0:1'));
    expect(merged.replicas[0].series.loss.step).toEqual([1]);
  });

  it('replaces a replica the server marks replaced after a restart', () => {
    // Steps 1-7 were seen; the job restarted from the checkpoint of step 4, so the server
    // answers the whole series again (1-4 kept, 5-6 from the new attempt), count still growing.
    const base = answer([replica(0, [1, 2, 3, 4, 5, 6, 7])], 'trainer-0:7');
    const whole = {
      ...replica(0, [1, 2, 3, 4, 5, 6]),
      count: 9,
      replaced: true,
      restarts: [{ step: 5, time: 1005 }]
    };
    const merged = mergeMetrics(base, answer([whole], 'trainer-0:9'));
    expect(merged.replicas[0].series.loss.step).toEqual([1, 2, 3, 4, 5, 6]);
    expect(merged.replicas[0].restarts).toEqual([{ step: 5, time: 1005 }]);
    // Without the mark the same answer would be appended: steps going back.
    const appended = mergeMetrics(base, answer([{ ...whole, replaced: false }], 'trainer-0:9'));
    expect(appended.replicas[0].series.loss.step.length).toBe(13);
  });

  it('marks the restarts on the charts, each step once', () => {
    const metrics = answer(
      [
        replica(0, [1, 2, 5], { restarts: [{ step: 5, time: 1 }] }),
        replica(1, [1, 2, 5], { restarts: [{ step: 5, time: 2 }] }),
        replica(2, [1])
      ],
      ''
    );
    expect(restartSteps(metrics)).toEqual([5]);
    const chart = new LineChart('loss');
    chart.setLines(linesOf(metrics, 'loss'), restartSteps(metrics));
    const rules = chart.node.querySelectorAll('[data-testid="paddle-chart-restart"]');
    expect([...rules].map(rule => rule.getAttribute('data-step'))).toEqual(['5']);
    expect(rules[0].textContent).toBe('restarted: resumed at step 5');
    chart.setLines(linesOf(metrics, 'loss'));
    expect(chart.node.querySelectorAll('[data-testid="paddle-chart-restart"]').length).toBe(0);
  });

  it('reads cursors and orders metric names loss first', () => {
    expect([...cursorCounts('trainer-0:3,pserver-1:0')]).toEqual([
      ['trainer-0', 3],
      ['pserver-1', 0]
    ]);
    const metrics = answer(
      [
        replica(0, [1], {
          series: {
            acc: { step: [1], time: [1], value: [0.5] },
            loss: { step: [1], time: [1], value: [1] }
          }
        })
      ],
      ''
    );
    expect(metricNames(metrics)).toEqual(['loss', 'acc']);
  });
});

describe('the progress bar', () => {
  const progress = { step: 30, total: 120, fraction: 0.25, eta_seconds: 200 };

  it('shows step/total, percent and ETA while running', () => {
    expect(progressView(progress, 'Running')).toEqual({
      fraction: 0.25,
      label: '30/120 · 25%',
      eta: 'ETA 3m 20s'
    });
  });

  it('is full on success and has no ETA once ended', () => {
    expect(progressView(progress, 'Succeeded')).toEqual({
      fraction: 1,
      label: '120/120 · 100%',
      eta: ''
    });
    expect(progressView(progress, 'Failed')?.eta).toBe('');
    expect(progressView(null, 'Running')).toBeNull();
    expect(progressView(null, 'Succeeded')?.fraction).toBe(1);
  });

  it('words an ETA', () => {
    expect(etaText(45)).toBe('45s');
    expect(etaText(3700)).toBe('1h 1m');
    expect(etaText(null)).toBe('');
  });
});

describe('the line chart', () => {
  const metrics = answer([replica(0, [1, 2, 3, 4]), replica(1, [1, 2, 3])], '');

  it('draws one line per trainer with a legend of latest values', () => {
    const chart = new LineChart('loss');
    chart.setLines(linesOf(metrics, 'loss'));
    const lines = chart.node.querySelectorAll('polyline');
    expect([...lines].map(line => line.getAttribute('data-line'))).toEqual([
      'trainer 0',
      'trainer 1'
    ]);
    expect(lines[0].getAttribute('points')!.split(' ')).toHaveLength(4);
    const legend = chart.node.querySelectorAll('[data-testid="paddle-chart-legend"] li');
    expect([...legend].map(item => item.textContent)).toEqual([
      'trainer 0 0.25',
      'trainer 1 0.333'
    ]);
    expect(chart.node.querySelector('svg')!.getAttribute('aria-label')).toContain('trainer 0 0.25');
  });

  it('shows every trainer’s value at the hovered step', () => {
    const chart = new LineChart('loss');
    chart.setLines(linesOf(metrics, 'loss'));
    chart.showAt(2);
    const tooltip = chart.node.querySelector<HTMLElement>('[data-testid="paddle-chart-tooltip"]')!;
    expect(tooltip.hidden).toBe(false);
    // A row per line, each with its colour; the step once, not once per line.
    const rows = [...tooltip.querySelectorAll('.pn-chart-tooltip-row')];
    expect(tooltip.querySelector('.pn-chart-tooltip-step')!.textContent).toBe('step 2');
    expect(rows.map(row => row.textContent)).toEqual(['trainer 0: 0.5', 'trainer 1: 0.5']);
    expect(rows.every(row => row.querySelector('.pn-chart-swatch'))).toBe(true);
    chart.showAt(4); // trainer 1 stopped at step 3: its own step is said
    expect(
      [...tooltip.querySelectorAll('.pn-chart-tooltip-row')].map(row => row.textContent)
    ).toEqual(['trainer 0: 0.25', 'trainer 1: 0.333 (step 3)']);
    expect(chart.node.querySelectorAll('.pn-chart-hover circle')).toHaveLength(2);
  });

  it('switches to a log scale, leaving out values that are not positive', () => {
    const chart = new LineChart('loss');
    chart.setLines([{ name: 'trainer-0', x: [1, 2, 3], y: [0, 10, 100] }]);
    const linear = chart.node.querySelector('polyline')!.getAttribute('points')!;
    chart.setScale('log');
    const log = chart.node.querySelector('polyline')!.getAttribute('points')!;
    expect(log.split(' ')).toHaveLength(2);
    expect(log).not.toBe(linear);
    expect(chart.node.querySelector<HTMLElement>('.pn-chart-note')!.hidden).toBe(false);
    expect(
      [...chart.node.querySelectorAll('.pn-chart-axis text')].map(t => t.textContent)
    ).toContain('100');
  });

  it('has round ticks, compact numbers and a nearest point', () => {
    expect(niceTicks(0, 1, 5)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(0, 1, 4)).toEqual([0, 0.5, 1]);
    expect(formatValue(0.000012)).toBe('1.2e-5');
    expect(formatValue(0.12345)).toBe('0.123');
    expect(nearest([1, 5, 10], 7)).toBe(1);
    expect(nearest([1, 5, 10], 8)).toBe(2);
  });
});
