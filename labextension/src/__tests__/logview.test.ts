// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';

import { LogView } from '../views/logview';

function lines(from: number, count: number): string {
  let text = '';
  for (let i = from; i < from + count; i++) {
    text += `step ${i} loss ${1 / (i + 1)}\n`;
  }
  return text;
}

describe('log viewer', () => {
  it('batches appends and writes them on the next frame', async () => {
    const view = new LogView();
    for (let i = 0; i < 100; i++) {
      view.append(lines(i, 1));
    }
    expect(view.lineCount).toBe(0);
    await view.whenFlushed();
    expect(view.lineCount).toBe(100);
    expect(view.text()).toBe(lines(0, 100));
    expect(view.node.getAttribute('data-lines')).toBe('100');
    // 100 small appends end up in a handful of blocks, not 100 nodes.
    expect(view.node.querySelectorAll('.pn-log-block').length).toBeLessThanOrEqual(2);
  });

  it('spreads a large append over several frames, in order', async () => {
    const view = new LogView(20000, 2500);
    view.append(lines(0, 10000));
    await view.whenFlushed();
    expect(view.lineCount).toBe(10000);
    expect(view.text()).toBe(lines(0, 10000));
    expect(view.node.querySelectorAll('.pn-log-block').length).toBe(20);
  });

  it('keeps at most maxLines in the DOM and says how many were dropped', async () => {
    const view = new LogView(1000, 2500);
    view.append(lines(0, 3000));
    await view.whenFlushed();
    expect(view.lineCount).toBeLessThanOrEqual(1000);
    expect(view.text().endsWith(lines(2999, 1))).toBe(true);
    const note = view.node.querySelector('.pn-log-trimmed') as HTMLElement;
    expect(note.hidden).toBe(false);
    expect(note.textContent).toBe(
      `${3000 - view.lineCount} earlier lines not shown (the full log is on the server).`
    );
  });

  it('clear empties the pane and the pending text', async () => {
    const view = new LogView();
    view.append('a\n');
    view.clear();
    await view.whenFlushed();
    expect(view.text()).toBe('');
    expect(view.lineCount).toBe(0);
  });
});
