/**
 * One parser per field kind (`x-kind`; rules.py `_PARSERS`): each reads its field of the request
 * with the facts the served job schema gives (bounds, enums, patterns, reserved names, defaults)
 * and returns the parsed value or throws the field's message.  Quantities and durations have
 * modules of their own.
 */
import { FieldKind, IFieldSchema } from '../../api/types';
import { parseDurationField } from './durations';
import { parsePatternField } from './pattern';
import { blank, pyRepr, pyStr, pyType } from './python';
import { parseQuantityField } from './quantities';
import { Body, FieldError, IContext } from './types';

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

export const PARSERS: {
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
  duration: parseDurationField,
  pattern: parsePatternField
};
