import { describe, expect, it } from 'vitest';
import { negotiateStreamFormat } from '../../src/domain/stream/stream-format.js';
import { requestedCursors } from '../../src/services/consumption/stream/low-level-streams.js';
import { BrokerError } from '../../src/errors/catalog.js';

describe('negotiateStreamFormat', () => {
  it.each([
    [undefined, 'json-stream'],
    ['', 'json-stream'],
    ['*/*', 'json-stream'],
    ['application/json', 'json-stream'],
    ['application/x-json-stream', 'json-stream'],
    ['text/event-stream', 'event-stream'],
    ['Text/Event-Stream', 'event-stream'],
    ['text/event-stream, */*', 'event-stream'],
    ['text/event-stream;q=0', 'json-stream'],
    ['text/event-stream;q=0.5, application/x-json-stream', 'json-stream'],
    ['application/x-json-stream;q=0.5, text/event-stream', 'event-stream'],
    ['text/event-stream, application/x-json-stream', 'event-stream'],
    ['text/event-stream;q=bogus', 'json-stream'],
  ])('Accept %j → %s', (header, expected) => {
    expect(negotiateStreamFormat(header)).toBe(expected);
  });
});

describe('requestedCursors (low-level stream)', () => {
  const a = '[{"partition":"0","offset":"001-0001-000000000000000003"}]';
  const b = '[{"partition":"0","offset":"001-0001-000000000000000007"}]';
  // The query as the pipeline checked it (the route's `LowLevelStreamQuery`): its `cursors` text.
  const query = (cursors?: string): { cursors?: string } => (cursors === undefined ? {} : { cursors });
  const status = (f: () => unknown): number | undefined => {
    try {
      f();
    } catch (err) {
      return err instanceof BrokerError ? err.status : -1;
    }
    return undefined;
  };

  it('takes X-Broker-Cursors, else Last-Event-ID, else the cursors parameter; none = undefined', () => {
    expect(requestedCursors({}, query())).toBeUndefined();
    expect(requestedCursors({ lastEventId: '' }, query())).toBeUndefined();
    expect(requestedCursors({ cursors: a, lastEventId: b }, query())).toEqual([{ partition: '0', offset: '001-0001-000000000000000003' }]);
    expect(requestedCursors({ lastEventId: b }, query(a))).toEqual([{ partition: '0', offset: '001-0001-000000000000000007' }]);
    expect(requestedCursors({}, query(a))).toEqual([{ partition: '0', offset: '001-0001-000000000000000003' }]);
  });

  it('is 400 for malformed cursors from any source, and for the header and the parameter together', () => {
    expect(status(() => requestedCursors({ cursors: a }, query(b)))).toBe(400);
    expect(status(() => requestedCursors({ lastEventId: 'not json' }, query()))).toBe(400);
    expect(status(() => requestedCursors({}, query('[]')))).toBe(400);
    expect(status(() => requestedCursors({}, query('[{"partition":0}]')))).toBe(400);
  });
});
