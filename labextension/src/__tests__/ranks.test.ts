// @vitest-environment happy-dom
import { Widget } from '@lumino/widgets';
import { describe, expect, it } from 'vitest';

import { PaddleApi } from '../api/client';
import { JobView } from '../views/jobview';
import { NoiseFilter, isNoiseLine, lastTraceback } from '../logic/logtext';
import { cursorCounts, mergeMetrics, replicaId } from '../logic/metrics';
import { linesOf } from '../views/metricsview';
import {
  RankFilter,
  failedRank,
  failedRankReason,
  logChoices,
  parseRankKey,
  rankKey,
  rankName,
  ranksPerTrainer,
  replicaGroups
} from '../logic/ranks';
import { replicaToOpen } from '../logic/replicas';
import { IJobStatus, IMetrics, IReplica, IReplicaMetrics } from '../api/types';
import { job } from './fixtures';

function replica(
  role: IReplica['role'],
  index: number,
  overrides: Partial<IReplica> = {}
): IReplica {
  return {
    role,
    index,
    phase: 'Running',
    reason: null,
    exit_code: null,
    restarts: 0,
    started: '2026-11-29T16:00:02.000Z',
    finished: null,
    ...overrides
  };
}

const MESSAGE = 'trainer 1 rank 1 failed: ValueError: bad batch at step 10';

/** 2 collective trainers x 3 gloo ranks; rank 1 of trainer 1 raised. */
function rankedJob(overrides: Partial<IJobStatus> = {}): IJobStatus {
  return job('ranked', {
    phase: 'Failed',
    message: MESSAGE,
    spec: { job_name: 'ranked', mode: 'collective', trainers: 2, procs_per_trainer: 3 },
    replicas: [
      replica('trainer', 0, { phase: 'Stopped' }),
      replica('trainer', 1, { phase: 'Failed', exit_code: 1 })
    ],
    ...overrides
  });
}

/** Trainer 1's log as the launcher writes it: every rank's lines prefixed, its own not. */
const TRAINER_LOG = [
  '[rank 0] step 1 loss 0.5',
  '[rank 1] step 1 loss 0.6',
  '[rank 2] step 1 loss 0.7',
  '[rank 1] Traceback (most recent call last):',
  '[rank 1]   File "train.py", line 9, in <module>',
  '[rank 1] ValueError: bad batch at step 10',
  '[rank 1] I1201 06:29:17.266114   569 server.cpp:1167] going to quit',
  '[rank 0] FatalError: `Process abort signal` is detected by the operating system.',
  'trainer 1 rank 1 failed: ValueError: bad batch at step 10',
  ''
].join('\n');

