/**
 * What a replica's log text means to a reader: which lines are Paddle's noise, and where the
 * Python traceback that failed the replica is.
 *
 * The patterns are the ones the job runner skips when it names a failure (`runtime/policy.py`:
 * glog lines, a fatal signal's report, the shutdown lines, fleet's setup chatter, warnings of
 * Paddle's own code), generated into `../generated/paddlenoise.ts`, and the rules around them (a
 * warning's source line, blank lines after noise) are `policy.noise_mask`'s: so the "hide Paddle
 * noise" toggle hides exactly what the runner skips, which tests/vectors/paddle_noise.json checks.
 */

import { NOISE_GLOG, NOISE_LINES, NOISE_WARNING } from '../generated/paddlenoise';

const GLOG = new RegExp(NOISE_GLOG);
const NOISE = new RegExp(NOISE_LINES.map(pattern => `(?:${pattern})`).join('|'));
const WARNING = new RegExp(NOISE_WARNING);
export const TRACEBACK_HEADER = 'Traceback (most recent call last):';
/** What each line of one rank carries in the log of a trainer of several (runtime/gang.py). */
const RANK_PREFIX = /^\[rank \d+\] /;

/**
 * True for a line that is Paddle's noise read on its own (glog, a fatal signal's report,
 * Paddle's setup chatter, a warning of Paddle's own code), of any rank.
 */
export function isNoiseLine(line: string): boolean {
  const text = line.replace(RANK_PREFIX, '').trim();
  return text !== '' && (GLOG.test(text) || NOISE.test(text) || WARNING.test(text));
}

/** One stream of a log (a rank's lines, or the lines without a rank prefix), as `NoiseMask` reads it. */
interface IStream {
  afterNoise: boolean;
  afterWarning: boolean;
  /** Its blank lines since its last line that said something. */
  blanks: IDecidedLine[];
}

/** A line of a log once `NoiseMask` has decided about it: `place` is its number in the log. */
export interface IDecidedLine {
  place: number;
  line: string;
  noise: boolean;
}

/**
 * Says of each line of a log, read one after the other, whether it is Paddle's noise: what
 * `isNoiseLine` says, the indented source line Python prints after a warning of Paddle's own,
 * and blank lines next to noise (a run of them right after or right before a noise line); each
 * rank's lines are a stream of their own (`policy.noise_mask`).  A blank line is decided by
 * the next line of its stream, so it is held back until that line (or `end()`) comes.
 */
export class NoiseMask {
  private _streams = new Map<string, IStream>();
  private _count = 0;

  /** Lines read so far (the place the next line gets). */
  get read(): number {
    return this._count;
  }

  /** Feeds the log's next line (without its newline); returns the lines it decides. */
  push(line: string): IDecidedLine[] {
    const prefix = RANK_PREFIX.exec(line)?.[0] ?? '';
    const body = line.slice(prefix.length);
    const text = body.trim();
    let stream = this._streams.get(prefix);
    if (!stream) {
      stream = { afterNoise: false, afterWarning: false, blanks: [] };
      this._streams.set(prefix, stream);
    }
    const place = this._count++;
    if (text === '') {
      stream.afterWarning = false;
      if (stream.afterNoise) {
        return [{ place, line, noise: true }];
      }
      stream.blanks.push({ place, line, noise: false });
      return [];
    }
    const noise = (stream.afterWarning && /^[ \t]/.test(body)) || isNoiseLine(text);
    const decided = stream.blanks.map(blank => ({ ...blank, noise }));
    stream.blanks = [];
    stream.afterWarning = noise && WARNING.test(text);
    stream.afterNoise = noise;
    decided.push({ place, line, noise });
    return decided;
  }

  /** The log ended: the blank lines still held back (none follows noise, so none is). */
  end(): IDecidedLine[] {
    const held = [...this._streams.values()].flatMap(stream => stream.blanks);
    this._streams.clear();
    return held.sort((a, b) => a.place - b.place);
  }
}

/** Which of `lines` are noise, as `NoiseMask` reads them one after the other. */
export function noiseMask(lines: readonly string[]): boolean[] {
  const mask = new NoiseMask();
  const noise: boolean[] = [];
  for (const decided of [...lines.flatMap(line => mask.push(line)), ...mask.end()]) {
    noise[decided.place] = decided.noise;
  }
  return noise;
}

/**
 * Drops noise lines from a stream of text chunks.  A chunk may end mid-line, so the partial
 * last line is held back until its newline (or `end()`) arrives, and so are blank lines until
 * the line after them says whether they go with noise.
 */
export class NoiseFilter {
  private _partial = '';
  private _hidden = 0;
  private _mask = new NoiseMask();

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
    const lines = text.slice(0, cut).split('\n');
    lines.pop(); // what follows the last newline: nothing
    return this._show(
      lines.flatMap(line => this._mask.push(line.replace(/\r$/, ''))),
      -1
    );
  }

  /** Whatever was held back once the stream ended. */
  end(): string {
    if (!this.enabled) {
      return '';
    }
    const rest = this._partial;
    this._partial = '';
    // The partial line had no newline of its own.
    const bare = rest ? this._mask.read : -1;
    const last = rest ? this._mask.push(rest.replace(/\r$/, '')) : [];
    return this._show(
      [...last, ...this._mask.end()].sort((a, b) => a.place - b.place),
      bare
    );
  }

  /** The text of the lines that are not noise, each with its newline but the one at `bare`. */
  private _show(decided: IDecidedLine[], bare: number): string {
    let text = '';
    for (const { place, line, noise } of decided) {
      if (noise) {
        this._hidden++;
      } else {
        text += place === bare ? line : `${line}\n`;
      }
    }
    return text;
  }
}

/** Character offsets of the last traceback: its header line through the exception line. */
export interface ITextSpan {
  start: number;
  end: number;
}

/**
 * The last Python traceback in `text`, from `Traceback (most recent call last):` to the end of
 * the exception line (the first unindented line after it that is not Paddle's noise), or
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
    if (line.trim() && !/^[ \t]/.test(line) && !isNoiseLine(line)) {
      return { start, end: next < 0 ? text.length : next };
    }
    if (next < 0) {
      break;
    }
    cursor = next;
  }
  return { start, end: text.length };
}
