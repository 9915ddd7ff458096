/**
 * Inline validation and totals for the New job form.
 *
 * Mirrors `paddle_nbext.spec.JobSpec.check` (same rules, same messages) so people see the
 * server's message before they submit.  The server stays authoritative: its 422 `field` error
 * is shown on that field too.
 */
import { Fraction, QuantityError, formatBytes, formatCpu, parseQuantity } from './quantity';
import { DEFAULT_LIMITS, ILimits } from './types';

export const NAME_MAX_LENGTH = 40;
// A DNS-1035 label, as JobSpec checks it (the job's Service carries the name).
const NAME_RE = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const ENV_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
const DURATION_RE = /^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$/;

/** Variables the launcher sets for each replica (spec.RESERVED_ENV). */
export const RESERVED_ENV: ReadonlySet<string> = new Set([
  'TRAINING_ROLE',
  'PADDLE_TRAINER_ID',
  'PADDLE_TRAINERS_NUM',
  'PADDLE_PSERVERS_IP_PORT_LIST',
  'PADDLE_PORT',
  'POD_IP',
  'PADDLE_TRAINER_ENDPOINTS',
  'PADDLE_CURRENT_ENDPOINT',
  'PADDLE_JOB_NAME',
  'TRAINERS',
  'PSERVERS',
  'ENTRY',
  'TRAINER_PACKAGE'
]);
const RESERVED_ENV_PREFIX = 'PADDLE_NBEXT_';

/** What the form holds: text as typed, plus the snapshot checkbox. */
export interface IFormValues {
  job_name: string;
  entry_point: string;
  trainer_package: string;
  image: string;
  mode: string;
  pservers: string;
  trainers: string;
  pserver_cpu: string;
  pserver_mem: string;
  trainer_cpu: string;
  trainer_mem: string;
  trainer_gpu: string;
  env: string;
  snapshot: boolean;
  max_restarts: string;
  timeout: string;
}

export type FieldName = keyof IFormValues;
export type FormErrors = { [field: string]: string };

export const FORM_FIELDS: FieldName[] = [
  'job_name',
  'entry_point',
  'trainer_package',
  'image',
  'mode',
  'pservers',
  'trainers',
  'pserver_cpu',
  'pserver_mem',
  'trainer_cpu',
  'trainer_mem',
  'trainer_gpu',
  'env',
  'snapshot',
  'max_restarts',
  'timeout'
];

function text(value: unknown): string {
  if (value === null || value === undefined) {
    return '';
  }
  if (typeof value === 'object') {
    return Object.entries(value as { [k: string]: unknown })
      .map(([k, v]) => `${k}=${String(v)}`)
      .join('\n');
  }
  if (typeof value === 'string') {
    return value;
  }
  // Config defaults are JSON, so anything left is a number or a boolean.
  return typeof value === 'number' || typeof value === 'boolean' ? String(value) : '';
}

/** Form values from `GET /config` defaults (unknown keys are ignored). */
export function defaultValues(
  defaults: { [field: string]: unknown } = {},
  defaultImage: string | null = null
): IFormValues {
  const mode = text(defaults.mode) || 'ps';
  return {
    job_name: text(defaults.job_name),
    entry_point: text(defaults.entry_point),
    trainer_package: text(defaults.trainer_package),
    image: text(defaults.image) || defaultImage || '',
    mode,
    pservers: text(defaults.pservers) || (mode === 'ps' ? '1' : '0'),
    trainers: text(defaults.trainers) || '1',
    pserver_cpu: text(defaults.pserver_cpu) || '1',
    pserver_mem: text(defaults.pserver_mem) || '1Gi',
    trainer_cpu: text(defaults.trainer_cpu) || '1',
    trainer_mem: text(defaults.trainer_mem) || '1Gi',
    trainer_gpu: text(defaults.trainer_gpu) || '0',
    env: text(defaults.env),
    snapshot: defaults.snapshot === undefined ? true : Boolean(defaults.snapshot),
    max_restarts: text(defaults.max_restarts) || '0',
    timeout: text(defaults.timeout)
  };
}

class FieldError extends Error {
  constructor(
    readonly field: string,
    message: string
  ) {
    super(message);
  }
}

