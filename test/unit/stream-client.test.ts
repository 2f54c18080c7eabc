import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { compress as zstdCompress } from 'zstd-napi';
import {
  CursorCommitter,
  LineSplitter,
  StreamBrokenError,
  StreamFormatError,
  StreamRefusedError,
  commitPath,
  openStream,
  parseBatch,
  readBatches,
  streamPath,
  type CommitAnswer,
  type StreamBatch,
  type StreamCursor,
} from '../../src/client/stream-client.js';

const enc = (text: string): Buffer => Buffer.from(text, 'utf8');

/** A body delivered as the given chunks, one per read (each after a turn of the event loop, as from a socket). */
async function* chunks(...parts: Uint8Array[]): AsyncGenerator<Uint8Array> {
  for (const part of parts) {
    await new Promise((resolve) => setImmediate(resolve));
    yield part;
  }
}

async function collect(body: AsyncIterable<Uint8Array>): Promise<StreamBatch[]> {
  const out: StreamBatch[] = [];
  for await (const batch of readBatches(body)) out.push(batch);
  return out;
}

const KEEP_ALIVE = '{"cursor":{"partition":"0","offset":"001-0001-000000000000000004"}}';
const WITH_EVENTS = '{"cursor":{"partition":"0","offset":"001-0001-000000000000000005"},"events":[{"name":"Zoë ☃ 🎉"}],"info":{"debug":"x"}}';

describe('LineSplitter', () => {
  it('hands out each line once it is complete, whatever the chunk boundaries', () => {
    const text = `${KEEP_ALIVE}\n${WITH_EVENTS}\n`;
    const bytes = enc(text);
    for (let cut = 1; cut < bytes.byteLength; cut++) {
      const splitter = new LineSplitter();
      const lines: string[] = [];
      splitter.push(bytes.subarray(0, cut), (l) => lines.push(l.toString('utf8')));
      splitter.push(bytes.subarray(cut), (l) => lines.push(l.toString('utf8')));
      splitter.end((l) => lines.push(l.toString('utf8')));
      expect(lines, `cut at byte ${cut}`).toEqual([KEEP_ALIVE, WITH_EVENTS]);
    }
  });

  it('skips empty lines and keeps what follows the last newline until the end', () => {
    const splitter = new LineSplitter();
    const lines: string[] = [];
    splitter.push(enc('\n\na\n\nb'), (l) => lines.push(l.toString()));
    expect(lines).toEqual(['a']);
    expect(splitter.pendingBytes).toBe(1);
    splitter.end((l) => lines.push(l.toString()));
    expect(lines).toEqual(['a', 'b']);
    expect(splitter.pendingBytes).toBe(0);
  });
});

describe('readBatches', () => {
  it('parses a line split mid-way across chunks', async () => {
    const line = enc(`${WITH_EVENTS}\n`);
    const batches = await collect(chunks(line.subarray(0, 10), line.subarray(10, 40), line.subarray(40)));
    expect(batches).toEqual([JSON.parse(WITH_EVENTS)]);
  });

  it('keeps multi-byte characters whole when a chunk ends inside one', async () => {
    const line = enc(`${WITH_EVENTS}\n`);
    // Cut inside each of the 2-, 3- and 4-byte sequences.
    for (const char of ['ë', '☃', '🎉']) {
      const at = line.indexOf(enc(char)) + 1;
      const [batch] = await collect(chunks(line.subarray(0, at), line.subarray(at)));
      expect(batch?.events, char).toEqual([{ name: 'Zoë ☃ 🎉' }]);
    }
    // One byte per read.
    const bytewise = await collect(chunks(...Array.from(line, (b) => Buffer.from([b]))));
    expect(bytewise[0]?.events).toEqual([{ name: 'Zoë ☃ 🎉' }]);
  });

  it('yields keep-alive batches (no events) like the others, in order', async () => {
    const batches = await collect(chunks(enc(`${KEEP_ALIVE}\n${KEEP_ALIVE}\n${WITH_EVENTS}\n`)));
    expect(batches.map((b) => b.events?.length)).toEqual([undefined, undefined, 1]);
    expect(batches[0]?.cursor).toEqual({ partition: '0', offset: '001-0001-000000000000000004' });
  });

  it('parses a last batch without a newline once the body ended', async () => {
    const batches = await collect(chunks(enc(`${KEEP_ALIVE}\n`), enc(WITH_EVENTS)));
    expect(batches).toHaveLength(2);
    expect(batches[1]?.info).toEqual({ debug: 'x' });
  });

  it('reads Uint8Array chunks (a fetch body) as well as Buffers', async () => {
    const bytes = enc(`${KEEP_ALIVE}\n`);
    const plain = new Uint8Array(bytes.byteLength);
    plain.set(bytes);
    const batches = await collect(chunks(plain.subarray(0, 5), plain.subarray(5)));
    expect(batches).toHaveLength(1);
  });

  it('throws StreamFormatError for a line that is not JSON or has no cursor', async () => {
    await expect(collect(chunks(enc('{"cursor":\n')))).rejects.toBeInstanceOf(StreamFormatError);
    await expect(collect(chunks(enc('{"events":[]}\n')))).rejects.toThrow(/without a cursor/);
  });
});

