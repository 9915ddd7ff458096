// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import { PaddleApi } from '../api/client';
import { JobFormView, paddleNote } from '../views/formview';
import { IJobStatus, IServerConfig } from '../api/types';
import { serverConfig } from './fixtures';
import { SCHEMAS } from './schemas';

function config(backend: string): IServerConfig {
  return serverConfig(backend);
}

function open(backend: string): JobFormView {
  const view = new JobFormView(
    {} as PaddleApi,
    () => undefined,
    (_job: IJobStatus) => undefined
  );
  view.reset(config(backend));
  document.body.appendChild(view.node);
  return view;
}

const row = (view: JobFormView, field: string): HTMLElement =>
  view.node.querySelector(`[data-testid="paddle-field-${field}"]`)!.closest('.pn-field')!;

describe('the New job form is built from the served schema', () => {
  it('shows every served field in order, grouped, with labels and hints from the schema', () => {
    const view = open('kubernetes');
    const fields = [...view.node.querySelectorAll('[data-field]')].map(node =>
      node.getAttribute('data-field')
    );
    // The table's order within each section, the sections in the order they first appear.
    const groups = ['Code', 'Replicas', 'Resources', 'Run'];
    const served = Object.entries(SCHEMAS.tight.properties);
    const inSections = groups.flatMap(group =>
      served.filter(([, field]) => field['x-group'] === group).map(([name]) => name)
    );
    expect(fields).toEqual(inSections);
    expect(inSections).toHaveLength(served.length);
    const legends = [...view.node.querySelectorAll('legend')].map(node => node.textContent);
    expect(legends).toEqual(groups);
    expect(row(view, 'trainers').textContent).toContain('Trainers');
    expect(row(view, 'trainers').textContent).toContain('trainer replicas; at most 4');
    expect(row(view, 'image').hidden).toBe(false);
  });

  it('hides what the backend does not use and what the mode lacks', () => {
    const view = open('local');
    expect(row(view, 'image').hidden).toBe(true);
    const mode = view.node.querySelector<HTMLSelectElement>('[data-field="mode"]')!;
    mode.value = 'collective';
    mode.dispatchEvent(new Event('change', { bubbles: true }));
    expect(row(view, 'pservers').hidden).toBe(true);
    expect(row(view, 'pserver_cpu').hidden).toBe(true);
    expect(view.values().pservers).toBe('0');
    expect(view.node.querySelector('[data-testid="paddle-form-totals"]')!.textContent).toBe(
      'Total: 1 trainer × 1 CPU = 1 CPU, 1Gi'
    );
    mode.value = 'ps';
    mode.dispatchEvent(new Event('change', { bubbles: true }));
    expect(row(view, 'pservers').hidden).toBe(false);
    expect(view.values().pservers).toBe('1');
  });

  it('says why there is no form without the server settings', () => {
    const view = new JobFormView(
      {} as PaddleApi,
      () => undefined,
      () => undefined
    );
    view.reset(null);
    expect(view.node.querySelector('[data-testid="paddle-form-error"]')!.textContent).toMatch(
      /needs the server settings/
    );
    expect(
      view.node.querySelector<HTMLButtonElement>('[data-testid="paddle-submit"]')!.disabled
    ).toBe(true);
  });
});

describe("the form says what the server's Paddle runs", () => {
  it('shows the local backend summary, as a warning when parameter-server mode is out of reach', () => {
    expect(paddleNote({ name: 'kubernetes', ok: true, error: null })).toBeNull();
    expect(
      paddleNote({
        name: 'local',
        ok: true,
        error: null,
        paddle: {
          summary: 'PaddlePaddle 3.0.0 runs parameter-server and collective jobs.',
          modes: ['ps', 'collective']
        }
      })
    ).toEqual({
      text: 'PaddlePaddle 3.0.0 runs parameter-server and collective jobs.',
      limited: false
    });
    expect(
      paddleNote({
        name: 'local',
        ok: true,
        error: null,
        paddle: {
          summary: 'PaddlePaddle 3.3.1 runs collective jobs only: ...',
          modes: ['collective']
        }
      })?.limited
    ).toBe(true);
  });
});