describe('ranks of a trainer', () => {
  it('counts ranks as the launcher starts them', () => {
    expect(ranksPerTrainer({})).toBe(1);
    expect(ranksPerTrainer({ procs_per_trainer: 3 })).toBe(3);
    expect(ranksPerTrainer({ procs_per_trainer: 1, trainer_gpu: 8 })).toBe(8);
    expect(
      ranksPerTrainer({
        trainer_gpu: 4,
        entry_point: 'python -m paddle.distributed.launch --nproc_per_node 4 train.py'
      })
    ).toBe(1);
    expect(ranksPerTrainer({ procs_per_trainer: '3' })).toBe(1);
  });

  it('keys, parses and names a rank like the server', () => {
    expect(rankKey({ role: 'trainer', index: 1 })).toBe('trainer-1');
    expect(rankKey({ role: 'trainer', index: 1, rank: 2 })).toBe('trainer-1.rank-2');
    expect(parseRankKey('trainer-1.rank-2')).toEqual({ role: 'trainer', index: 1, rank: 2 });
    expect(parseRankKey('pserver-0')).toEqual({ role: 'pserver', index: 0 });
    expect(parseRankKey('trainer')).toBeNull();
    expect(parseRankKey('trainer-1.rank-')).toBeNull();
    expect(rankName({ role: 'trainer', index: 1, rank: 2 })).toBe('trainer 1 · rank 2');
  });

  it("reads the failed rank and its words from the job's message", () => {
    expect(failedRank(rankedJob(), 1)).toBe(1);
    expect(failedRank(rankedJob(), 0)).toBeNull();
    expect(failedRankReason(rankedJob(), 1)).toBe('ValueError: bad batch at step 10');
    const oom = rankedJob({
      message: 'trainer 1 rank 2 failed with exit code 137 (SIGKILL — out of memory?).'
    });
    expect(failedRankReason(oom, 1)).toBe('exit code 137 (SIGKILL — out of memory?).');
    const restarted = rankedJob({
      message: 'trainer 1 rank 1 failed after 2 restarts: OSError: x'
    });
    expect(failedRankReason(restarted, 1)).toBe('OSError: x');
    // "trainer 11 rank 1" is not trainer 1's.
    expect(failedRank(rankedJob({ message: 'trainer 11 rank 1 failed: x' }), 1)).toBeNull();
  });

  it('groups ranks under their trainer, pservers and single-process trainers alone', () => {
    const groups = replicaGroups(rankedJob());
    expect(groups.map(g => [g.replica.index, g.ranks, g.failed])).toEqual([
      [0, 3, null],
      [1, 3, 1]
    ]);
    const ps = job('ps', {
      spec: { mode: 'ps', pservers: 1, trainers: 1 },
      replicas: [replica('pserver', 0), replica('trainer', 0)]
    });
    expect(replicaGroups(ps).map(g => g.ranks)).toEqual([1, 1]);
  });

  it('offers each trainer whole and rank by rank, each choice naming its trainer', () => {
    const choices = logChoices(rankedJob().replicas, 3);
    expect(choices.map(c => [c.value, c.label])).toEqual([
      ['trainer-0', 'trainer 0 · 3 ranks'],
      ['trainer-0.rank-0', 'trainer 0 · rank 0'],
      ['trainer-0.rank-1', 'trainer 0 · rank 1'],
      ['trainer-0.rank-2', 'trainer 0 · rank 2'],
      ['trainer-1', 'trainer 1 · 3 ranks'],
      ['trainer-1.rank-0', 'trainer 1 · rank 0'],
      ['trainer-1.rank-1', 'trainer 1 · rank 1'],
      ['trainer-1.rank-2', 'trainer 1 · rank 2']
    ]);
    expect(logChoices([replica('pserver', 0), replica('trainer', 0)], 1).map(c => c.label)).toEqual(
      ['pserver 0', 'trainer 0']
    );
  });

  it("offers a job's installer log last when it has a requirements file, and asks for role=environment", () => {
    const choices = logChoices([replica('pserver', 0), replica('trainer', 0)], 1, true);
    expect(choices.map(c => [c.value, c.label])).toEqual([
      ['pserver-0', 'pserver 0'],
      ['trainer-0', 'trainer 0'],
      ['environment-0', 'environment (requirements)']
    ]);
    expect(parseRankKey('environment-0')).toEqual({ role: 'environment', index: 0 });
    expect(rankName({ role: 'environment', index: 0 })).toBe('environment');
  });

  it("filters a trainer's log to one rank across chunk boundaries, keeping the launcher's lines", () => {
    const filter = new RankFilter(1);
    // Split mid-prefix and mid-line.
    const pieces = [TRAINER_LOG.slice(0, 30), TRAINER_LOG.slice(30, 61), TRAINER_LOG.slice(61)];
    const text = pieces.map(piece => filter.feed(piece)).join('') + filter.end();
    expect(text.split('\n')).toEqual([
      'step 1 loss 0.6',
      'Traceback (most recent call last):',
      '  File "train.py", line 9, in <module>',
      'ValueError: bad batch at step 10',
      'I1201 06:29:17.266114   569 server.cpp:1167] going to quit',
      'trainer 1 rank 1 failed: ValueError: bad batch at step 10',
      ''
    ]);
    expect(filter.hidden).toBe(3);
    // "[rank 1]" is not "[rank 10]".
    const ten = new RankFilter(1);
    expect(ten.feed('[rank 10] x\n[rank 1] y\n') + ten.end()).toBe('y\n');
  });

  it("hides Paddle's noise and finds the traceback inside rank prefixes too", () => {
    expect(isNoiseLine('[rank 1] I1201 06:29:17.266114   569 server.cpp:1167] going to quit')).toBe(
      true
    );
    expect(isNoiseLine('[rank 1] ValueError: bad batch')).toBe(false);
    const filter = new NoiseFilter(true);
    expect(filter.feed(TRAINER_LOG) + filter.end()).not.toContain('server.cpp');
    const span = lastTraceback(TRAINER_LOG)!;
    expect(TRAINER_LOG.slice(span.start, span.end)).toMatch(
      /^\[rank 1\] Traceback[\s\S]*ValueError: bad batch at step 10$/
    );
  });

  it('opens a failed job on the rank its message names', () => {
    expect(replicaToOpen(rankedJob())).toEqual({ role: 'trainer', index: 1, rank: 1 });
    const single = rankedJob({ spec: { mode: 'collective', trainers: 2 } });
    expect(replicaToOpen(single)).toEqual({ role: 'trainer', index: 1 });
  });
});

