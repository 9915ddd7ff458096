// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import { PaddleApi } from '../api/client';
import { JobFormView, gpuCapacity, hintFor } from '../views/formview';
import { JobView } from '../views/jobview';
import { JobListView } from '../views/listview';
import { NoiseFilter, isNoiseLine, lastTraceback } from '../logic/logtext';
import { prefillFor } from '../logic/prefill';
import { suggestQuantity } from '../logic/quantity';
import { replicaToOpen } from '../logic/replicas';
import { IJobsState, initialState, reduce } from '../state/state';
import { IJobStatus, IReplica, IServerConfig } from '../api/types';
import { job, serverConfig } from './fixtures';
import { SCHEMAS } from './schemas';
import { Widget } from '@lumino/widgets';

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

const actions = {
  cancel: () => Promise.resolve(null),
  remove: () => Promise.resolve(false),
  copySpec: () => undefined,
  resume: () => Promise.resolve(null)
};

const FAILED_LOG = [
  'step 1 loss 0.5',
  'Traceback (most recent call last):',
  '  File "train.py", line 3, in <module>',
  '    raise ValueError("bad batch")',
  'ValueError: bad batch',
  'I1201 06:29:17.266114   569 server.cpp:1167] Server[paddle::distributed::BrpcPsService] is going to quit',
  '',
  '--------------------------------------',
  'C++ Traceback (most recent call last):',
  ''
].join('\n');

function failedJob(): IJobStatus {
  return job('broken', {
    phase: 'Failed',
    message: 'trainer 1 failed with exit code 1: ValueError: bad batch',
    finished: '2026-11-29T16:01:00.000Z',
    replicas: [
      replica('pserver', 0, { phase: 'Stopped', finished: '2026-11-29T16:01:00.000Z' }),
      replica('trainer', 0, { phase: 'Stopped', finished: '2026-11-29T16:01:00.000Z' }),
      replica('trainer', 1, {
        phase: 'Failed',
        reason: 'ValueError: bad batch',
        exit_code: 1,
        finished: '2026-11-29T16:01:00.000Z'
      })
    ]
  });
}

describe('log text', () => {
  it("knows Paddle's noise from the user's lines", () => {
    expect(isNoiseLine('I1201 06:29:17.266114   569 server.cpp:1167] going to quit')).toBe(true);
    expect(isNoiseLine('--------------------------------------')).toBe(true);
    expect(
      isNoiseLine('FatalError: `Termination signal` is detected by the operating system.')
    ).toBe(true);
    expect(isNoiseLine('step 3 loss 0.25')).toBe(false);
    expect(isNoiseLine('ValueError: bad batch')).toBe(false);
  });

  it('filters noise across chunk boundaries, holding back a partial line', () => {
    const filter = new NoiseFilter(true);
    const out =
      filter.feed('step 1\nI1201 06:29:17.2661') +
      filter.feed('14 569 a.cpp:1] x\nstep') +
      filter.feed(' 2\n') +
      filter.end();
    expect(out).toBe('step 1\nstep 2\n');
    expect(filter.hidden).toBe(1);
    const off = new NoiseFilter(false);
    expect(off.feed('I1201 06:29:17.266114 569 a.cpp:1] x\n')).toContain('a.cpp');
  });

  it('finds the last traceback through its exception line, skipping glog lines in between', () => {
    const span = lastTraceback(FAILED_LOG)!;
    expect(FAILED_LOG.slice(span.start, span.end)).toBe(
      'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    raise ValueError("bad batch")\nValueError: bad batch'
    );
    expect(lastTraceback('all good\n')).toBeNull();
  });
});

