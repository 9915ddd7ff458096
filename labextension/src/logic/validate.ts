/**
 * Inline validation, request body and totals for the New job form, driven by the job schema
 * `GET /config` serves (`job_schema`, written by `paddle_nbext/model/schema.py`).
 *
 * The field list, bounds, enums, patterns, reserved env names and defaults all come from that
 * schema; what is here is one parser per field kind (`x-kind`) and the named cross-field rules
 * (`x-rule`), with the messages of `paddle_nbext/model/rules.py`.  The shared vectors in
 * tests/vectors/job_spec_validation.json are run against both (vectors.test.ts here), so the
 * message shown inline is the one the server would return.  The server stays authoritative: its
 * 422 `field` error is shown on that field too.
 */
import { Fraction, QuantityError, formatBytes, formatCpu, parseQuantity } from './quantity';
import { FieldKind, IFieldSchema, IJobSchema, ILimits } from '../api/types';

/** What the form holds: text as typed, booleans for switches. */
export type FormValues = { [field: string]: string | boolean };
export type FormErrors = { [field: string]: string };
type Body = { [field: string]: unknown };

class FieldError extends Error {
  constructor(
    readonly field: string,
    message: string
  ) {
    super(message);
  }
}

// ---- Python's spelling of values, so messages read exactly as the server writes them

function quote(text: string): string {
  const q = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = '';
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === '\\' || ch === q) {
      out += `\\${ch}`;
    } else if (ch === '\n') {
      out += '\\n';
    } else if (ch === '\r') {
      out += '\\r';
    } else if (ch === '\t') {
      out += '\\t';
    } else if (code < 0x20 || code === 0x7f) {
      out += `\\x${code.toString(16).padStart(2, '0')}`;
    } else {
      out += ch;
    }
  }
  return `${q}${out}${q}`;
}

/** `repr()` of a JSON value as Python writes it: `'two'`, `2.5`, `True`, `None`, `[1]`. */
export function pyRepr(value: unknown): string {
  if (value === null || value === undefined) {
    return 'None';
  }
  if (typeof value === 'string') {
    return quote(value);
  }
  if (typeof value === 'boolean') {
    return value ? 'True' : 'False';
  }
  if (typeof value === 'number') {
    return String(value);
  }
  if (Array.isArray(value)) {
    return `[${value.map(pyRepr).join(', ')}]`;
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value as Body).map(([k, v]) => `${quote(k)}: ${pyRepr(v)}`);
    return `{${entries.join(', ')}}`;
  }
  return typeof value === 'bigint' ? value.toString() : '';
}

/** `str()` of a JSON value as Python writes it (strings as they are). */
function pyStr(value: unknown): string {
  return typeof value === 'string' ? value : pyRepr(value);
}

/** `type(value).__name__` of a JSON value in Python. */
function pyType(value: unknown): string {
  if (typeof value === 'boolean') {
    return 'bool';
  }
  if (typeof value === 'number') {
    return Number.isInteger(value) ? 'int' : 'float';
  }
  if (typeof value === 'string') {
    return 'str';
  }
  if (Array.isArray(value)) {
    return 'list';
  }
  return value === null || value === undefined ? 'NoneType' : 'dict';
}

const blank = (value: unknown): boolean => value === null || value === undefined;

// ---- one parser per kind (rules.py `_PARSERS`)

interface IContext {
  body: Body;
  mode: string;
  limits: ILimits;
}

/** The value when a request leaves the field out, for the request's mode. */
export function defaultFor(field: IFieldSchema, mode: string): unknown {
  const byMode = field['x-mode-defaults'];
  if (byMode && Object.prototype.hasOwnProperty.call(byMode, mode)) {
    return byMode[mode];
  }
  return field.default ?? null;
}

/**
 * The mode a request asks for (rules.py `requested_mode`): the one it names, else `ps` when it
 * asks for parameter servers and `collective` when it does not.
 */
export function requestedMode(body: Body): string {
  if (!blank(body.mode)) {
    return pyStr(body.mode);
  }
  if (blank(body.pservers)) {
    return 'collective';
  }
  const count = pyStr(body.pservers).trim();
  if (!/^[+-]?[0-9]+$/.test(count)) {
    return 'ps'; // not a count: the pservers rule names the field
  }
  return parseInt(count, 10) > 0 ? 'ps' : 'collective';
}

