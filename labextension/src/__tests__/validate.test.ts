import { describe, expect, it } from 'vitest';

import { formatBytes, formatCpu, parseQuantity } from '../logic/quantity';
import { FormValues, defaultValues, toPayload, totalsLine, validateForm } from '../logic/validate';
import { SCHEMAS, withFields } from './schemas';

/** The schema a server with the default limits serves; `TIGHT` one with low limits. */
const DEFAULT = SCHEMAS.default;
const TIGHT = SCHEMAS.tight;

const check = (values: FormValues, schema = DEFAULT) => validateForm(values, schema);
const totals = (values: FormValues, schema = DEFAULT) => totalsLine(values, schema);
const payload = (values: FormValues, schema = DEFAULT) => toPayload(values, schema);

function form(overrides: FormValues = {}): FormValues {
  return { ...defaultValues(DEFAULT), entry_point: 'python train.py', ...overrides };
}

describe('quantities', () => {
  it('parse exactly and format like the Python side', () => {
    expect(formatCpu(parseQuantity('500m'))).toBe('500m');
    expect(formatCpu(parseQuantity('1.5'))).toBe('1.5');
    expect(formatCpu(parseQuantity('2'))).toBe('2');
    expect(formatBytes(parseQuantity('4Gi'))).toBe('4Gi');
    expect(formatBytes(parseQuantity('1536Mi'))).toBe('1.5Gi');
    expect(formatBytes(parseQuantity('1G'))).toBe('953.67Mi');
    expect(parseQuantity('1e3').compare(parseQuantity('1k'))).toBe(0);
  });

  it('reject what Kubernetes rejects', () => {
    expect(() => parseQuantity('2 cores')).toThrow(/is not a quantity/);
    expect(() => parseQuantity('1e99')).toThrow(/out of range/);
  });
});

describe('form validation mirrors JobSpec.check', () => {
  it('defaults with an entry point are valid', () => {
    expect(check(form())).toEqual({});
  });

  it('requires an entry point', () => {
    expect(check(form({ entry_point: '  ' })).entry_point).toMatch(/^is required/);
  });

  it.each([
    ['Bad_Name', /not allowed: use lower-case letters/],
    ['-x', /not allowed/],
    ['1mnist', /starting with a letter/],
    ['a'.repeat(41), /41 characters long; at most 40/]
  ])('name %s', (name, message) => {
    expect(check(form({ job_name: name })).job_name).toMatch(message);
  });

  it('counts are whole numbers within the server limits', () => {
    expect(check(form({ trainers: 'two' })).trainers).toBe("must be a whole number, got 'two'");
    expect(check(form({ trainers: '0' })).trainers).toBe('must be at least 1, got 0');
    expect(check(form({ trainers: '65' })).trainers).toBe(
      'must be at most 64 on this server, got 65'
    );
    expect(check(form({ mode: 'ps', pservers: '0' })).pservers).toBe(
      'ps mode needs at least 1 parameter server'
    );
    expect(check(form({ mode: 'collective', pservers: '2' })).pservers).toMatch(
      /collective mode has no parameter servers/
    );
    expect(check(form({ mode: 'collective', pservers: '0' }))).toEqual({});
  });

  it('quantities: syntax, sign, granularity and per-replica limits', () => {
    expect(check(form({ trainer_cpu: '2 cores' })).trainer_cpu).toMatch(
      /'2 cores' is not a quantity/
    );
    expect(check(form({ trainer_cpu: '0' })).trainer_cpu).toBe("must be positive, got '0'");
    expect(check(form({ trainer_cpu: '0.0005' })).trainer_cpu).toMatch(/finer than a millicore/);
    expect(check(form({ trainer_mem: '0.5' })).trainer_mem).toMatch(/not a whole number of bytes/);
    const limits = TIGHT; // max_cpu_per_replica '4', max_mem_per_replica '8Gi'
    expect(check(form({ trainer_cpu: '5' }), limits).trainer_cpu).toBe(
      "'5' is more than this server allows per replica (4)"
    );
    expect(check(form({ mode: 'ps', pserver_mem: '9Gi' }), limits).pserver_mem).toMatch(
      /more than this server allows/
    );
    expect(check(form({ trainer_cpu: '4' }), limits)).toEqual({});
  });

  it('GPUs per replica and per job', () => {
    const limits = TIGHT; // max_gpu_per_job 4
    expect(check(form({ trainer_gpu: '9' })).trainer_gpu).toBe(
      'must be at most 8 on this server, got 9'
    );
    expect(check(form({ trainers: '3', trainer_gpu: '2' }), limits).trainer_gpu).toBe(
      '3 trainers x 2 GPU = 6 GPUs; this server allows 4 per job'
    );
  });

  it('env, timeout, image', () => {
    expect(check(form({ env: 'A=1\n\nB=two' }))).toEqual({});
    expect(check(form({ env: 'NOEQUALS' })).env).toBe("'NOEQUALS' is not KEY=VALUE");
    expect(check(form({ env: '1A=x' })).env).toMatch(/not a valid variable name/);
    expect(check(form({ env: 'PADDLE_TRAINER_ID=3' })).env).toMatch(/set by the launcher/);
    expect(check(form({ timeout: '1h30m' }))).toEqual({});
    expect(check(form({ timeout: 'soon' })).timeout).toMatch(/is not a duration/);
    expect(check(form({ timeout: '2h' }), TIGHT /* max_timeout 3600 */).timeout).toBe(
      '7200s is longer than this server allows (3600s)'
    );
    expect(check(form({ image: 'a b' })).image).toMatch(/not an image reference/);
    expect(
      check(form({ image: 'x:1' }), TIGHT /* allowed_images ['paddle:3.0.0'] */).image
    ).toMatch(/not allowed on this server; allowed images: paddle:3/);
  });

  it('requirements: a file inside the package, blank left to the package', () => {
    expect(defaultValues(DEFAULT).requirements).toBe('');
    expect(check(form({ requirements: 'env/requirements-dev.txt' }))).toEqual({});
    expect(check(form({ requirements: '/r.txt' })).requirements).toBe(
      "'/r.txt' is an absolute path; give a path relative to the package directory, e.g. requirements.txt"
    );
    expect(check(form({ requirements: 'env/../../r.txt' })).requirements).toMatch(
      /leaves the package directory/
    );
    expect(payload(form())).not.toHaveProperty('requirements');
    expect(payload(form({ requirements: ' r.txt ' })).requirements).toBe('r.txt');
  });
});