describe('failure first', () => {
  it('opens a failed job on the replica its message names, not on a stopped one', () => {
    expect(replicaToOpen(failedJob())).toEqual({ role: 'trainer', index: 1 });
  });

  it('opens any other job on its first trainer', () => {
    const running = job('ok', { replicas: [replica('pserver', 0), replica('trainer', 0)] });
    expect(replicaToOpen(running)).toEqual({ role: 'trainer', index: 0 });
    expect(replicaToOpen(job('empty'))).toBeNull();
  });

  it('shows the failed replica log with the traceback marked', async () => {
    const asked: string[] = [];
    const api = {
      logs: (_name: string, options: { role: string; index: number }) => {
        asked.push(`${options.role}-${options.index}`);
        return Promise.resolve(FAILED_LOG);
      }
    } as unknown as PaddleApi;
    const view = new JobView({ api, actions, job: failedJob(), tail: 100, back: () => undefined });
    Widget.attach(view, document.body);
    await new Promise(resolve => setTimeout(resolve, 50));
    await view.logs.log.whenFlushed();
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(asked).toEqual(['trainer-1']);
    const mark = view.node.querySelector('[data-testid="paddle-log-traceback"]');
    expect(mark?.textContent).toContain('ValueError: bad batch');
    expect(mark?.textContent).toMatch(/^Traceback/);
    // The noise toggle is on: the glog shutdown line is not in the pane.
    expect(view.logs.log.text()).not.toContain('server.cpp');
    expect(view.node.querySelector('[data-testid="paddle-log"]')!.getAttribute('aria-label')).toBe(
      'Log of trainer 1'
    );
    const names = [...view.node.querySelectorAll('[data-testid="paddle-replica-logs"]')].map(b =>
      b.getAttribute('aria-label')
    );
    expect(names).toEqual(['Logs of pserver 0', 'Logs of trainer 0', 'Logs of trainer 1']);
    view.dispose();
  });

  it('says a replica has not started instead of loading an empty log', async () => {
    let asked = 0;
    const api = { logs: () => (asked++, Promise.resolve('')) } as unknown as PaddleApi;
    const pending = job('waiting', {
      phase: 'Pending',
      replicas: [replica('trainer', 0, { phase: 'Pending', started: null })]
    });
    const view = new JobView({ api, actions, job: pending, tail: 100, back: () => undefined });
    expect(await view.logs.show()).toBe('not-started');
    expect(asked).toBe(0);
    expect(view.node.querySelector('[data-testid="paddle-log-status"]')!.textContent).toBe(
      'trainer 0 has not started yet; its log appears once it does.'
    );
  });

  it('offers Resume for a cancelled job, shows its checkpoints and opens the new job', async () => {
    const checkpoints = {
      name: 'ck',
      directory: '/home/u/.paddle-jobs/ck/checkpoints',
      checkpoints: [
        { step: 10, time: '2026-12-01T10:00:00Z', size: 1024, path: '/x/step-10' },
        { step: 20, time: '2026-12-01T10:01:00Z', size: 1024, path: '/x/step-20' }
      ],
      latest: { step: 20, time: '2026-12-01T10:01:00Z', size: 1024, path: '/x/step-20' },
      size: 3 * 1024 * 1024,
      job_size: 4 * 1024 * 1024,
      resumed_from: { job: 'ck-old', step: 5 }
    };
    const api = {
      logs: () => Promise.resolve(''),
      checkpoints: () => Promise.resolve(checkpoints)
    } as unknown as PaddleApi;
    const resumed: string[] = [];
    const opened: string[] = [];
    const view = new JobView({
      api,
      actions: {
        ...actions,
        resume: (asked: IJobStatus) => {
          resumed.push(asked.name);
          return Promise.resolve(job('ck-2'));
        }
      },
      job: job('ck', { phase: 'Running' }),
      tail: 10,
      back: () => undefined,
      openJob: name => opened.push(name)
    });
    const button = view.node.querySelector<HTMLButtonElement>('[data-testid="paddle-resume"]')!;
    expect(button.hidden).toBe(true); // a running job is not resumed
    view.setJob(job('ck', { phase: 'Cancelled' }));
    expect(button.hidden).toBe(false);
    await new Promise(resolve => setTimeout(resolve, 0));
    const line = view.node.querySelector<HTMLElement>('[data-testid="paddle-detail-checkpoints"]')!;
    expect(line.hidden).toBe(false);
    // The origin has a line of its own in the view (from the status), not a third mention here.
    expect(line.textContent).toBe('2 checkpoints, latest step 20 (3Mi)');
    // Each checkpoint with its step, time and size, newest first.
    const list = view.node.querySelector<HTMLElement>('[data-testid="paddle-checkpoints"]')!;
    expect(list.hidden).toBe(false);
    const rows = [...list.querySelectorAll('tbody tr')].map(row =>
      [...row.querySelectorAll('td')].map(cell => cell.textContent)
    );
    expect(rows.map(row => [row[0], row[2]])).toEqual([
      ['20', '1Ki'],
      ['10', '1Ki']
    ]);
    button.click();
    await new Promise(resolve => setTimeout(resolve, 0));
    expect(resumed).toEqual(['ck']);
    expect(opened).toEqual(['ck-2']);
    view.setJob(job('ck', { phase: 'Succeeded' }));
    expect(button.hidden).toBe(true);
    view.dispose();
  });

  it('links a resumed job to the job it resumed from while that job is listed', () => {
    const api = {
      logs: () => Promise.resolve(''),
      checkpoints: () => Promise.reject(new Error('none'))
    } as unknown as PaddleApi;
    const listed = new Set(['ck']);
    const opened: string[] = [];
    const view = new JobView({
      api,
      actions,
      job: job('ck-2', { resumed_from: { job: 'ck', step: 10 } }),
      tail: 10,
      back: () => undefined,
      openJob: name => opened.push(name),
      isListed: name => listed.has(name)
    });
    const line = view.node.querySelector<HTMLElement>(
      '[data-testid="paddle-detail-resumed-from"]'
    )!;
    expect(line.hidden).toBe(false);
    expect(line.textContent).toBe('Resumed from ck at step 10');
    line.querySelector<HTMLButtonElement>('[data-testid="paddle-resumed-from-job"]')!.click();
    expect(opened).toEqual(['ck']);
    // Once the origin is deleted its name stays, as text: there is nothing to open.
    listed.delete('ck');
    view.setJob(job('ck-2', { phase: 'Succeeded', resumed_from: { job: 'ck', step: 10 } }));
    expect(line.textContent).toBe('Resumed from ck at step 10');
    expect(line.querySelector('[data-testid="paddle-resumed-from-job"]')).toBeNull();
    // A job submitted as new has no such line.
    const fresh = new JobView({ api, actions, job: job('new'), tail: 10, back: () => undefined });
    expect(
      fresh.node.querySelector<HTMLElement>('[data-testid="paddle-detail-resumed-from"]')!.hidden
    ).toBe(true);
    view.dispose();
    fresh.dispose();
  });

  it('has a metrics slot that holds one widget and Esc goes back', () => {
    const back: string[] = [];
    const view = new JobView({
      api: {} as PaddleApi,
      actions,
      job: job('m'),
      tail: 10,
      back: name => back.push(name)
    });
    const slot = view.node.querySelector<HTMLElement>('.pn-metrics')!;
    expect(slot.hidden).toBe(true);
    const chart = new Widget();
    view.setMetricsWidget(chart);
    expect(slot.hidden).toBe(false);
    // Set before the view is in the document: attached with it.
    Widget.attach(view, document.body);
    expect(slot.contains(chart.node)).toBe(true);
    expect(chart.isAttached).toBe(true);
    view.setMetricsWidget(null);
    expect(slot.contains(chart.node)).toBe(false);
    view.node.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape', bubbles: true }));
    expect(back).toEqual(['m']);
    view.dispose();
  });
});