describe('the job view of a trainer of several ranks', () => {
  async function settle(view: JobView): Promise<void> {
    await new Promise(resolve => setTimeout(resolve, 50));
    await view.logs.log.whenFlushed();
    await new Promise(resolve => setTimeout(resolve, 0));
  }

  it('folds ranks under their trainer, opens the failed one and shows its lines', async () => {
    const asked: object[] = [];
    const api = {
      logs: (_name: string, options: { role: string; index: number }) => {
        asked.push({ ...options });
        return Promise.resolve(TRAINER_LOG);
      }
    } as unknown as PaddleApi;
    const view = new JobView({ api, actions, job: rankedJob(), tail: 100, back: () => undefined });
    Widget.attach(view, document.body);
    await settle(view);
    // The server is asked for trainer 1's log (no rank parameter: ranks are lines of it).
    expect(asked).toEqual([{ role: 'trainer', index: 1, tail: 100, previous: false }]);
    const picker = view.node.querySelector<HTMLSelectElement>(
      '[data-testid="paddle-log-replica"]'
    )!;
    expect(picker.value).toBe('trainer-1.rank-1');
    expect(picker.selectedOptions[0].textContent).toBe('trainer 1 · rank 1');
    expect(view.logs.log.text()).not.toContain('[rank');
    expect(view.logs.log.text()).not.toContain('loss 0.5');
    const mark = view.node.querySelector('[data-testid="paddle-log-traceback"]');
    expect(mark?.textContent).toMatch(/^Traceback[\s\S]*ValueError: bad batch at step 10$/);
    expect(view.node.querySelector('[data-testid="paddle-log-status"]')!.textContent).toContain(
      '3 lines of other ranks hidden'
    );

    // Two trainer rows, each with a compact "3 ranks"; the failed trainer's ranks are open.
    const rows = (): Element[] => [
      ...view.node.querySelectorAll('[data-testid="paddle-replica-row"]')
    ];
    const rankRows = (): Element[] => [
      ...view.node.querySelectorAll('[data-testid="paddle-rank-row"]')
    ];
    expect(rows().length).toBe(2);
    const toggles = [
      ...view.node.querySelectorAll<HTMLButtonElement>('[data-testid="paddle-replica-ranks"]')
    ];
    expect(toggles.map(t => [t.textContent, t.getAttribute('aria-expanded')])).toEqual([
      ['▸ 3 ranks', 'false'],
      ['▾ 3 ranks', 'true']
    ]);
    expect(
      rankRows().map(r => [r.getAttribute('data-rank-of'), r.getAttribute('data-failed')])
    ).toEqual([
      ['trainer-1', 'false'],
      ['trainer-1', 'true'],
      ['trainer-1', 'false']
    ]);
    expect(rankRows()[1].querySelector('.pn-reason')!.textContent).toBe(
      'ValueError: bad batch at step 10'
    );

    // Open trainer 0's ranks and show rank 2's log from its row.
    toggles[0].click();
    expect(rankRows().length).toBe(6);
    const rank2 = rankRows()[2].querySelector<HTMLButtonElement>(
      '[data-testid="paddle-replica-logs"]'
    )!;
    expect(rank2.getAttribute('aria-label')).toBe('Logs of trainer 0 · rank 2');
    rank2.click();
    await settle(view);
    expect(picker.value).toBe('trainer-0.rank-2');
    expect(view.logs.log.text()).toContain('step 1 loss 0.7');
    expect(view.logs.log.text()).not.toContain('loss 0.6');

    // Closing the failed trainer's ranks sticks across a new status.
    view.node
      .querySelectorAll<HTMLButtonElement>('[data-testid="paddle-replica-ranks"]')[1]
      .click();
    view.setJob(rankedJob({ finished: '2026-11-29T16:02:00.000Z' }));
    expect(rankRows().map(r => r.getAttribute('data-rank-of'))).toEqual([
      'trainer-0',
      'trainer-0',
      'trainer-0'
    ]);
    view.dispose();
  });

  it('shows a job of single-process trainers as before', () => {
    const plain = rankedJob({ spec: { mode: 'collective', trainers: 2 } });
    const view = new JobView({
      api: {} as PaddleApi,
      actions,
      job: plain,
      tail: 10,
      back: () => undefined
    });
    expect(view.node.querySelectorAll('[data-testid="paddle-replica-ranks"]').length).toBe(0);
    expect(view.node.querySelectorAll('[data-testid="paddle-rank-row"]').length).toBe(0);
    const picker = view.node.querySelector<HTMLSelectElement>(
      '[data-testid="paddle-log-replica"]'
    )!;
    expect([...picker.options].map(o => o.textContent)).toEqual(['trainer 0', 'trainer 1']);
    view.dispose();
  });
});

