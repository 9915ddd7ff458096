/**
 * What a replica's log text means to a reader: which lines are Paddle's noise, and where the
 * Python traceback that failed the replica is.
 *
 * The patterns are the ones the job runner uses to find a failure's reason
 * (`runtime/policy.py`: glog lines, the fatal-signal frame, the shutdown chatter), so the
 * "hide Paddle noise" toggle hides exactly what the runner skips when it names the error.
 */

const GLOG = /^[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+\S+:\d+\]/;
const NOISE =
  /^(?:[-=*]{5,}|\[TimeInfo: |\[SignalInfo: |C\+\+ Traceback|Error Message Summary|\d+\s+\S+.*\(\)$|No stack trace in paddle|FatalError: `Termination signal`|INFO \d{4}-\d{2}-\d{2} |WARNING: Logging before)/;
export const TRACEBACK_HEADER = 'Traceback (most recent call last):';
/** What each line of one rank carries in the log of a trainer of several (runtime/gang.py). */
const RANK_PREFIX = /^\[rank \d+\] /;

/** True for a line of Paddle's own logging (glog, signal frames, shutdown lines), of any rank. */
export function isNoiseLine(line: string): boolean {
  const text = line.replace(RANK_PREFIX, '').trim();
  return text !== '' && (GLOG.test(text) || NOISE.test(text));
}

/**
 * Drops noise lines from a stream of text chunks.  A chunk may end mid-line, so the partial
 * last line is held back until its newline (or `end()`) arrives.
 */
export class NoiseFilter {
  private _partial = '';
  private _hidden = 0;

  constructor(readonly enabled: boolean) {}

  /** Lines hidden so far. */
  get hidden(): number {
    return this._hidden;
  }

  /** The text of `chunk` worth showing (complete lines only while filtering). */
  feed(chunk: string): string {
    if (!this.enabled) {
      return chunk;
    }
    const text = this._partial + chunk;
    const cut = text.lastIndexOf('\n') + 1;
    this._partial = text.slice(cut);
    return this._keep(text.slice(0, cut));
  }

  /** Whatever was held back once the stream ended. */
  end(): string {
    const rest = this._partial;
    this._partial = '';
    return this.enabled ? this._keep(rest) : '';
  }

  private _keep(text: string): string {
    if (!text) {
      return '';
    }
    const lines = text.split('\n');
    const kept: string[] = [];
    for (let i = 0; i < lines.length; i++) {
      const last = i === lines.length - 1;
      if (last && lines[i] === '') {
        break;
      }
      if (isNoiseLine(lines[i])) {
        this._hidden++;
      } else {
        kept.push(last ? lines[i] : `${lines[i]}\n`);
      }
    }
    return kept.join('');
  }
}

/** Character offsets of the last traceback: its header line through the exception line. */
export interface ITextSpan {
  start: number;
  end: number;
}

/**
 * The last Python traceback in `text`, from `Traceback (most recent call last):` to the end of
 * the exception line (the first unindented line after it that is not Paddle's logging), or
 * null when the log has none.
 */
export function lastTraceback(text: string): ITextSpan | null {
  let start = -1;
  for (
    let at = text.indexOf(TRACEBACK_HEADER);
    at >= 0;
    at = text.indexOf(TRACEBACK_HEADER, at + 1)
  ) {
    const lineStart = text.lastIndexOf('\n', at) + 1;
    // Only a line that is the header (maybe indented, maybe a rank's), not "C++ Traceback…".
    if (text.slice(lineStart, at).replace(RANK_PREFIX, '').trim() === '') {
      start = lineStart;
    }
  }
  if (start < 0) {
    return null;
  }
  let cursor = text.indexOf('\n', start);
  while (cursor >= 0 && cursor < text.length) {
    const next = text.indexOf('\n', cursor + 1);
    const line = text.slice(cursor + 1, next < 0 ? text.length : next).replace(RANK_PREFIX, '');
    if (line.trim() && !/^[ \t]/.test(line) && !GLOG.test(line.trim())) {
      return { start, end: next < 0 ? text.length : next };
    }
    if (next < 0) {
      break;
    }
    cursor = next;
  }
  return { start, end: text.length };
}
