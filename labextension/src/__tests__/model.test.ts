import { afterEach, describe, expect, it } from 'vitest';

import { ApiError, PaddleApi } from '../api/client';
import { JobsModel } from '../state/model';
import { IJobStatus } from '../api/types';
import { job } from './fixtures';

/** A controllable `/events` body plus counters, standing in for the server in these tests. */
class FakeServer {
  listCalls = 0;
  eventCalls = 0;
  jobs: IJobStatus[] = [];
  failEvents: ApiError | null = null;
  private _controller: ReadableStreamDefaultController<Uint8Array> | null = null;

  api(): PaddleApi {
    return {
      listJobs: () => {
        this.listCalls++;
        return this.failEvents ? Promise.reject(this.failEvents) : Promise.resolve(this.jobs);
      },
      config: () =>
        Promise.resolve({
          backend: { name: 'local', ok: true },
          defaults: {},
          limits: {},
          images: [],
          default_image: null,
          version: '0'
        }),
      events: () => {
        this.eventCalls++;
        if (this.failEvents) {
          return Promise.reject(this.failEvents);
        }
        const body = new ReadableStream<Uint8Array>({
          start: c => {
            this._controller = c;
          }
        });
        return Promise.resolve(new Response(body, { status: 200 }));
      }
    } as unknown as PaddleApi;
  }

  send(event: string, data: unknown): void {
    this._controller!.enqueue(
      new TextEncoder().encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`)
    );
  }

  close(): void {
    this._controller!.close();
  }
}

async function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) {
      throw new Error('condition not reached');
    }
    await new Promise(resolve => setTimeout(resolve, 10));
  }
}

const models: JobsModel[] = [];
afterEach(() => models.splice(0).forEach(model => model.dispose()));

function start(server: FakeServer): JobsModel {
  const model = new JobsModel(server.api());
  models.push(model);
  model.start();
  return model;
}

describe('live job list', () => {
  it('applies snapshot, job and deleted events from the stream', async () => {
    const server = new FakeServer();
    const model = start(server);
    await until(() => model.state.connection === 'live');
    server.send('snapshot', { jobs: [job('a'), job('b')] });
    await until(() => model.state.loaded);
    server.send('job', job('a', { phase: 'Succeeded' }));
    server.send('deleted', { name: 'b' });
    await until(() => !model.state.jobs.has('b'));
    expect(model.state.jobs.get('a')!.phase).toBe('Succeeded');
  });

  it('announces jobs that finish while watched', async () => {
    const server = new FakeServer();
    const model = start(server);
    const finished: string[] = [];
    model.finished.connect((_, jobs) => jobs.forEach(j => finished.push(`${j.name}:${j.phase}`)));
    await until(() => model.state.connection === 'live');
    server.send('snapshot', { jobs: [job('a'), job('old', { phase: 'Failed' })] });
    server.send('job', job('a', { phase: 'Failed', message: 'trainer 0: Exit code 3' }));
    await until(() => finished.length > 0);
    expect(finished).toEqual(['a:Failed']);
  });

  it('polls while the stream is down and reconnects', async () => {
    const server = new FakeServer();
    server.jobs = [job('polled')];
    const model = start(server);
    await until(() => model.state.connection === 'live');
    server.close();
    await until(() => model.state.connection === 'polling');
    await until(() => model.state.jobs.has('polled'));
    expect(server.listCalls).toBeGreaterThan(0);
    await until(() => server.eventCalls === 2 && model.state.connection === 'live');
  });

  it('a resync event reloads the whole list', async () => {
    const server = new FakeServer();
    const model = start(server);
    await until(() => model.state.connection === 'live');
    server.send('snapshot', { jobs: [job('stale')] });
    await until(() => model.state.loaded);
    server.jobs = [job('fresh')];
    server.send('resync', {});
    await until(() => model.state.jobs.has('fresh'));
    expect(model.state.jobs.has('stale')).toBe(false);
  });

  it('a missing server extension becomes a problem in words', async () => {
    const server = new FakeServer();
    server.failEvents = new ApiError(
      404,
      'no_extension',
      'The paddle-nbext server extension is not enabled'
    );
    const model = start(server);
    await until(() => model.state.problem !== null);
    expect(model.state.problem).toEqual({
      kind: 'missing',
      message: 'The paddle-nbext server extension is not enabled'
    });
    expect(model.state.connection).toBe('polling');
  });

  it('a 503 the cluster refused (RBAC) is shown as not allowed, with the missing permission', async () => {
    const server = new FakeServer();
    const words =
      "the notebook's ServiceAccount system:serviceaccount:ns:default may not list configmaps in namespace ns (HTTP 403): ...";
    server.failEvents = new ApiError(503, 'forbidden_by_cluster', words);
    const model = start(server);
    await until(() => model.state.problem !== null);
    expect(model.state.problem).toEqual({
      kind: 'unreachable',
      message: `The job backend is not allowed to work: ${words}`
    });
  });

  it('a 503 is shown as an unreachable backend, and clears once it answers', async () => {
    const server = new FakeServer();
    server.failEvents = new ApiError(503, 'unavailable', 'Kubernetes API timed out');
    const model = start(server);
    await until(() => model.state.problem !== null);
    expect(model.state.problem).toEqual({
      kind: 'unreachable',
      message: 'The job backend is unreachable: Kubernetes API timed out'
    });
    server.failEvents = null;
    model.retry();
    await until(() => model.state.connection === 'live' && model.state.problem === null);
  });
});