describe('the job list is a listbox with one Tab stop', () => {
  function state(names: string[]): IJobsState {
    return reduce(
      { ...initialState },
      {
        type: 'snapshot',
        jobs: names.map((name, i) => job(name, { created: `2026-11-29T16:0${9 - i}:00.000Z` }))
      }
    );
  }

  it('moves the roving tabindex with the arrows and opens with Enter', () => {
    const opened: string[] = [];
    const list = new JobListView(name => opened.push(name));
    document.body.appendChild(list.node);
    list.update(state(['a', 'b', 'c']));
    const rows = () => [...list.node.querySelectorAll<HTMLElement>('[role="option"]')];
    expect(list.node.querySelector('[role="listbox"]')).not.toBeNull();
    expect(rows().map(row => row.tabIndex)).toEqual([0, -1, -1]);
    rows()[0].dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowDown', bubbles: true }));
    expect(rows().map(row => row.tabIndex)).toEqual([-1, 0, -1]);
    rows()[1].dispatchEvent(new KeyboardEvent('keydown', { key: 'End', bubbles: true }));
    expect(rows().map(row => row.tabIndex)).toEqual([-1, -1, 0]);
    rows()[2].dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', bubbles: true }));
    expect(opened).toEqual(['c']);
    expect(rows()[0].getAttribute('aria-label')).toMatch(/^a, Running, /);
  });

  it('announces a phase change once', () => {
    const said: string[] = [];
    const list = new JobListView(
      () => undefined,
      text => said.push(text)
    );
    let current = state(['a']);
    list.update(current);
    current = reduce(current, {
      type: 'job',
      job: job('a', { phase: 'Succeeded', created: current.jobs.get('a')!.created })
    });
    list.update(current);
    list.update(current);
    expect(said).toEqual(['Job a is now Succeeded']);
  });
});