function given(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const value = ctx.body[name];
  if (!blank(value)) {
    return value;
  }
  return name === 'mode' ? ctx.mode : defaultFor(field, ctx.mode);
}

function text(name: string, field: IFieldSchema, ctx: IContext): string | null {
  const raw = ctx.body[name];
  if (blank(raw)) {
    return (field.default as string | null | undefined) ?? null;
  }
  if (typeof raw !== 'string') {
    throw new FieldError(name, `must be a string, got ${pyType(raw)}`);
  }
  return raw.trim();
}

const NAME_ADVICE =
  "use lower-case letters, digits and '-', " +
  "starting with a letter and ending with a letter or digit (e.g. 'mnist-ps-1')";

function parseName(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const raw = ctx.body[name];
  if (blank(raw) || raw === '') {
    return null; // left out: the server generates one
  }
  if (typeof raw !== 'string') {
    throw new FieldError(
      name,
      name === 'job_name'
        ? 'must be a non-empty string (or leave it out to get a generated name)'
        : 'must be a non-empty string (or leave it out)'
    );
  }
  const length = [...raw].length;
  const most = field.maxLength ?? Infinity;
  if (length > most) {
    throw new FieldError(
      name,
      `'${raw}' is ${length} characters long; at most ${most} are allowed`
    );
  }
  if (field.pattern && !new RegExp(field.pattern).test(raw)) {
    throw new FieldError(name, `'${raw}' is not allowed: ${NAME_ADVICE}`);
  }
  return raw;
}

function parseCommand(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const value = text(name, field, ctx);
  if (!value) {
    throw new FieldError(name, `is required: the ${field.description}`);
  }
  if (value.includes('\0') || value.includes('\n')) {
    throw new FieldError(name, 'must be a single-line command');
  }
  return value;
}

function parsePath(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const value = text(name, field, ctx) ?? '';
  if (value.includes('\0')) {
    throw new FieldError(name, 'must be a path');
  }
  if (value.includes('\n') || value.includes('\r')) {
    throw new FieldError(name, 'must be a path on one line (it holds a line break)');
  }
  return value;
}

function parseImage(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const value = text(name, field, ctx) || null;
  if (value === null) {
    return null;
  }
  if (/\s/.test(value) || [...value].length > (field.maxLength ?? Infinity)) {
    throw new FieldError(
      name,
      `'${value}' is not an image reference (e.g. 'registry/paddle:3.0.0')`
    );
  }
  if (field.enum) {
    const allowed = field.enum.filter((item): item is string => typeof item === 'string');
    if (!allowed.includes(value)) {
      throw new FieldError(
        name,
        `'${value}' is not allowed on this server; allowed images: ${allowed.join(', ') || 'none'}`
      );
    }
  }
  return value;
}

/** The strings a choice field allows, with what each means. */
export function choices(field: IFieldSchema): Array<[string, string]> {
  const labels = field['x-choice-labels'] ?? {};
  return (field.enum ?? [])
    .filter((item): item is string => typeof item === 'string')
    .map(value => [value, labels[value] ?? '']);
}

function parseChoice(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const raw = given(name, field, ctx);
  const options = choices(field);
  if (typeof raw !== 'string' || !options.some(([value]) => value === raw)) {
    const listed = options.map(([value, meaning]) =>
      meaning ? `'${value}' (${meaning})` : `'${value}'`
    );
    const use =
      listed.length > 1
        ? `${listed.slice(0, -1).join(', ')} or ${listed[listed.length - 1]}`
        : listed[0];
    throw new FieldError(name, `${pyRepr(raw)} is not a ${field.title.toLowerCase()}: use ${use}`);
  }
  return raw;
}

