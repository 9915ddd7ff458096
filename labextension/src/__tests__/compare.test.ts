// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import { ICompareRun, IComparison, IMetrics, IRunMetric } from '../api/types';
import {
  codeRows,
  compareLines,
  liveJobs,
  metricCells,
  numberText,
  shownMetric,
  specRows,
  valueText
} from '../logic/compare';
import { LineChart, secondsText, timeTicks } from '../views/chart';

function summary(overrides: Partial<IRunMetric> = {}): IRunMetric {
  return {
    replica: 'trainer-0',
    goal: 'min',
    final: 0.5,
    final_step: 10,
    best: 0.4,
    best_step: 8,
    points: 10,
    ...overrides
  };
}

function run(name: string, colour: string, overrides: Partial<ICompareRun> = {}): ICompareRun {
  return {
    name,
    phase: 'Succeeded',
    message: '',
    created: '2026-12-07T10:00:00.000Z',
    started: '2026-12-07T10:00:10.000Z',
    finished: null,
    colour,
    progress: null,
    code: { files: 2, reason: null },
    metrics: { loss: summary() },
    ...overrides
  };
}

/** `a` (blue) and `b` (orange): b has 4 trainers and LR 0.2, other train.py, and a lower best loss. */
function comparison(order: string[] = ['a', 'b']): IComparison {
  const runs: { [name: string]: ICompareRun } = {
    a: run('a', '#2b6cb0', {
      metrics: {
        loss: summary({ final: 0.31, best: 0.3, best_step: 90, final_step: 100 }),
        acc: summary({ goal: 'max', final: 0.8, best: 0.85, best_step: 60 }),
        lr: summary({ goal: null, best: null, best_step: null, final: 0.1 })
      }
    }),
    b: run('b', '#dd6b20', {
      phase: 'Running',
      metrics: {
        loss: summary({
          replica: 'trainer-1',
          final: 0.25,
          best: 0.2,
          best_step: 40,
          final_step: 50
        }),
        acc: summary({ goal: 'max', final: 0.9, best: 0.9, best_step: 50 })
      }
    })
  };
  return {
    jobs: order,
    runs: order.map(name => runs[name]),
    metrics: ['loss', 'acc', 'lr'],
    spec: [
      { field: 'trainers', label: 'Trainers', values: { a: 2, b: 4 } },
      { field: 'env.LR', label: 'env LR', values: { a: '0.1', b: null } }
    ],
    code: {
      files: [
        { path: 'train.py', hashes: { a: 'a'.repeat(64), b: 'b'.repeat(64) } },
        { path: 'extra.py', hashes: { a: null, b: 'c'.repeat(64) } }
      ],
      same: 3,
      compared: ['a', 'b'],
      truncated: false
    }
  };
}

function metrics(name: string, replicas: ['trainer', number, number[], number[]][]): IMetrics {
  return {
    name,
    cursor: '',
    points: 500,
    progress: null,
    replicas: replicas.map(([role, index, steps, times]) => ({
      role,
      index,
      count: steps.length,
      step: steps[steps.length - 1],
      total: null,
      updated: null,
      eta_seconds: null,
      invalid: 0,
      truncated: false,
      series: { loss: { step: steps, time: times, value: steps.map(s => 1 / s) } }
    }))
  };
}

const started = Date.parse('2026-12-07T10:00:10.000Z') / 1000;
const FETCHED = new Map<string, IMetrics>([
  ['a', metrics('a', [['trainer', 0, [1, 2, 3], [started + 5, started + 10, started + 15]]])],
  [
    'b',
    metrics('b', [
      ['trainer', 0, [1, 2], [started + 1, started + 2]],
      ['trainer', 1, [1, 2, 3, 4], [started + 20, started + 40, started + 60, started + 80]]
    ])
  ]
]);

