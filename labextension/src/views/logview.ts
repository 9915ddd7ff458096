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

import { lastTraceback } from '../logic/logtext';

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

  private _matches: Range[] = [];
  private _match = -1;

  constructor(
    readonly maxLines = 20000,
    readonly linesPerFrame = 2500
  ) {
    this.node = document.createElement('div');
    this.node.className = 'pn-log';
    this.node.setAttribute('data-testid', 'paddle-log');
    // A live region of its own kind: screen readers announce appended lines politely.
    this.node.setAttribute('role', 'log');
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
      this.node.setAttribute('data-written', String(this._lines + this._dropped));
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

  /** Name the log for assistive technology ("Log of trainer 1"). */
  setLabel(label: string): void {
    this.node.setAttribute('aria-label', label);
  }

  /**
   * Mark the last Python traceback and scroll it into view (a failed replica's log opens on
   * its error, not on the shutdown lines after it).  Returns false when the log has none.
   */
  highlightTraceback(): boolean {
    const span = lastTraceback(this.text());
    if (!span) {
      return false;
    }
    // Find the blocks the span covers and rebuild them as before / traceback / after.
    let offset = 0;
    let first = -1;
    let last = -1;
    let firstOffset = 0;
    for (let i = 0; i < this._chunks.length; i++) {
      const length = this._chunks[i].node.textContent?.length ?? 0;
      if (first < 0 && span.start < offset + length) {
        first = i;
        firstOffset = offset;
      }
      if (first >= 0 && span.end <= offset + length) {
        last = i;
        break;
      }
      offset += length;
    }
    if (first < 0 || last < 0) {
      return false;
    }
    const covered = this._chunks.slice(first, last + 1);
    const text = covered.map(chunk => chunk.node.textContent ?? '').join('');
    const pieces: Array<[string, string]> = [
      ['pn-log-block', text.slice(0, span.start - firstOffset)],
      [
        'pn-log-block pn-log-traceback',
        text.slice(span.start - firstOffset, span.end - firstOffset)
      ],
      ['pn-log-block', text.slice(span.end - firstOffset)]
    ];
    const fresh: IChunk[] = [];
    let mark: HTMLElement | null = null;
    for (const [className, piece] of pieces) {
      if (!piece) {
        continue;
      }
      const node = document.createElement('div');
      node.className = className;
      node.textContent = piece;
      if (className.includes('pn-log-traceback')) {
        node.setAttribute('data-testid', 'paddle-log-traceback');
        mark = node;
      }
      fresh.push({ node, lines: countLines(piece) });
    }
    covered[0].node.before(...fresh.map(chunk => chunk.node));
    covered.forEach(chunk => chunk.node.remove());
    this._chunks.splice(first, covered.length, ...fresh);
    this._stickToBottom = false;
    if (mark) {
      // Scroll the log pane only (scrollIntoView would also scroll the view above it away).
      const target = mark;
      const align = (): void => {
        this.node.scrollTop +=
          target.getBoundingClientRect().top - this.node.getBoundingClientRect().top - 4;
      };
      align();
      // Blocks above may have had estimated heights (content-visibility): aim again next frame.
      requestAnimationFrame(align);
    }
    return true;
  }

  /**
   * Highlight every match of `query` (case-insensitive) and scroll to the `step`-th next one
   * (1 forward, -1 back, 0 the first).  Returns [current (1-based, 0 for none), total].
   */
  search(query: string, step: 1 | -1 | 0): [number, number] {
    const needle = query.toLowerCase();
    if (step === 0 || !this._matches.length) {
      this._matches = needle ? this._findRanges(needle) : [];
      this._match = -1;
    }
    const total = this._matches.length;
    if (!total) {
      this._paintMatches();
      return [0, 0];
    }
    this._match = step === -1 ? (this._match - 1 + total) % total : (this._match + 1) % total;
    this._paintMatches();
    const range = this._matches[this._match];
    const target = range.startContainer.parentElement;
    if (target) {
      this._stickToBottom = false;
      const box = range.getBoundingClientRect?.();
      const view = this.node.getBoundingClientRect();
      if (box && box.height) {
        this.node.scrollTop += box.top - view.top - view.height / 3;
      } else {
        target.scrollIntoView({ block: 'center' });
      }
    }
    return [this._match + 1, total];
  }

  /** Forget the search (the highlights go). */
  clearSearch(): void {
    this._matches = [];
    this._match = -1;
    this._paintMatches();
  }

  private _findRanges(needle: string): Range[] {
    this._pre.normalize();
    const ranges: Range[] = [];
    const walker = document.createTreeWalker(this._pre, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node && ranges.length < 10000; node = walker.nextNode()) {
      const haystack = (node.textContent ?? '').toLowerCase();
      for (
        let at = haystack.indexOf(needle);
        at >= 0;
        at = haystack.indexOf(needle, at + needle.length)
      ) {
        const range = document.createRange();
        range.setStart(node, at);
        range.setEnd(node, at + needle.length);
        ranges.push(range);
      }
    }
    return ranges;
  }

  /** Paint matches with the CSS Custom Highlight API where the browser has it. */
  private _paintMatches(): void {
    const registry = (globalThis as { CSS?: { highlights?: Map<string, unknown> } }).CSS
      ?.highlights;
    const HighlightClass = (globalThis as { Highlight?: new (...ranges: Range[]) => unknown })
      .Highlight;
    if (!registry || !HighlightClass) {
      return;
    }
    registry.set('pn-search', new HighlightClass(...this._matches));
    const current = this._matches[this._match];
    registry.set('pn-search-current', current ? new HighlightClass(current) : new HighlightClass());
  }

  clear(): void {
    this._matches = [];
    this._match = -1;
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
    this.node.setAttribute('data-written', '0');
    const waiting = this._flushed;
    this._flushed = [];
    waiting.forEach(resolve => resolve());
  }

  text(): string {
    return this._pre.textContent ?? '';
  }
}