describe('parseBatch with events as text', () => {
  it('parses the cursor and info and leaves the events unparsed', () => {
    const batch = parseBatch(enc(WITH_EVENTS), 'text');
    expect(batch.cursor.offset).toBe('001-0001-000000000000000005');
    expect(batch.events).toBeUndefined();
    expect(batch.eventsText).toBe('{"name":"Zoë ☃ 🎉"}');
    expect(batch.info).toEqual({ debug: 'x' });
    expect(parseBatch(enc(KEEP_ALIVE), 'text')).toEqual(JSON.parse(KEEP_ALIVE));
  });
});

describe('streamPath and commitPath', () => {
  it('encode the name or id and keep the parameters given', () => {
    expect(streamPath({ eventType: 'a/b' }, { batch_limit: 5, stream_limit: undefined, batch_flush_timeout: 1 })).toBe('/event-types/a%2Fb/events?batch_limit=5&batch_flush_timeout=1');
    expect(streamPath({ subscription: 'id' })).toBe('/subscriptions/id/events');
    expect(commitPath('s 1')).toBe('/subscriptions/s%201/cursors');
  });
});

describe('openStream', () => {
  const servers: http.Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  });

  /** A server answering every request with `handler`; resolves with its base URL. */
  async function serve(handler: http.RequestListener): Promise<string> {
    const server = http.createServer(handler);
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it('reads the stream id header and the batches as written, and sends the request as given', async () => {
    let seen: http.IncomingHttpHeaders = {};
    const base = await serve((req, res) => {
      seen = req.headers;
      res.writeHead(200, { 'content-type': 'application/x-json-stream', 'x-broker-streamid': 'sid-1' });
      res.write(`${KEEP_ALIVE}\n${WITH_EVENTS.slice(0, 30)}`);
      setImmediate(() => res.end(`${WITH_EVENTS.slice(30)}\n`));
    });
    const stream = await openStream(`${base}${streamPath({ subscription: 'x' }, { batch_limit: 1 })}`, { headers: { 'X-Extra': '1' } });
    expect(stream.streamId).toBe('sid-1');
    expect(stream.contentEncoding).toBeUndefined();
    const batches: StreamBatch[] = [];
    for await (const batch of stream) batches.push(batch);
    expect(batches.map((b) => b.events?.length)).toEqual([undefined, 1]);
    expect(stream.lastDebug).toBe('x');
    expect(stream.complete).toBe(true);
    expect(stream.bytes).toBe(Buffer.byteLength(`${KEEP_ALIVE}\n${WITH_EVENTS}\n`));
    expect(stream.wireBytes).toBeGreaterThan(stream.bytes);
    expect(seen['accept-encoding']).toBe('identity');
    expect(seen['x-extra']).toBe('1');
  });

  for (const coding of ['gzip', 'zstd'] as const) {
    it(`decodes a ${coding} body as it arrives and reports the compressed bytes`, async () => {
      const text = `${KEEP_ALIVE}\n${WITH_EVENTS}\n`;
      const body = coding === 'gzip' ? zlib.gzipSync(text) : zstdCompress(Buffer.from(text));
      const base = await serve((_req, res) => {
        res.writeHead(200, { 'content-encoding': coding });
        res.write(body.subarray(0, 7));
        setImmediate(() => res.end(body.subarray(7)));
      });
      const raw: Buffer[] = [];
      const stream = await openStream(base, { headers: { 'accept-encoding': coding }, onBodyChunk: (c) => raw.push(c) });
      const batches: StreamBatch[] = [];
      for await (const batch of stream) batches.push(batch);
      expect(batches).toEqual([JSON.parse(KEEP_ALIVE), JSON.parse(WITH_EVENTS)]);
      expect(stream.contentEncoding).toBe(coding);
      expect(stream.bytes).toBe(body.byteLength);
      expect(Buffer.concat(raw)).toEqual(body);
    });
  }

  it('throws StreamRefusedError with the whole answer for a status other than 200', async () => {
    const base = await serve((_req, res) => {
      res.writeHead(404, { 'content-type': 'application/problem+json' });
      res.end('{"status":404,"title":"Not Found"}');
    });
    const refused = await openStream(base).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(StreamRefusedError);
    expect((refused as StreamRefusedError).status).toBe(404);
    expect((refused as StreamRefusedError).text).toBe('{"status":404,"title":"Not Found"}');
    expect((refused as StreamRefusedError).headers['content-type']).toBe('application/problem+json');
  });

  it('ends the iteration quietly on close(), and with StreamBrokenError when the connection drops', async () => {
    const base = await serve((req, res) => {
      res.writeHead(200);
      res.write(`${KEEP_ALIVE}\n`);
      if (req.url === '/drop') setImmediate(() => res.socket?.destroy());
    });
    const closed = await openStream(base);
    const seen: StreamBatch[] = [];
    for await (const batch of closed) {
      seen.push(batch);
      closed.close();
    }
    expect(seen).toHaveLength(1);

    const dropped = await openStream(`${base}/drop`);
    const iterate = async (): Promise<number> => {
      let n = 0;
      for await (const batch of dropped) if (batch.cursor) n += 1;
      return n;
    };
    await expect(iterate()).rejects.toBeInstanceOf(StreamBrokenError);
  });
});

