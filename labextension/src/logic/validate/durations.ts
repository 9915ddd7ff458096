/**
 * The `duration` field kind: seconds or `1h30m`-style units, positive, within this server's
 * bound (rules.py `parse_duration`, `_duration`).
 */
import { IFieldSchema } from '../../api/types';
import { blank, pyStr } from './python';
import { FieldError, IContext } from './types';

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

export function parseDurationField(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const raw = ctx.body[name];
  const fallback = typeof field.default === 'number' ? field.default : null;
  const seconds = parseDuration(blank(raw) || raw === '' ? fallback : raw, name, fallback);
  const most = field['x-maximum-seconds'];
  if (seconds !== null && most !== undefined && seconds > most) {
    throw new FieldError(name, `${seconds}s is longer than this server allows (${most}s)`);
  }
  return seconds;
}