/** The name rule of `spec.validate_name`; returns a message or null. */
export function checkName(name: string): string | null {
  if (!name) {
    return null; // left out: the server generates one
  }
  if (name.length > NAME_MAX_LENGTH) {
    return `'${name}' is ${name.length} characters long; at most ${NAME_MAX_LENGTH} are allowed`;
  }
  if (!NAME_RE.test(name)) {
    return (
      `'${name}' is not allowed: use lower-case letters, digits and '-', ` +
      "starting with a letter and ending with a letter or digit (e.g. 'mnist-ps-1')"
    );
  }
  return null;
}

function integer(
  field: string,
  raw: string,
  fallback: number,
  lowest: number,
  highest: number | null
): number {
  const trimmed = raw.trim();
  if (trimmed === '') {
    return fallback;
  }
  if (!/^\+?\d+$/.test(trimmed)) {
    throw new FieldError(field, `must be a whole number, got '${raw}'`);
  }
  const value = parseInt(trimmed, 10);
  if (value < lowest) {
    throw new FieldError(field, `must be at least ${lowest}, got ${value}`);
  }
  if (highest !== null && value > highest) {
    throw new FieldError(field, `must be at most ${highest} on this server, got ${value}`);
  }
  return value;
}

function quantity(field: string, raw: string, fallback: string, most: string | null): Fraction {
  const source = raw.trim() === '' ? fallback : raw;
  let value: Fraction;
  try {
    value = parseQuantity(source);
  } catch (error) {
    if (error instanceof QuantityError) {
      throw new FieldError(field, error.message);
    }
    throw error;
  }
  if (value.compare(Fraction.of(0)) <= 0) {
    throw new FieldError(field, `must be positive, got '${source}'`);
  }
  if (most !== null && value.compare(parseQuantity(most)) > 0) {
    throw new FieldError(
      field,
      `'${source}' is more than this server allows per replica (${most})`
    );
  }
  if (field.endsWith('_cpu') && !value.mul(1000).isInteger()) {
    throw new FieldError(field, `'${source}' is finer than a millicore; use e.g. '500m' or '1.5'`);
  }
  if (field.endsWith('_mem') && !value.isInteger()) {
    throw new FieldError(
      field,
      `'${source}' is not a whole number of bytes; use e.g. '512Mi' or '4Gi'`
    );
  }
  return value;
}

/** Seconds from `600`, `90s`, `30m`, `2h`, `1h30m`, `1d`; null when blank. */
export function parseDuration(raw: string, field = 'timeout'): number | null {
  const trimmed = raw.trim();
  if (trimmed === '') {
    return null;
  }
  let seconds: number;
  const match = DURATION_RE.exec(trimmed);
  if (/^\d+$/.test(trimmed)) {
    seconds = parseInt(trimmed, 10);
  } else if (match) {
    const [d, h, m, s] = match.slice(1).map(part => (part ? parseInt(part, 10) : 0));
    seconds = ((d * 24 + h) * 60 + m) * 60 + s;
  } else {
    throw new FieldError(
      field,
      `'${raw}' is not a duration: use seconds (600) or units like '90s', '30m', '2h', '1h30m'`
    );
  }
  if (seconds <= 0) {
    throw new FieldError(field, 'must be positive (or leave it out for no limit)');
  }
  return seconds;
}

/** `KEY=VALUE` lines (blank lines ignored) into a mapping, with the spec's env rules. */
export function parseEnv(raw: string): { [name: string]: string } {
  const env: { [name: string]: string } = {};
  for (const line of raw.split('\n')) {
    const item = line.trim();
    if (item === '') {
      continue;
    }
    const at = item.indexOf('=');
    if (at < 0) {
      throw new FieldError('env', `'${item}' is not KEY=VALUE`);
    }
    const key = item.slice(0, at).trim();
    if (!ENV_NAME_RE.test(key)) {
      throw new FieldError(
        'env',
        `'${key}' is not a valid variable name: letters, digits and '_', not starting with a digit`
      );
    }
    if (RESERVED_ENV.has(key) || key.startsWith(RESERVED_ENV_PREFIX)) {
      throw new FieldError(
        'env',
        `${key} is set by the launcher for each replica and cannot be overridden`
      );
    }
    env[key] = item.slice(at + 1);
  }
  return env;
}