function parseCount(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const raw = given(name, field, ctx);
  let value: number | null = null;
  if (typeof raw === 'number') {
    value = Number.isInteger(raw) ? raw : null;
  } else if (typeof raw === 'string' && /^[+-]?[0-9]+$/.test(raw.trim())) {
    value = parseInt(raw.trim(), 10);
  }
  if (value === null) {
    throw new FieldError(name, `must be a whole number, got ${pyRepr(raw)}`);
  }
  const lowest = field.minimum ?? 0;
  if (value < lowest) {
    throw new FieldError(name, `must be at least ${lowest}, got ${value}`);
  }
  if (field.maximum !== undefined && value > field.maximum) {
    throw new FieldError(name, `must be at most ${field.maximum} on this server, got ${value}`);
  }
  return value;
}

function parseQuantityField(name: string, field: IFieldSchema, ctx: IContext): unknown {
  let raw = ctx.body[name];
  if (blank(raw) || raw === '') {
    raw = field.default;
  }
  let amount: Fraction;
  try {
    if (typeof raw === 'boolean') {
      throw new QuantityError("expected a quantity such as '500m', '2', '4Gi'; got a boolean");
    }
    if (typeof raw !== 'string' && typeof raw !== 'number') {
      throw new QuantityError(
        `expected a quantity string such as '500m' or '4Gi', got ${pyType(raw)}`
      );
    }
    amount = parseQuantity(raw);
  } catch (error) {
    if (error instanceof QuantityError) {
      throw new FieldError(name, error.message);
    }
    throw error;
  }
  const shown = pyStr(raw);
  if (amount.compare(Fraction.of(0)) <= 0) {
    throw new FieldError(name, `must be positive, got '${shown}'`);
  }
  const most = field['x-maximum-quantity'];
  if (most && amount.compare(parseQuantity(most)) > 0) {
    throw new FieldError(name, `'${shown}' is more than this server allows per replica (${most})`);
  }
  if (field['x-kind'] === 'cpu' && !amount.mul(1000).isInteger()) {
    throw new FieldError(name, `'${shown}' is finer than a millicore; use e.g. '500m' or '1.5'`);
  }
  if (field['x-kind'] === 'memory' && !amount.isInteger()) {
    throw new FieldError(
      name,
      `'${shown}' is not a whole number of bytes; use e.g. '512Mi' or '4Gi'`
    );
  }
  return amount;
}

function parseEnvField(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const raw = ctx.body[name];
  if (blank(raw)) {
    return {};
  }
  let pairs: Array<[string, unknown]>;
  if (Array.isArray(raw)) {
    const merged = new Map<string, unknown>();
    for (const item of raw) {
      if (typeof item !== 'string' || !item.includes('=')) {
        throw new FieldError(name, `${pyRepr(item)} is not KEY=VALUE`);
      }
      const at = item.indexOf('=');
      merged.set(item.slice(0, at), item.slice(at + 1));
    }
    pairs = [...merged.entries()];
  } else if (typeof raw === 'object') {
    pairs = Object.entries(raw as Body);
  } else {
    throw new FieldError(name, "must be a mapping of NAME to value (or a list of 'NAME=value')");
  }
  const namePattern = new RegExp(field.propertyNames?.pattern ?? '^[A-Za-z_][A-Za-z0-9_]*$');
  const reserved = new Set(field['x-reserved-names'] ?? []);
  const prefix = field['x-reserved-prefix'] ?? null;
  const env: { [key: string]: string } = {};
  for (const [key, value] of pairs) {
    if (!namePattern.test(key)) {
      throw new FieldError(
        name,
        `${pyRepr(key)} is not a valid variable name: letters, digits and '_', not starting with a digit`
      );
    }
    if (reserved.has(key) || (prefix !== null && key.startsWith(prefix))) {
      throw new FieldError(
        name,
        `${key} is set by the launcher for each replica and cannot be overridden`
      );
    }
    if (typeof value !== 'string' && typeof value !== 'number') {
      throw new FieldError(name, `the value of ${key} must be a string or number`);
    }
    if (typeof value === 'string' && value.includes('\0')) {
      throw new FieldError(name, `the value of ${key} must not contain a NUL character`);
    }
    env[key] = String(value);
  }
  return env;
}