describe('totals line', () => {
  it('collective: "4 trainers × 2 CPU = 8 CPU, 16Gi"', () => {
    expect(
      totals(
        form({
          mode: 'collective',
          pservers: '0',
          trainers: '4',
          trainer_cpu: '2',
          trainer_mem: '4Gi'
        })
      )
    ).toBe('4 trainers × 2 CPU = 8 CPU, 16Gi');
  });

  it('ps with GPUs, as JobSpec.summary() writes it', () => {
    expect(
      totals(
        form({
          mode: 'ps',
          pservers: '2',
          pserver_cpu: '1',
          pserver_mem: '1Gi',
          trainers: '4',
          trainer_cpu: '2',
          trainer_mem: '4Gi',
          trainer_gpu: '1'
        })
      )
    ).toBe('2 pservers × 1 CPU + 4 trainers × 2 CPU + 1 GPU = 10 CPU, 18Gi, 4 GPU');
    expect(
      totals(
        form({
          mode: 'ps',
          pservers: '1',
          trainers: '1',
          trainer_cpu: '500m',
          pserver_cpu: '250m',
          trainer_mem: '512Mi',
          pserver_mem: '512Mi'
        })
      )
    ).toBe('1 pserver × 250m CPU + 1 trainer × 500m CPU = 750m CPU, 1Gi');
  });

  it('is withheld while a figure is invalid', () => {
    expect(totals(form({ trainer_cpu: 'lots' }))).toBeNull();
  });
});

describe('the form is the schema', () => {
  it('has every field the server serves, in its order, and nothing else', () => {
    expect(Object.keys(defaultValues(DEFAULT))).toEqual(Object.keys(DEFAULT.properties));
  });

  it('hides the fields this backend does not use and leaves them out of the body', () => {
    const values = form({ image: 'paddle:3' });
    expect(toPayload(values, DEFAULT, 'local')).not.toHaveProperty('image');
    expect(toPayload(values, DEFAULT, 'kubernetes').image).toBe('paddle:3');
  });

  it('a field the server adds is validated by its kind without code here', () => {
    const served = withFields(DEFAULT, {});
    served.properties.workers = { ...DEFAULT.properties.trainers, title: 'Workers', maximum: 3 };
    expect(validateForm(form({ workers: '4' }), served).workers).toBe(
      'must be at most 3 on this server, got 4'
    );
  });
});

describe('request body', () => {
  it('typed fields, blanks left to the server defaults', () => {
    const body = payload(
      form({ mode: 'ps', pservers: '1', job_name: '', trainers: '2', env: 'A=1', timeout: '' })
    );
    expect(body).toEqual({
      entry_point: 'python train.py',
      mode: 'ps',
      pservers: 1,
      trainers: 2,
      pserver_cpu: '1',
      pserver_mem: '1Gi',
      trainer_cpu: '1',
      trainer_mem: '1Gi',
      trainer_gpu: 0,
      procs_per_trainer: 1,
      env: { A: '1' },
      snapshot: true,
      max_restarts: 0,
      keep_checkpoints: 3,
      stall_timeout: '600',
      on_stall: 'warn'
    });
  });

  it('collective sends no pserver fields', () => {
    const body = payload(form({ mode: 'collective', pservers: '1' }));
    expect(body.pservers).toBe(0);
    expect(body).not.toHaveProperty('pserver_cpu');
  });

  it('defaults come from GET /config', () => {
    // What a server with these defaults (and default_image paddle:3) serves.
    const served = withFields(DEFAULT, {
      trainers: { default: 2 },
      trainer_mem: { default: '2Gi' },
      mode: { default: 'collective' },
      pservers: { default: 0 },
      env: { default: { X: 'y' } },
      image: { default: 'paddle:3' }
    });
    const values = defaultValues(served);
    expect(values).toMatchObject({
      trainers: '2',
      trainer_mem: '2Gi',
      mode: 'collective',
      pservers: '0',
      env: 'X=y',
      image: 'paddle:3'
    });
  });
});