describe('CursorCommitter', () => {
  const cursor = (partition: string, offset: string): StreamCursor => ({ partition, offset, event_type: 'e', cursor_token: 't' });

  it('keeps one commit in flight and sends the latest cursor of each partition next', async () => {
    const sent: (readonly StreamCursor[])[] = [];
    let release: (() => void) | undefined;
    const committer = new CursorCommitter(async (items) => {
      sent.push(items);
      if (sent.length === 1) await new Promise<void>((resolve) => (release = resolve));
      return { status: 204, text: '' };
    });
    committer.add(cursor('0', '1'));
    committer.add(cursor('0', '2'));
    committer.add(cursor('1', '1'));
    committer.add(cursor('0', '3'));
    expect(sent).toEqual([[cursor('0', '1')]]);
    release?.();
    await committer.flush();
    expect(sent).toEqual([[cursor('0', '1')], [cursor('0', '3'), cursor('1', '1')]]);
    expect(committer.commits).toBe(2);
  });

  it('counts outdated answers and failures, and reports each failure', async () => {
    const answers: CommitAnswer[] = [{ status: 200, text: '{"items":[{"result":"outdated"}]}' }, { status: 422, text: 'bad' }];
    const failures: number[] = [];
    const committer = new CursorCommitter(
      (): Promise<CommitAnswer> => {
        const answer = answers.shift();
        return answer === undefined ? Promise.reject(new Error('gone')) : Promise.resolve(answer);
      },
      { coalesce: false, onFailure: (f) => failures.push(f.status) },
    );
    committer.add(cursor('0', '1'));
    committer.add(cursor('0', '2'));
    committer.add(cursor('0', '3'));
    await committer.flush();
    expect(committer.commits).toBe(1);
    expect(committer.outdated).toBe(1);
    expect(committer.failures).toBe(2);
    expect(failures).toEqual([422, 0]);
    expect(committer.firstFailure).toMatch(/^422 bad \(items /);
  });
});
