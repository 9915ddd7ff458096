import { describe, expect, it } from 'vitest';

import { IServerSentEvent, SseParser, backoffDelay } from '../api/sse';

describe('event-stream parser', () => {
  it('splits events across arbitrary chunk boundaries and skips pings', () => {
    const parser = new SseParser();
    const text =
      ': ping\n\nevent: snapshot\ndata: {"jobs": []}\n\nevent: job\ndata: {"name": "a"}\n\n: ping\n\nevent: deleted\ndata: {"name":"a"}\n\n';
    const events: IServerSentEvent[] = [];
    for (let i = 0; i < text.length; i += 3) {
      events.push(...parser.feed(text.slice(i, i + 3)));
    }
    expect(events.map(e => [e.event, JSON.parse(e.data) as unknown])).toEqual([
      ['snapshot', { jobs: [] }],
      ['job', { name: 'a' }],
      ['deleted', { name: 'a' }]
    ]);
  });

  it('handles CRLF, multi-line data and events without a name', () => {
    const parser = new SseParser();
    const events = parser.feed('event: resync\r\ndata: {}\r\n\r\ndata: a\r');
    expect(events).toEqual([{ event: 'resync', data: '{}', id: null }]);
    expect(parser.feed('\ndata: b\n\n')).toEqual([{ event: 'message', data: 'a\nb', id: null }]);
  });

  it('backs off exponentially up to a cap', () => {
    expect([0, 1, 2, 3, 10].map(n => backoffDelay(n))).toEqual([1000, 2000, 4000, 8000, 30000]);
  });
});
