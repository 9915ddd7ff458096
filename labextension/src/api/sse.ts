/**
 * An incremental `text/event-stream` parser.  The panel reads `/events` with `fetch` and a
 * streaming reader (so the Jupyter token and XSRF header go with it), which means it has to
 * split the stream into events itself.
 */

export interface IServerSentEvent {
  event: string;
  data: string;
  id: string | null;
}

export class SseParser {
  private _buffer = '';
  private _event = '';
  private _data: string[] = [];
  private _id: string | null = null;

  /** Feed decoded text; returns the events completed by it (comments are skipped). */
  feed(chunk: string): IServerSentEvent[] {
    this._buffer += chunk;
    const out: IServerSentEvent[] = [];
    let start = 0;
    for (;;) {
      const newline = this._nextLineEnd(start);
      if (newline < 0) {
        break;
      }
      let line = this._buffer.slice(start, newline);
      let next = newline + 1;
      if (this._buffer[newline] === '\r' && this._buffer[newline + 1] === '\n') {
        next = newline + 2;
      } else if (this._buffer[newline] === '\r' && newline + 1 === this._buffer.length) {
        // A lone CR at the end may be the first half of CRLF: wait for more text.
        break;
      }
      start = next;
      if (line.endsWith('\r')) {
        line = line.slice(0, -1);
      }
      this._line(line, out);
    }
    this._buffer = this._buffer.slice(start);
    return out;
  }

  private _nextLineEnd(from: number): number {
    for (let i = from; i < this._buffer.length; i++) {
      const c = this._buffer[i];
      if (c === '\n' || c === '\r') {
        return i;
      }
    }
    return -1;
  }

  private _line(line: string, out: IServerSentEvent[]): void {
    if (line === '') {
      if (this._data.length) {
        out.push({ event: this._event || 'message', data: this._data.join('\n'), id: this._id });
      }
      this._event = '';
      this._data = [];
      return;
    }
    if (line.startsWith(':')) {
      return;
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) {
      value = value.slice(1);
    }
    if (field === 'event') {
      this._event = value;
    } else if (field === 'data') {
      this._data.push(value);
    } else if (field === 'id') {
      this._id = value;
    }
  }
}

/** Reconnect delay: 1 s, 2 s, 4 s, ... capped at `max` seconds. */
export function backoffDelay(attempt: number, max = 30): number {
  return Math.min(max, 2 ** Math.max(0, attempt)) * 1000;
}
