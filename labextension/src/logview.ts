/**
 * A log pane that stays smooth on long logs.
 *
 * Text is buffered and written once per animation frame as a single text node, so 10,000
 * appended lines cost a handful of layouts, not 10,000.  The DOM keeps at most `maxLines`
 * lines (oldest chunks are dropped, with a note saying so), and the view scrolls to the end
 * only while the reader is already at the end (follow with auto-scroll that never fights
 * someone reading above).
 */

interface IChunk {
  node: Text;
  lines: number;
}

function countLines(text: string): number {
  let count = 0;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) {
    count++;
  }
  return count;
}

export class LogView {
  readonly node: HTMLElement;
  private readonly _pre: HTMLPreElement;
  private readonly _trimmed: HTMLElement;
  private _pending: string[] = [];
  private _frame = 0;
  private _chunks: IChunk[] = [];
  private _lines = 0;
  private _dropped = 0;
  private _stickToBottom = true;
  private _flushed: Array<() => void> = [];

  constructor(readonly maxLines = 20000) {
    this.node = document.createElement('div');
    this.node.className = 'pn-log';
    this.node.setAttribute('data-testid', 'paddle-log');
    this.node.tabIndex = 0;
    this._trimmed = document.createElement('div');
    this._trimmed.className = 'pn-log-trimmed';
    this._trimmed.hidden = true;
    this._pre = document.createElement('pre');
    this.node.appendChild(this._trimmed);
    this.node.appendChild(this._pre);
    this.node.addEventListener('scroll', () => {
      const el = this.node;
      this._stickToBottom = el.scrollTop + el.clientHeight >= el.scrollHeight - 8;
    });
  }

  /** Lines currently in the DOM (for tests and the status line). */
  get lineCount(): number {
    return this._lines;
  }

  /** Queue text; it is written on the next animation frame. */
  append(text: string): void {
    if (!text) {
      return;
    }
    this._pending.push(text);
    if (!this._frame) {
      this._frame = requestAnimationFrame(() => this.flush());
    }
  }

  /** Resolves once everything appended so far is in the DOM. */
  whenFlushed(): Promise<void> {
    if (!this._pending.length) {
      return Promise.resolve();
    }
    return new Promise(resolve => this._flushed.push(resolve));
  }

  /** Write pending text now (called per animation frame). */
  flush(): void {
    if (this._frame) {
      cancelAnimationFrame(this._frame);
      this._frame = 0;
    }
    if (this._pending.length) {
      const text = this._pending.join('');
      this._pending = [];
      const node = document.createTextNode(text);
      const lines = countLines(text);
      this._pre.appendChild(node);
      this._chunks.push({ node, lines });
      this._lines += lines;
      this._trim();
      this.node.setAttribute('data-lines', String(this._lines));
      if (this._stickToBottom) {
        this.node.scrollTop = this.node.scrollHeight;
      }
    }
    const waiting = this._flushed;
    this._flushed = [];
    waiting.forEach(resolve => resolve());
  }

  private _trim(): void {
    while (this._lines > this.maxLines && this._chunks.length > 1) {
      const oldest = this._chunks.shift()!;
      oldest.node.remove();
      this._lines -= oldest.lines;
      this._dropped += oldest.lines;
    }
    if (this._dropped) {
      this._trimmed.hidden = false;
      this._trimmed.textContent = `${this._dropped} earlier lines not shown (the full log is on the server).`;
    }
  }

  clear(): void {
    this._pending = [];
    if (this._frame) {
      cancelAnimationFrame(this._frame);
      this._frame = 0;
    }
    this._chunks = [];
    this._lines = 0;
    this._dropped = 0;
    this._trimmed.hidden = true;
    this._pre.textContent = '';
    this._stickToBottom = true;
    this.node.setAttribute('data-lines', '0');
    const waiting = this._flushed;
    this._flushed = [];
    waiting.forEach(resolve => resolve());
  }

  text(): string {
    return this._pre.textContent ?? '';
  }
}