function parseSwitch(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const raw = given(name, field, ctx);
  if (typeof raw === 'boolean') {
    return raw;
  }
  if (
    typeof raw === 'string' &&
    ['true', 'false', '1', '0', 'yes', 'no'].includes(raw.toLowerCase())
  ) {
    return ['true', '1', 'yes'].includes(raw.toLowerCase());
  }
  throw new FieldError(name, `must be true or false, got ${pyRepr(raw)}`);
}

const DURATION_RE = /^(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$/;

/** Seconds from `600`, `90s`, `30m`, `2h`, `1h30m`, `1d`; null when blank (`rules.parse_duration`). */
export function parseDuration(
  raw: unknown,
  field = 'timeout',
  fallback: number | null = null
): number | null {
  if (blank(raw) || raw === '') {
    return null;
  }
  if (typeof raw === 'boolean') {
    throw new FieldError(field, "must be a number of seconds or a duration such as '30m' or '2h'");
  }
  const trimmed = typeof raw === 'string' ? raw.trim() : '';
  const match = DURATION_RE.exec(trimmed);
  let seconds: number;
  if (typeof raw === 'number' && Number.isInteger(raw)) {
    seconds = raw;
  } else if (trimmed && /^[0-9]+$/.test(trimmed)) {
    seconds = parseInt(trimmed, 10);
  } else if (trimmed && match) {
    const [d, h, m, s] = match.slice(1).map(part => (part ? parseInt(part, 10) : 0));
    seconds = ((d * 24 + h) * 60 + m) * 60 + s;
  } else {
    throw new FieldError(
      field,
      `'${pyStr(raw)}' is not a duration: use seconds (600) or units like '90s', '30m', '2h', '1h30m'`
    );
  }
  if (seconds <= 0) {
    const instead = fallback === null ? 'no limit' : `the default, ${fallback}s`;
    throw new FieldError(field, `must be positive (or leave it out for ${instead})`);
  }
  return seconds;
}

function parseDurationField(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const raw = ctx.body[name];
  const fallback = typeof field.default === 'number' ? field.default : null;
  const seconds = parseDuration(blank(raw) || raw === '' ? fallback : raw, name, fallback);
  const most = field['x-maximum-seconds'];
  if (seconds !== null && most !== undefined && seconds > most) {
    throw new FieldError(name, `${seconds}s is longer than this server allows (${most}s)`);
  }
  return seconds;
}

const PARSERS: {
  [kind in FieldKind]: (name: string, field: IFieldSchema, ctx: IContext) => unknown;
} = {
  name: parseName,
  command: parseCommand,
  path: parsePath,
  image: parseImage,
  choice: parseChoice,
  count: parseCount,
  cpu: parseQuantityField,
  memory: parseQuantityField,
  env: parseEnvField,
  switch: parseSwitch,
  duration: parseDurationField
};

// ---- entry points that run Paddle's own launcher (contract.py `launch_entry`)

const LAUNCH_MODULES = new Set(['paddle.distributed.launch', 'paddle.distributed.launch.main']);

/** The words of `text` as a POSIX shell splits them (Python's `shlex.split`); null when a quote
 * is left open or the text ends in a lone backslash. */
function shellWords(text: string): string[] | null {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote === "'") {
      if (c === "'") {
        quote = '';
      } else {
        word += c;
      }
    } else if (quote === '"') {
      if (c === '"') {
        quote = '';
      } else if (c === '\\' && (text[i + 1] === '"' || text[i + 1] === '\\')) {
        word += text[++i];
      } else {
        word += c;
      }
    } else if (c === '\\') {
      if (i + 1 >= text.length) {
        return null;
      }
      word += text[++i];
      inWord = true;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === ' ' || c === '\t' || c === '\r' || c === '\n') {
      if (inWord) {
        words.push(word);
        word = '';
        inWord = false;
      }
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote) {
    return null;
  }
  if (inWord) {
    words.push(word);
  }
  return words;
}

