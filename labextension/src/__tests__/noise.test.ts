/// <reference types="node" />
/**
 * "Hide Paddle noise" against the shared vectors (tests/vectors/paddle_noise.json: real lines of
 * real Paddle 3.0.0 logs, parameter server and collective), which pytest runs against the job
 * runner's failure line (tests/runtime/test_paddle_noise.py): the panel hides what the runner skips.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { NoiseFilter, isNoiseLine, lastTraceback, noiseMask } from '../logic/logtext';

interface ILogVector {
  name: string;
  from: string;
  log: string[];
  shown: string[];
  failure_line: string;
  exception: string | null;
}

const VECTORS = JSON.parse(
  readFileSync(join(__dirname, '..', '..', '..', 'tests', 'vectors', 'paddle_noise.json'), 'utf-8')
) as { noise: string[]; kept: string[]; logs: ILogVector[] };

const LOGS = VECTORS.logs.map(log => [log.name, log] as const);

/** The log's text as the logs API sends it. */
function text(log: ILogVector): string {
  return log.log.map(line => `${line}\n`).join('');
}

describe('shared vectors: the panel hides what the runner skips as Paddle noise', () => {
  it.each(VECTORS.noise.map(line => [line]))('noise: %s', line => {
    expect(isNoiseLine(line)).toBe(true);
  });

  it.each(VECTORS.kept.map(line => [line]))('kept: %s', line => {
    expect(isNoiseLine(line)).toBe(false);
  });

  it.each(LOGS)('%s: what stays shown', (_name, log) => {
    const mask = noiseMask(log.log);
    expect(log.log.filter((_, n) => !mask[n])).toEqual(log.shown);
    const filter = new NoiseFilter(true);
    expect(filter.feed(text(log)) + filter.end()).toBe(log.shown.map(line => `${line}\n`).join(''));
    expect(filter.hidden).toBe(log.log.length - log.shown.length);
  });

  it.each(LOGS)('%s: the same, however the text arrives in chunks', (_name, log) => {
    const whole = text(log);
    for (const size of [1, 7, 64, 1000]) {
      const filter = new NoiseFilter(true);
      let out = '';
      for (let at = 0; at < whole.length; at += size) {
        out += filter.feed(whole.slice(at, at + size));
      }
      expect(out + filter.end()).toBe(log.shown.map(line => `${line}\n`).join(''));
    }
  });

  it.each(LOGS)('%s: the traceback marked ends on its exception line', (_name, log) => {
    for (const shown of [text(log), log.shown.map(line => `${line}\n`).join('')]) {
      const span = lastTraceback(shown);
      if (log.exception === null) {
        expect(span).toBeNull();
      } else {
        const marked = shown.slice(span!.start, span!.end);
        expect(
          marked
            .split('\n')
            .pop()!
            .replace(/^\[rank \d+\] /, '')
        ).toBe(log.exception);
      }
    }
  });
});

describe('the rules around the patterns', () => {
  const paddle =
    '/opt/venv/lib/python3.10/site-packages/paddle/distributed/ps/the_one_ps.py:1260: UserWarning: gloo may not initialize correctly';
  const source = '  warnings.warn("...")';

  it("hides a Paddle warning's source line, never a user's", () => {
    expect(noiseMask([paddle, source, 'step 1', source])).toEqual([true, true, false, false]);
    expect(noiseMask(['/home/alice/code/train.py:3: UserWarning: small batch', source])).toEqual([
      false,
      false
    ]);
    expect(noiseMask([`[rank 1] ${paddle}`, '[rank 0] step 1', `[rank 1] ${source}`])).toEqual([
      true,
      false,
      true
    ]);
  });

  it('hides blank lines next to noise only, holding them back until it knows', () => {
    const lines = [
      'step 1',
      '',
      '',
      '--------------------------------------',
      '',
      'step 2',
      '',
      'step 3',
      ''
    ];
    expect(noiseMask(lines)).toEqual([false, true, true, true, true, false, false, false, false]);
    const filter = new NoiseFilter(true);
    expect(filter.feed('step 1\n\n')).toBe('step 1\n');
    expect(filter.feed('step 2\n')).toBe('\nstep 2\n');
    expect(filter.feed('\n')).toBe('');
    expect(filter.feed('------------\n\n')).toBe('');
    expect(filter.feed('\nlast')).toBe('');
    expect(filter.end()).toBe('last');
    expect(filter.hidden).toBe(4);
  });

  it('keeps a blank line that ends the log', () => {
    const filter = new NoiseFilter(true);
    expect(filter.feed('step 1\n\n') + filter.end()).toBe('step 1\n\n');
  });
});
