/**
 * The form's values as typed and the request body they stand for: the defaults the form opens
 * with, which fields it shows for a mode and backend, the whole form's check and the body
 * `POST /jobs` gets.
 */
import { IFieldSchema, IJobSchema } from '../../api/types';
import { choices, defaultFor } from './fields';
import { blank, pyStr } from './python';
import { validateSpec } from './spec';
import { Body, FormErrors, FormValues } from './types';

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
export function formBody(values: FormValues, schema: IJobSchema, backend: string): Body {
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