/** True when `entry` runs `python -m paddle.distributed.launch` (or `fleetrun`) as its command. */
export function launchEntry(entry: string): boolean {
  let words = shellWords(entry);
  if (words === null) {
    return false;
  }
  while (
    words.length &&
    (words[0] === 'env' || (words[0].includes('=') && !words[0].startsWith('=')))
  ) {
    words = words.slice(1);
  }
  if (!words.length) {
    return false;
  }
  const program = words[0].split('/').pop() ?? '';
  if (program === 'fleetrun') {
    return true;
  }
  if (!program.startsWith('python')) {
    return false;
  }
  let rest = words.slice(1);
  while (rest.length && rest[0].startsWith('-') && !rest[0].startsWith('-m')) {
    rest = rest.slice(1);
  }
  if (rest.length > 1 && rest[0] === '-m') {
    return LAUNCH_MODULES.has(rest[1]);
  }
  return rest.length > 0 && rest[0].startsWith('-m') && LAUNCH_MODULES.has(rest[0].slice(2));
}

// ---- cross-field rules (rules.py `RULES`), run once the fields they read parsed

type Values = { [field: string]: unknown };

/** Characters of `requirements` (rules.py `REQUIREMENTS_MAX_LENGTH`). */
const REQUIREMENTS_MAX_LENGTH = 255;
const REQUIREMENTS_ADVICE = 'give a path relative to the package directory, e.g. requirements.txt';

const RULES: {
  [rule: string]: { reads: string[]; check: (values: Values, limits: ILimits) => void };
} = {
  pservers_fit_mode: {
    reads: ['mode', 'pservers'],
    check: values => {
      if (values.mode === 'ps' && (values.pservers as number) < 1) {
        throw new FieldError('pservers', 'ps mode needs at least 1 parameter server');
      }
      if (values.mode === 'collective' && values.pservers !== 0) {
        throw new FieldError(
          'pservers',
          "collective mode has no parameter servers; set pservers to 0 or use mode 'ps'"
        );
      }
    }
  },
  gpus_per_job: {
    reads: ['trainers', 'trainer_gpu'],
    check: (values, limits) => {
      const trainers = values.trainers as number;
      const gpus = values.trainer_gpu as number;
      if (limits.max_gpu_per_job !== null && trainers * gpus > limits.max_gpu_per_job) {
        throw new FieldError(
          'trainer_gpu',
          `${trainers} trainers x ${gpus} GPU = ${trainers * gpus} GPUs; ` +
            `this server allows ${limits.max_gpu_per_job} per job`
        );
      }
    }
  },
  ranks_fit: {
    reads: ['mode', 'entry_point', 'trainer_gpu', 'procs_per_trainer'],
    check: (values, limits) => {
      const procs = values.procs_per_trainer as number;
      const gpus = values.trainer_gpu as number;
      const launch = launchEntry(values.entry_point as string);
      if (launch && values.mode === 'ps') {
        throw new FieldError(
          'entry_point',
          "paddle.distributed.launch runs collective jobs here; use mode 'collective', or run the script itself " +
            '(python train.py) in ps mode, where every replica already gets its role'
        );
      }
      if (launch && procs > 1) {
        throw new FieldError(
          'procs_per_trainer',
          'must be 1 when the entry point runs paddle.distributed.launch, which starts the ranks itself; ' +
            `set --nproc_per_node in the entry point instead of procs_per_trainer ${procs}, ` +
            'or run the script itself (python train.py) with procs_per_trainer'
        );
      }
      if (gpus && procs !== 1 && procs !== gpus) {
        throw new FieldError(
          'procs_per_trainer',
          `a trainer with GPUs runs one process per GPU (${gpus}); set procs_per_trainer to 1 or ${gpus}, ` +
            `or trainer_gpu to ${procs}`
        );
      }
      const most = limits.max_procs_per_trainer;
      if (most !== undefined && gpus > most) {
        throw new FieldError(
          'trainer_gpu',
          `${gpus} GPUs mean ${gpus} processes per trainer; this server allows ${most}`
        );
      }
    }
  },
  requirements_in_package: {
    reads: ['requirements'],
    check: values => {
      const path = values.requirements as string;
      if (!path) {
        return; // requirements.txt when the package has one
      }
      const length = [...path].length;
      if (length > REQUIREMENTS_MAX_LENGTH) {
        throw new FieldError(
          'requirements',
          `is ${length} characters long; at most ${REQUIREMENTS_MAX_LENGTH} are allowed for a path ` +
            'relative to the package directory, e.g. requirements.txt'
        );
      }
      if (path.startsWith('/')) {
        throw new FieldError(
          'requirements',
          `'${path}' is an absolute path; ${REQUIREMENTS_ADVICE}`
        );
      }
      if (path.split('/').includes('..')) {
        throw new FieldError(
          'requirements',
          `'${path}' leaves the package directory ('..'); ${REQUIREMENTS_ADVICE}`
        );
      }
    }
  }
};

