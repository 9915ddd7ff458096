/**
 * A request body checked as `JobSpec.check` checks it on the server: unknown fields, every field
 * by its kind's parser, then the cross-field rules; every invalid field with its message.
 */
import { IJobSchema } from '../../api/types';
import { PARSERS, requestedMode } from './fields';
import { blank } from './python';
import { RULES } from './rules';
import { Body, FieldError, FormErrors, IContext, Values } from './types';

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