/** The validated, typed figures of a form (used for totals and for the request body). */
export interface IParsed {
  mode: string;
  pservers: number;
  trainers: number;
  pserverCpu: Fraction;
  pserverMem: Fraction;
  trainerCpu: Fraction;
  trainerMem: Fraction;
  trainerGpu: number;
}

function checkField(
  values: IFormValues,
  field: FieldName,
  limits: ILimits,
  parsed: Partial<IParsed>
): void {
  const mode = values.mode || 'ps';
  switch (field) {
    case 'job_name': {
      const message = checkName(values.job_name.trim());
      if (message) {
        throw new FieldError(field, message);
      }
      return;
    }
    case 'entry_point': {
      const value = values.entry_point.trim();
      if (!value) {
        throw new FieldError(
          field,
          "is required: the command to run in the package dir, e.g. 'python train.py --epochs 3'"
        );
      }
      if (value.includes('\n') || value.includes('\0')) {
        throw new FieldError(field, 'must be a single-line command');
      }
      return;
    }
    case 'trainer_package':
      if (values.trainer_package.includes('\0')) {
        throw new FieldError(field, 'must be a path');
      }
      return;
    case 'image': {
      const value = values.image.trim();
      if (!value) {
        return;
      }
      if (/\s/.test(value) || value.length > 512) {
        throw new FieldError(
          field,
          `'${value}' is not an image reference (e.g. 'registry/paddle:3.0.0')`
        );
      }
      if (limits.allowed_images && !limits.allowed_images.includes(value)) {
        throw new FieldError(
          field,
          `'${value}' is not allowed on this server; allowed images: ${limits.allowed_images.join(', ') || 'none'}`
        );
      }
      return;
    }
    case 'mode':
      if (mode !== 'ps' && mode !== 'collective') {
        throw new FieldError(
          field,
          `'${mode}' is not a mode: use 'ps' (parameter servers + trainers) or 'collective'`
        );
      }
      parsed.mode = mode;
      return;
    case 'pservers': {
      const value = integer(field, values.pservers, mode === 'ps' ? 1 : 0, 0, limits.max_pservers);
      if (mode === 'ps' && value < 1) {
        throw new FieldError(field, 'ps mode needs at least 1 parameter server');
      }
      if (mode === 'collective' && value !== 0) {
        throw new FieldError(
          field,
          "collective mode has no parameter servers; set pservers to 0 or use mode 'ps'"
        );
      }
      parsed.pservers = value;
      return;
    }
    case 'trainers':
      parsed.trainers = integer(field, values.trainers, 1, 1, limits.max_trainers);
      return;
    case 'pserver_cpu':
      parsed.pserverCpu = quantity(field, values.pserver_cpu, '1', limits.max_cpu_per_replica);
      return;
    case 'trainer_cpu':
      parsed.trainerCpu = quantity(field, values.trainer_cpu, '1', limits.max_cpu_per_replica);
      return;
    case 'pserver_mem':
      parsed.pserverMem = quantity(field, values.pserver_mem, '1Gi', limits.max_mem_per_replica);
      return;
    case 'trainer_mem':
      parsed.trainerMem = quantity(field, values.trainer_mem, '1Gi', limits.max_mem_per_replica);
      return;
    case 'trainer_gpu':
      parsed.trainerGpu = integer(field, values.trainer_gpu, 0, 0, limits.max_gpu_per_replica);
      return;
    case 'env':
      parseEnv(values.env);
      return;
    case 'snapshot':
      return;
    case 'max_restarts':
      integer(field, values.max_restarts, 0, 0, limits.max_restarts);
      return;
    case 'timeout': {
      const seconds = parseDuration(values.timeout);
      if (seconds !== null && limits.max_timeout !== null && seconds > limits.max_timeout) {
        throw new FieldError(
          field,
          `${seconds}s is longer than this server allows (${limits.max_timeout}s)`
        );
      }
      return;
    }
  }
}

/** Every invalid field with its message (empty when the form may be submitted). */
export function validateForm(values: IFormValues, limits: ILimits = DEFAULT_LIMITS): FormErrors {
  return analyse(values, limits).errors;
}

