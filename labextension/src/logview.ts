/**
 * A log pane that stays smooth on long logs.
 *
 * Text is buffered and written once per animation frame, at most `linesPerFrame` lines per
 * frame, in blocks of at most `LINES_PER_BLOCK` lines.  Each block is its own element with
 * `content-visibility: auto`, so appending lays out only the new block (not the whole log) and
 * blocks out of view cost nothing: 10,000 appended lines cost a few short frames, not one long
 * freeze.  The DOM keeps at most `maxLines` lines (oldest blocks are dropped, with a note
 * saying so), and the view scrolls to the end only while the reader is already at the end
 * (follow with auto-scroll that never fights someone reading above).
 */

interface IChunk {
  node: HTMLElement;
  lines: number;
}

const LINES_PER_BLOCK = 500;

/** Index just past the `count`-th newline of `text` from `from`, or -1 if there are fewer. */
function afterLines(text: string, from: number, count: number): number {
  let at = from - 1;
  for (let i = 0; i < count; i++) {
    at = text.indexOf('\n', at + 1);
    if (at < 0) {
      return -1;
    }
  }
  return at + 1;
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
  private readonly _pre: HTMLElement;
  private readonly _trimmed: HTMLElement;
  private _pending: string[] = [];
  private _frame = 0;
  private _chunks: IChunk[] = [];
  private _lines = 0;
  private _dropped = 0;
  private _stickToBottom = true;
  private _ownScroll = false;
  private _scrollFrame = 0;
  private _flushed: Array<() => void> = [];

  constructor(
    readonly maxLines = 20000,
    readonly linesPerFrame = 2500
  ) {
    this.node = document.createElement('div');
    this.node.className = 'pn-log';
    this.node.setAttribute('data-testid', 'paddle-log');
    this.node.tabIndex = 0;
    this._trimmed = document.createElement('div');
    this._trimmed.className = 'pn-log-trimmed';
    this._trimmed.hidden = true;
    this._pre = document.createElement('div');
    this._pre.className = 'pn-log-lines';
    this.node.appendChild(this._trimmed);
    this.node.appendChild(this._pre);
    this.node.addEventListener('scroll', () => {
      if (this._ownScroll) {
        this._ownScroll = false;
        return;
      }
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
      let text = this._pending.join('');
      // Leave what exceeds this frame's budget for the next frame.
      const cut = afterLines(text, 0, this.linesPerFrame);
      if (cut > 0 && cut < text.length) {
        this._pending = [text.slice(cut)];
        text = text.slice(0, cut);
        this._frame = requestAnimationFrame(() => this.flush());
      } else {
        this._pending = [];
      }
      const fragment = document.createDocumentFragment();
      for (let start = 0; start < text.length;) {
        const end = afterLines(text, start, LINES_PER_BLOCK);
        const piece = end < 0 ? text.slice(start) : text.slice(start, end);
        start = end < 0 ? text.length : end;
        this._appendBlock(piece, fragment);
      }
      this._pre.appendChild(fragment);
      this._trim();
      this.node.setAttribute('data-lines', String(this._lines));
      this._scrollToEnd();
      if (this._pending.length) {
        return; // the waiters are told once everything is written
      }
    }
    const waiting = this._flushed;
    this._flushed = [];
    waiting.forEach(resolve => resolve());
  }

  /**
   * Keep the end in view while the reader is at the end.  Blocks out of view have estimated
   * heights until rendered, so the end is aimed at again on the next frame; scroll events
   * caused by this are not mistaken for the reader scrolling up.
   */
  private _scrollToEnd(): void {
    if (!this._stickToBottom) {
      return;
    }
    const jump = (): void => {
      if (this.node.scrollTop + this.node.clientHeight < this.node.scrollHeight - 1) {
        this._ownScroll = true;
        this.node.scrollTop = this.node.scrollHeight;
      }
    };
    jump();
    cancelAnimationFrame(this._scrollFrame);
    this._scrollFrame = requestAnimationFrame(() => {
      this._scrollFrame = 0;
      if (this._stickToBottom) {
        jump();
      }
    });
  }

  /** Add text to the last block while it has room (so small appends do not make a block each). */
  private _appendBlock(piece: string, fragment: DocumentFragment): void {
    const lines = countLines(piece);
    const last = this._chunks[this._chunks.length - 1];
    if (last && last.node.parentNode === this._pre && last.lines + lines <= LINES_PER_BLOCK / 5) {
      last.node.appendChild(document.createTextNode(piece));
      last.lines += lines;
    } else {
      const node = document.createElement('div');
      node.className = 'pn-log-block';
      node.textContent = piece;
      fragment.appendChild(node);
      this._chunks.push({ node, lines });
    }
    this._lines += lines;
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
