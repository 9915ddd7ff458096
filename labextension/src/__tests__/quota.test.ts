// @vitest-environment happy-dom
import { afterEach, describe, expect, it, vi } from 'vitest';

import { PaddleApi } from '../api/client';
import { QUOTA_CHECK_DELAY } from '../logic/quota';
import { JobFormView } from '../views/formview';
import { IDryRun, IQuotaCheck, IServerConfig } from '../api/types';
import { job, serverConfig } from './fixtures';

const WAITS: IQuotaCheck = {
  verdict: 'waits',
  words:
    'This job needs 8 CPU, 32Gi, 4 GPUs; free now: 16 CPU, 64Gi, 2 GPUs — it will wait (short of 2 GPUs in ClusterQueue team-a).',
  need: { cpu: '8', memory: '32Gi', 'nvidia.com/gpu': '4' },
  bounds: [{ resource: 'nvidia.com/gpu', source: 'ClusterQueue team-a', limit: '8', free: '2' }],
  field: null,
  unknown: []
};
const NEVER: IQuotaCheck = {
  ...WAITS,
  verdict: 'never',
  words:
    'This job needs 8 CPU, 32Gi, 16 GPUs; free now: 16 CPU, 64Gi, 2 GPUs — it can never run: it needs 16 GPUs, but ClusterQueue team-a has at most 8 GPUs; ask for fewer trainers.',
  field: 'trainers'
};

function config(quotaCheck: boolean): IServerConfig {
  return serverConfig('kubernetes', 'tight', { quota_check: quotaCheck });
}

/** A form whose dry runs answer `answers` in turn (the last one again after that). */
function open(answers: (IQuotaCheck | undefined)[], quotaCheck = true) {
  const sent: { [field: string]: unknown }[] = [];
  const api = {
    dryRun: (spec: { [field: string]: unknown }): Promise<IDryRun> => {
      sent.push(spec);
      const quota = answers[Math.min(sent.length - 1, answers.length - 1)];
      return Promise.resolve({ dry_run: true, job: job('x'), plan: {}, quota });
    }
  } as unknown as PaddleApi;
  const view = new JobFormView(
    api,
    () => undefined,
    () => undefined
  );
  view.reset(config(quotaCheck), { job_name: 'mnist', entry_point: 'python train.py' });
  document.body.appendChild(view.node);
  return { view, sent };
}

const quotaLine = (view: JobFormView) =>
  view.node.querySelector<HTMLElement>('[data-testid="paddle-form-quota"]')!;
const submit = (view: JobFormView) =>
  view.node.querySelector<HTMLButtonElement>('[data-testid="paddle-submit"]')!;

function edit(view: JobFormView, field: string, value: string): void {
  const input = view.node.querySelector<HTMLInputElement>(`[data-field="${field}"]`)!;
  input.value = value;
  input.dispatchEvent(new Event('input', { bubbles: true }));
}

afterEach(() => {
  vi.useRealTimers();
  document.body.innerHTML = '';
});

describe('the form says what the quota has free before submit', () => {
  it('shows a waiting job as a warning and keeps Submit', async () => {
    const { view } = open([WAITS]);
    await view.checkResources();
    const line = quotaLine(view);
    expect(line.hidden).toBe(false);
    expect(line.textContent).toBe(WAITS.words);
    expect(line.classList.contains('pn-quota-waits')).toBe(true);
    expect(line.classList.contains('pn-quota-never')).toBe(false);
    expect(submit(view).disabled).toBe(false);
  });

  it('shows a job that can never run as an error and disables Submit until a field changes', async () => {
    const { view } = open([NEVER, WAITS]);
    await view.checkResources();
    expect(quotaLine(view).textContent).toContain('it can never run');
    expect(quotaLine(view).classList.contains('pn-quota-never')).toBe(true);
    expect(submit(view).disabled).toBe(true);
    edit(view, 'trainers', '2');
    expect(quotaLine(view).hidden).toBe(true); // said of the old values
    expect(submit(view).disabled).toBe(false);
    await view.checkResources();
    expect(quotaLine(view).classList.contains('pn-quota-waits')).toBe(true);
  });

  it('asks once, a moment after the last of several quick edits, with the values as typed', async () => {
    vi.useFakeTimers();
    const { view, sent } = open([WAITS]);
    expect(sent).toHaveLength(0);
    edit(view, 'trainers', '2');
    vi.advanceTimersByTime(QUOTA_CHECK_DELAY / 2);
    edit(view, 'trainers', '3');
    vi.advanceTimersByTime(QUOTA_CHECK_DELAY);
    await vi.runAllTimersAsync();
    expect(sent).toHaveLength(1);
    expect(sent[0].trainers).toBe(3);
    expect(quotaLine(view).textContent).toBe(WAITS.words);
  });

  it('never asks a backend that checks no quota, and says nothing without a check', async () => {
    const { view, sent } = open([WAITS], false);
    await view.checkResources();
    expect(sent).toHaveLength(0);
    expect(quotaLine(view).hidden).toBe(true);
    const local = open([undefined]);
    await local.view.checkResources();
    expect(local.sent).toHaveLength(1);
    expect(quotaLine(local.view).hidden).toBe(true);
  });
});
