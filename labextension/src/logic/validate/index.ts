/**
 * Inline validation, request body and totals for the New job form, driven by the job schema
 * `GET /config` serves (`job_schema`, written by `paddle_nbext/model/schema.py`).
 *
 * The field list, bounds, enums, patterns, reserved env names and defaults all come from that
 * schema; what is here is one parser per field kind (`x-kind`, ./fields, ./quantities,
 * ./durations) and the named cross-field rules (`x-rule`, ./rules), with the messages of
 * `paddle_nbext/model/rules.py` (spelled as Python spells values, ./python).  ./spec checks a
 * request body as the server does, ./form turns the form's values into that body and checks the
 * whole form, ./totals writes the totals line.  The shared vectors in
 * tests/vectors/job_spec_validation.json are run against both (__tests__/vectors.test.ts), so the
 * message shown inline is the one the server would return.  The server stays authoritative: its
 * 422 `field` error is shown on that field too.
 *
 * This module is the API the rest of the panel uses; the parts above are its implementation.
 */
export { choices, defaultFor, requestedMode } from './fields';
export { parseDuration } from './durations';
export {
  asText,
  defaultValues,
  formFields,
  inMode,
  isShown,
  toPayload,
  validateForm
} from './form';
export { launchEntry } from './launch';
export { pyRepr } from './python';
export { checkSpec, validateSpec } from './spec';
export { totalsLine } from './totals';
export type { FormErrors, FormValues } from './types';