describe('metrics per rank', () => {
  function series(
    index: number,
    rank: number | null,
    steps: number[],
    count = steps.length
  ): IReplicaMetrics {
    return {
      role: 'trainer',
      index,
      rank,
      count,
      step: steps[steps.length - 1] ?? null,
      total: 10,
      updated: null,
      eta_seconds: null,
      invalid: 0,
      truncated: false,
      series: { loss: { step: steps, time: steps, value: steps.map(s => s + 10 * (rank ?? 0)) } }
    };
  }

  it("keys each rank's series as the server does and draws one named curve per rank", () => {
    expect(replicaId({ role: 'trainer', index: 1, rank: 0 })).toBe('trainer-1');
    expect(replicaId({ role: 'trainer', index: 1, rank: 2 })).toBe('trainer-1.rank-2');
    const base: IMetrics = {
      name: 'ranked',
      cursor: 'trainer-1:2,trainer-1.rank-1:1',
      points: 500,
      progress: null,
      replicas: [series(1, 0, [1, 2]), series(1, 1, [1])]
    };
    expect([...cursorCounts(base.cursor)]).toEqual([
      ['trainer-1', 2],
      ['trainer-1.rank-1', 1]
    ]);
    const newer: IMetrics = {
      ...base,
      cursor: 'trainer-1:3,trainer-1.rank-1:2',
      replicas: [series(1, 0, [3], 3), series(1, 1, [2], 2)]
    };
    const merged = mergeMetrics(base, newer);
    expect(merged.replicas.map(r => r.series.loss.step)).toEqual([
      [1, 2, 3],
      [1, 2]
    ]);
    expect(linesOf(merged, 'loss').map(line => [line.name, line.y])).toEqual([
      ['trainer 1 · rank 0', [1, 2, 3]],
      ['trainer 1 · rank 1', [11, 12]]
    ]);
    // A server before ranks (no `rank`) and single-process replicas: as before.
    const plain = { ...series(0, null, [1]), rank: undefined };
    expect(linesOf({ ...base, replicas: [plain] }, 'loss').map(line => line.name)).toEqual([
      'trainer 0'
    ]);
  });
});

const actions = {
  cancel: () => Promise.resolve(null),
  remove: () => Promise.resolve(false),
  copySpec: () => undefined,
  resume: () => Promise.resolve(null)
};
