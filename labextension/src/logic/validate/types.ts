/**
 * The shapes validation passes around: what the form holds, a request body, the parsed values,
 * the messages per field, and the error a parser or rule throws to name its field.
 */
import { ILimits } from '../../api/types';

/** What the form holds: text as typed, booleans for switches. */
export type FormValues = { [field: string]: string | boolean };
export type FormErrors = { [field: string]: string };
/** A request body (`POST /jobs`) or a part of it. */
export type Body = { [field: string]: unknown };

/** A field's message, thrown by a parser or a rule and collected per field by `checkSpec`. */
export class FieldError extends Error {
  constructor(
    readonly field: string,
    message: string
  ) {
    super(message);
  }
}

/** Parsed values by field (quantities as exact fractions). */
export type Values = { [field: string]: unknown };

/** What every field parser reads: the known fields of the request, its mode and the server's limits. */
export interface IContext {
  body: Body;
  mode: string;
  limits: ILimits;
}