/**
 * Every invalid field of a request body with its message, and the parsed value of every valid
 * one (quantities as exact fractions): what `JobSpec.check` does on the server.
 */
export function checkSpec(
  body: unknown,
  schema: IJobSchema
): { errors: FormErrors; values: Values } {
  const errors: FormErrors = {};
  const values: Values = {};
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { errors: { '': 'the job spec must be a JSON object' }, values };
  }
  const names = Object.keys(schema.properties);
  const data = body as Body;
  for (const key of Object.keys(data)
    .filter(key => !names.includes(key))
    .sort()) {
    errors[key] = `unknown field; allowed fields are: ${names.join(', ')}`;
  }
  const known: Body = {};
  for (const name of names) {
    if (!blank(data[name])) {
      known[name] = data[name];
    }
  }
  const ctx: IContext = {
    body: known,
    mode: requestedMode(known),
    limits: schema['x-limits']
  };
  for (const name of names) {
    const field = schema.properties[name];
    try {
      values[name] = PARSERS[field['x-kind']](name, field, ctx);
    } catch (error) {
      if (!(error instanceof FieldError)) {
        throw error;
      }
      errors[error.field] ??= error.message;
    }
  }
  for (const name of names) {
    const rule = RULES[schema.properties[name]['x-rule'] ?? ''];
    if (rule && rule.reads.every(read => read in values)) {
      try {
        rule.check(values, ctx.limits);
      } catch (error) {
        if (!(error instanceof FieldError)) {
          throw error;
        }
        errors[error.field] ??= error.message;
      }
    }
  }
  return { errors, values };
}

/** Every invalid field of a request body with its message (empty when the server accepts it). */
export function validateSpec(body: unknown, schema: IJobSchema): FormErrors {
  return checkSpec(body, schema).errors;
}

// ---- the form: values as typed <-> request body

/** The fields in form order. */
export function formFields(schema: IJobSchema): Array<[string, IFieldSchema]> {
  return Object.entries(schema.properties);
}

/** The field belongs to `mode` (any string the form holds: an unknown one belongs to none). */
export function inMode(field: IFieldSchema, mode: string): boolean {
  return field['x-modes'].some(each => each === mode);
}

/** A field means something in this mode on this backend (else the form hides it). */
export function isShown(field: IFieldSchema, mode: string, backend = ''): boolean {
  const backends = field['x-backends'];
  return inMode(field, mode) && (!backend || !backends || backends.includes(backend));
}

/** A default as the form's text: env mappings as `NAME=value` lines, blanks as ''. */
export function asText(value: unknown): string {
  if (blank(value)) {
    return '';
  }
  if (typeof value === 'object' && !Array.isArray(value)) {
    return Object.entries(value as Body)
      .map(([k, v]) => `${k}=${pyStr(v)}`)
      .join('\n');
  }
  return pyStr(value);
}

/** The form pre-filled with the schema's defaults (the server's defaults for this mode). */
export function defaultValues(schema: IJobSchema): FormValues {
  const values: FormValues = {};
  const mode = asText(schema.properties.mode?.default) || 'collective';
  for (const [name, field] of formFields(schema)) {
    const value = defaultFor(field, mode);
    values[name] = field['x-kind'] === 'switch' ? Boolean(value) : asText(value);
  }
  return values;
}

/**
 * The body the form's values stand for: blank text is left out (the server's default applies);
 * fields this backend does not use are left out, and so are the fields the mode hides, except
 * replica counts, which are checked as typed (`toPayload` sends them as 0).
 */