function config(backend: string, gpus?: string[]): IServerConfig {
  return serverConfig(backend, 'default', { capacity: gpus ? { gpus } : undefined });
}

describe('the New job form', () => {
  function open(backend = 'local', prefill = {}): JobFormView {
    const view = new JobFormView(
      {} as PaddleApi,
      () => undefined,
      () => undefined
    );
    view.reset(config(backend, []), prefill);
    document.body.appendChild(view.node);
    return view;
  }
  const error = (view: JobFormView, field: string): string =>
    view.node.querySelector(`[data-testid="paddle-error-${field}"]`)!.textContent ?? '';
  const input = (view: JobFormView, field: string): HTMLInputElement =>
    view.node.querySelector(`[data-field="${field}"]`)!;

  it('shows required-field errors only after the field is left', () => {
    const view = open();
    expect(error(view, 'entry_point')).toBe('');
    const submit = view.node.querySelector<HTMLButtonElement>('[data-testid="paddle-submit"]')!;
    expect(submit.disabled).toBe(false);
    input(view, 'entry_point').dispatchEvent(new FocusEvent('focusout', { bubbles: true }));
    expect(error(view, 'entry_point')).not.toBe('');
    expect(submit.disabled).toBe(true);
    // The message replaces the hint and is what the field is described by.
    const field = input(view, 'entry_point');
    const hint = field.closest('.pn-field')!.querySelector<HTMLElement>('.pn-hint')!;
    expect(hint.hidden).toBe(true);
    expect(field.getAttribute('aria-describedby')).toBe(
      view.node.querySelector('[data-testid="paddle-error-entry_point"]')!.id
    );
    expect(view.node.querySelectorAll('[role="alert"]:not([hidden])').length).toBe(0);
  });

  it('offers 4Gi for 4GB and applies it', () => {
    const view = open('local', { entry_point: 'python t.py', trainer_package: 'pkg' });
    const mem = input(view, 'trainer_mem');
    mem.value = '4GB';
    mem.dispatchEvent(new Event('input', { bubbles: true }));
    const fix = view.node.querySelector<HTMLButtonElement>(
      '[data-testid="paddle-suggest-trainer_mem"]'
    )!;
    expect(fix.textContent).toBe('Did you mean 4Gi?');
    fix.click();
    expect(mem.value).toBe('4Gi');
    expect(error(view, 'trainer_mem')).toBe('');
  });

  it('collapses the Run section under Advanced and takes a prefill', () => {
    const view = open('local', { trainer_package: 'work/pkg' });
    const advanced = view.node.querySelector<HTMLDetailsElement>(
      '[data-testid="paddle-form-advanced"]'
    )!;
    expect(advanced.open).toBe(false);
    expect(advanced.querySelector('[data-group="Run"]')).not.toBeNull();
    expect(input(view, 'trainer_package').value).toBe('work/pkg');
  });

  it('bounds GPUs by what the backend has', () => {
    const schema = SCHEMAS.default;
    const field = schema.properties.trainer_gpu;
    expect(hintFor(field, schema, 0)).toContain('this server has no GPUs');
    expect(hintFor(field, schema, 0)).not.toContain('at most');
    expect(hintFor(field, schema, 2)).toContain('at most 2');
    expect(
      gpuCapacity({ name: 'local', ok: true, error: null, capacity: { gpus: ['0', '1'] } })
    ).toBe(2);
    expect(gpuCapacity({ name: 'kubernetes', ok: true, error: null })).toBeNull();
  });
});

describe('small helpers', () => {
  it('suggests quantities people mean', () => {
    expect(suggestQuantity('4GB', 'memory')).toBe('4Gi');
    expect(suggestQuantity('512 mb', 'memory')).toBe('512Mi');
    expect(suggestQuantity('4Gi', 'memory')).toBeNull();
    expect(suggestQuantity('2 cores', 'cpu')).toBe('2');
    expect(suggestQuantity('lots', 'memory')).toBeNull();
  });

  it('prefills the form from a file-browser item', () => {
    expect(prefillFor('work/pkg', true)).toEqual({ trainer_package: 'work/pkg' });
    expect(prefillFor('work/pkg/train.py', false)).toEqual({
      trainer_package: 'work/pkg',
      entry_point: 'python train.py'
    });
    expect(prefillFor('train.py', false)).toEqual({
      trainer_package: '.',
      entry_point: 'python train.py'
    });
  });
});