describe('the comparison view logic', () => {
  it('draws each job in its own colour, the same whatever the order chosen', () => {
    const lines = compareLines(comparison(), FETCHED, 'loss', 'step');
    expect(lines.map(line => [line.name, line.colour])).toEqual([
      ['a', '#2b6cb0'],
      ['b', '#dd6b20']
    ]);
    const swapped = compareLines(comparison(['b', 'a']), FETCHED, 'loss', 'step');
    expect(swapped.map(line => [line.name, line.colour])).toEqual([
      ['b', '#dd6b20'],
      ['a', '#2b6cb0']
    ]);
    const chart = new LineChart('loss');
    chart.setLines(swapped);
    const strokes = [...chart.node.querySelectorAll('polyline')].map(p => [
      p.getAttribute('data-line'),
      p.getAttribute('stroke')
    ]);
    expect(strokes).toEqual([
      ['b', '#dd6b20'],
      ['a', '#2b6cb0']
    ]);
    const legend = [...chart.node.querySelectorAll('[data-testid="paddle-chart-legend"] li')];
    expect(legend.map(li => li.getAttribute('data-line'))).toEqual(['b', 'a']);
    expect(legend[1].querySelector<HTMLElement>('.pn-chart-swatch')!.style.background).toBe(
      '#2b6cb0'
    );
  });

  it("takes the replica the server names as the job's, and wall time from the job's start", () => {
    const [a, b] = compareLines(comparison(), FETCHED, 'loss', 'step');
    expect(a.x).toEqual([1, 2, 3]);
    expect(b.x).toEqual([1, 2, 3, 4]); // trainer-1, not trainer-0
    const [aTime, bTime] = compareLines(comparison(), FETCHED, 'loss', 'time');
    expect(aTime.x).toEqual([5, 10, 15]);
    expect(bTime.x).toEqual([20, 40, 60, 80]);
    expect(bTime.y).toEqual(b.y);
    // A job not fetched yet, or not reporting the metric, has no line.
    expect(
      compareLines(comparison(), new Map([['a', FETCHED.get('a')!]]), 'loss', 'step')
    ).toHaveLength(1);
    expect(compareLines(comparison(), FETCHED, 'acc', 'step')).toEqual([]);
  });

  it('names the wall-time axis in durations', () => {
    expect([secondsText(0), secondsText(45), secondsText(200), secondsText(3900)]).toEqual([
      '0s',
      '45s',
      '3m 20s',
      '1h 5m'
    ]);
    const chart = new LineChart('loss');
    chart.setXAxis('time');
    chart.setLines([{ name: 'a', x: [0, 60, 120], y: [3, 2, 1], colour: '#2b6cb0' }]);
    const ticks = [...chart.node.querySelectorAll('text')].map(t => t.textContent);
    expect(ticks).toEqual(expect.arrayContaining(['0s', '30s', '1m', '1m 30s', '2m']));
    expect(timeTicks(0, 7200)).toEqual([0, 1800, 3600, 5400, 7200]);
    expect(chart.node.querySelector('svg')!.getAttribute('aria-label')).toContain('by wall time');
    chart.showAt(60);
    expect(chart.node.querySelector('[data-testid="paddle-chart-tooltip"]')!.textContent).toContain(
      'at 1m'
    );
  });

  it('lists every differing spec field and code file, one cell per job', () => {
    expect(specRows(comparison())).toEqual([
      { field: 'trainers', label: 'Trainers', values: ['2', '4'] },
      { field: 'env.LR', label: 'env LR', values: ['0.1', '–'] }
    ]);
    expect(specRows(comparison(['b', 'a']))[0].values).toEqual(['4', '2']);
    expect(codeRows(comparison())).toEqual([
      { path: 'train.py', cells: ['aaaaaaaaaaaa', 'bbbbbbbbbbbb'] },
      { path: 'extra.py', cells: ['missing', 'cccccccccccc'] }
    ]);
    const noSnapshot = { ...comparison(), code: { ...comparison().code, compared: ['b'] } };
    expect(codeRows(noSnapshot)[0].cells).toEqual(['–', 'bbbbbbbbbbbb']);
    expect([valueText(null), valueText(''), valueText(false), valueText({ A: '1' })]).toEqual([
      '–',
      '–',
      'false',
      '{"A":"1"}'
    ]);
  });

  it('says final and best with their steps, and marks the best run by the goal', () => {
    const loss = metricCells(comparison(), 'loss');
    expect(loss).toEqual([
      { final: '0.31 (step 100)', best: '0.3 (step 90)', leads: false },
      { final: '0.25 (step 50)', best: '0.2 (step 40)', leads: true }
    ]);
    const acc = metricCells(comparison(), 'acc');
    expect(acc.map(cell => cell?.leads)).toEqual([false, true]); // higher is better
    // No best for a metric whose name says not which way is better; a job not reporting: null.
    expect(metricCells(comparison(), 'lr')).toEqual([
      { final: '0.1 (step 10)', best: '–', leads: false },
      null
    ]);
    expect([numberText(0.000012345), numberText(1234567), numberText(0.30000000000000004)]).toEqual(
      ['1.234e-5', '1.235e6', '0.3']
    );
  });

  it('keeps the metric chosen while it is reported, and knows which jobs are still live', () => {
    expect(shownMetric(comparison(), null)).toBe('loss');
    expect(shownMetric(comparison(), 'acc')).toBe('acc');
    expect(shownMetric(comparison(), 'bleu')).toBe('loss');
    expect(shownMetric(null, 'acc')).toBeNull();
    expect(liveJobs(comparison(), new Set(['Succeeded', 'Failed', 'Cancelled']))).toEqual(['b']);
  });
});
