/**
 * The `pattern` field kind (`progress_pattern`): a regular expression for a trainer's own
 * progress lines, with a named group `step` (paddle_nbext/model/progress_pattern.py `problem`,
 * with the same words).  Python's syntax is the server's: `(?P<name>...)` and leading inline
 * flags such as `(?i)` are read the JavaScript way to check it here.
 */
import { IFieldSchema } from '../../api/types';
import { blank, pyType } from './python';
import { FieldError, IContext } from './types';

const EXAMPLE = 'step (?P<step>\\d+)/(?P<total>\\d+).*loss[:=] *(?P<loss>[-+.0-9e]+)';
const UNBOUNDED = new Set(['+', '*']);

/** True when `text` at `start` begins with an unbounded repeat `{n,}`. */
function openRange(text: string, start: number): boolean {
  return /^\{[0-9]*,\}/.test(text.slice(start));
}

/** A group holding an unbounded quantifier that is itself quantified by one (`(a+)+`). */
export function nestedQuantifier(text: string): boolean {
  const stack: boolean[] = [];
  let escaped = false;
  let inClass = false;
  for (let index = 0; index < text.length; index++) {
    const char = text[index];
    if (escaped) {
      escaped = false;
    } else if (char === '\\') {
      escaped = true;
    } else if (inClass) {
      inClass = char !== ']';
    } else if (char === '[') {
      inClass = true;
    } else if (char === '(') {
      stack.push(false);
    } else if (char === ')' && stack.length) {
      const inner = stack.pop()!;
      const following = text.slice(index + 1, index + 2);
      if (
        inner &&
        (UNBOUNDED.has(following) || (following === '{' && openRange(text, index + 1)))
      ) {
        return true;
      }
      if (stack.length && inner) {
        stack[stack.length - 1] = true;
      }
    } else if ((UNBOUNDED.has(char) || (char === '{' && openRange(text, index))) && stack.length) {
      stack[stack.length - 1] = true;
    }
  }
  return false;
}

/** The group names of `text` as JavaScript compiles it; null when it does not compile. */
function groupNames(text: string): string[] | null {
  let source = text.replace(/\(\?P<(?=[A-Za-z_])/g, '(?<').replace(/\(\?P=(\w+)\)/g, '\\k<$1>');
  let flags = '';
  const inline = /^\(\?([aiLmsux]+)\)/.exec(source);
  if (inline) {
    flags = inline[1].includes('i') ? 'i' : '';
    source = source.slice(inline[0].length);
  }
  try {
    const matched = new RegExp(`(?:${source})|`, flags).exec('');
    return Object.keys(matched?.groups ?? {});
  } catch {
    return null;
  }
}

/** What is wrong with `text` as a progress pattern; null when it is fine. */
export function patternProblem(text: string): string | null {
  const length = [...text].length;
  if (length > 500) {
    return `is ${length} characters long; a progress pattern is at most 500`;
  }
  if (/[\n\r\0]/.test(text)) {
    return 'must be one line: it is matched against each printed line';
  }
  const names = groupNames(text);
  if (names === null) {
    return `is not a valid regular expression; check its brackets and escapes, e.g. '${EXAMPLE}'`;
  }
  if (!names.includes('step')) {
    return `needs a named group 'step' for the step number, e.g. '${EXAMPLE}'`;
  }
  if (nestedQuantifier(text)) {
    return "has a repeated group that repeats inside ('(\\d+)+'), which can take forever on a long line; repeat only one of them";
  }
  return null;
}

export function parsePatternField(name: string, field: IFieldSchema, ctx: IContext): unknown {
  const raw = ctx.body[name];
  if (blank(raw)) {
    return field.default ?? '';
  }
  if (typeof raw !== 'string') {
    throw new FieldError(name, `must be a string, got ${pyType(raw)}`);
  }
  const value = raw.trim();
  const wrong = value ? patternProblem(value) : null;
  if (wrong !== null) {
    throw new FieldError(name, wrong);
  }
  return value;
}