function formBody(values: FormValues, schema: IJobSchema, backend: string): Body {
  const body: Body = {};
  const mode = String(values.mode ?? '');
  const modeField = schema.properties.mode;
  const knownMode = modeField !== undefined && choices(modeField).some(([value]) => value === mode);
  for (const [name, field] of formFields(schema)) {
    const value = values[name];
    const kind = field['x-kind'];
    const backends = field['x-backends'];
    if (value === undefined || (backend && backends && !backends.includes(backend))) {
      continue;
    }
    if (kind !== 'count' && knownMode && !inMode(field, mode)) {
      continue;
    }
    if (typeof value === 'boolean') {
      body[name] = value;
    } else if (kind === 'choice') {
      body[name] = value.trim();
    } else if (kind === 'env') {
      const lines = value
        .split('\n')
        .map(line => line.trim())
        .filter(line => line !== '');
      if (lines.length) {
        body[name] = lines;
      }
    } else if (value.trim() !== '') {
      const trimmed = value.trim();
      body[name] =
        kind === 'count' && /^\+?[0-9]+$/.test(trimmed) ? parseInt(trimmed, 10) : trimmed;
    }
  }
  return body;
}

/** Every invalid field of the form with its message (empty when the form may be submitted). */
export function validateForm(values: FormValues, schema: IJobSchema, backend = ''): FormErrors {
  return validateSpec(formBody(values, schema, backend), schema);
}

/** The `POST /jobs` body: as checked, with replica counts the mode lacks sent as 0 and the env
 *  lines as a mapping. */
export function toPayload(values: FormValues, schema: IJobSchema, backend = ''): Body {
  const body = formBody(values, schema, backend);
  const mode = typeof body.mode === 'string' ? body.mode : String(values.mode ?? '');
  for (const [name, field] of formFields(schema)) {
    if (field['x-kind'] === 'count' && name in body && !inMode(field, mode)) {
      body[name] = 0;
    }
  }
  if (Array.isArray(body.env)) {
    const env: { [key: string]: string } = {};
    for (const line of body.env as string[]) {
      const at = line.indexOf('=');
      env[line.slice(0, at)] = line.slice(at + 1);
    }
    body.env = env;
  }
  return body;
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

/**
 * The totals line, as `JobSpec.summary()` writes it:
 * "2 pservers × 1 CPU + 4 trainers × 2 CPU = 10 CPU, 18Gi".  Null while a figure it needs is
 * invalid (the field's own message says why).
 */
export function totalsLine(values: FormValues, schema: IJobSchema, backend = ''): string | null {
  const { errors, values: parsed } = checkSpec(formBody(values, schema, backend), schema);
  const needed = ['pservers', 'trainers', 'trainer_cpu', 'trainer_mem', 'trainer_gpu'];
  const pservers = parsed.pservers as number | undefined;
  if (pservers) {
    needed.push('pserver_cpu', 'pserver_mem');
  }
  if (needed.some(name => name in errors || !(name in parsed))) {
    return null;
  }
  const trainers = parsed.trainers as number;
  const trainerGpu = parsed.trainer_gpu as number;
  const trainerCpu = parsed.trainer_cpu as Fraction;
  const parts: string[] = [];
  let cpu = trainerCpu.mul(trainers);
  let mem = (parsed.trainer_mem as Fraction).mul(trainers);
  if (pservers) {
    const pserverCpu = parsed.pserver_cpu as Fraction;
    parts.push(`${plural(pservers, 'pserver')} × ${formatCpu(pserverCpu)} CPU`);
    cpu = cpu.add(pserverCpu.mul(pservers));
    mem = mem.add((parsed.pserver_mem as Fraction).mul(pservers));
  }
  const gpu = trainerGpu ? ` + ${trainerGpu} GPU` : '';
  parts.push(`${plural(trainers, 'trainer')} × ${formatCpu(trainerCpu)} CPU${gpu}`);
  let total = `${formatCpu(cpu)} CPU, ${formatBytes(mem)}`;
  if (trainerGpu * trainers) {
    total += `, ${trainerGpu * trainers} GPU`;
  }
  return `${parts.join(' + ')} = ${total}`;
}