function analyse(
  values: IFormValues,
  limits: ILimits
): { errors: FormErrors; parsed: Partial<IParsed> } {
  const errors: FormErrors = {};
  const parsed: Partial<IParsed> = {};
  for (const field of FORM_FIELDS) {
    try {
      checkField(values, field, limits, parsed);
    } catch (error) {
      if (error instanceof FieldError) {
        errors[error.field] = error.message;
      } else {
        throw error;
      }
    }
  }
  if (
    Object.keys(errors).length === 0 &&
    limits.max_gpu_per_job !== null &&
    parsed.trainers !== undefined &&
    parsed.trainerGpu !== undefined
  ) {
    const total = parsed.trainers * parsed.trainerGpu;
    if (total > limits.max_gpu_per_job) {
      errors.trainer_gpu =
        `${parsed.trainers} trainers x ${parsed.trainerGpu} GPU = ${total} GPUs; ` +
        `this server allows ${limits.max_gpu_per_job} per job`;
    }
  }
  return { errors, parsed };
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

/**
 * The totals line, as `JobSpec.summary()` writes it:
 * "2 pservers × 1 CPU + 4 trainers × 2 CPU = 10 CPU, 18Gi".  Null while a figure it needs is
 * invalid (the field's own message says why).
 */
export function totalsLine(values: IFormValues, limits: ILimits = DEFAULT_LIMITS): string | null {
  const { parsed } = analyse(values, limits);
  const { pservers, trainers, pserverCpu, pserverMem, trainerCpu, trainerMem, trainerGpu } = parsed;
  if (
    pservers === undefined ||
    trainers === undefined ||
    trainerCpu === undefined ||
    trainerMem === undefined ||
    trainerGpu === undefined ||
    (pservers > 0 && (pserverCpu === undefined || pserverMem === undefined))
  ) {
    return null;
  }
  const parts: string[] = [];
  let cpu = trainerCpu.mul(trainers);
  let mem = trainerMem.mul(trainers);
  if (pservers > 0 && pserverCpu && pserverMem) {
    parts.push(`${plural(pservers, 'pserver')} × ${formatCpu(pserverCpu)} CPU`);
    cpu = cpu.add(pserverCpu.mul(pservers));
    mem = mem.add(pserverMem.mul(pservers));
  }
  const gpu = trainerGpu ? ` + ${trainerGpu} GPU` : '';
  parts.push(`${plural(trainers, 'trainer')} × ${formatCpu(trainerCpu)} CPU${gpu}`);
  let total = `${formatCpu(cpu)} CPU, ${formatBytes(mem)}`;
  if (trainerGpu * trainers) {
    total += `, ${trainerGpu * trainers} GPU`;
  }
  return `${parts.join(' + ')} = ${total}`;
}

/** The `POST /jobs` body: blank fields are left out so the server's defaults apply. */
export function toPayload(values: IFormValues): { [field: string]: unknown } {
  const body: { [field: string]: unknown } = {};
  const str = (field: FieldName, value: string): void => {
    if (value.trim() !== '') {
      body[field] = value.trim();
    }
  };
  const int = (field: FieldName, value: string): void => {
    if (value.trim() !== '') {
      body[field] = parseInt(value.trim(), 10);
    }
  };
  str('job_name', values.job_name);
  str('entry_point', values.entry_point);
  str('trainer_package', values.trainer_package);
  str('image', values.image);
  body.mode = values.mode || 'ps';
  int('pservers', values.mode === 'collective' ? '0' : values.pservers);
  int('trainers', values.trainers);
  if (values.mode !== 'collective') {
    str('pserver_cpu', values.pserver_cpu);
    str('pserver_mem', values.pserver_mem);
  }
  str('trainer_cpu', values.trainer_cpu);
  str('trainer_mem', values.trainer_mem);
  int('trainer_gpu', values.trainer_gpu);
  const env = parseEnv(values.env);
  if (Object.keys(env).length) {
    body.env = env;
  }
  body.snapshot = values.snapshot;
  int('max_restarts', values.max_restarts);
  str('timeout', values.timeout);
  return body;
}
