import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { CliError, EXIT } from '../../src/cli/exit-codes.js';
import { BrokerClient, type StreamLine } from '../../src/cli/http-client.js';
import { runCli } from '../../src/cli/program.js';

// The `broker` command line's HTTP client (src/cli/http-client.ts): a --url that does not parse is a
// usage error (exit 2), and a stream that breaks after its 200 (a line that is not a batch, a dropped
// connection) ends the iteration of its lines with a CliError exit 4. A stand-in node (node:http)
// answers as each test scripts it.

const servers: http.Server[] = [];
const clients: BrokerClient[] = [];
afterEach(async () => {
  for (const client of clients.splice(0)) client.close();
  await Promise.all(servers.splice(0).map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
});

/** A client of a stand-in node whose every request `handler` answers. */
async function clientOf(handler: http.RequestListener): Promise<BrokerClient> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = new BrokerClient({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  clients.push(client);
  return client;
}

/** The error reading all lines of a stream fails with (fails the test when the lines end without one). */
async function failureOf(lines: AsyncIterable<StreamLine>): Promise<unknown> {
  try {
    for await (const line of lines) void line;
  } catch (err) {
    return err;
  }
  throw new Error('expected the lines to fail');
}

/** A batch line of a low-level stream. */
const BATCH = `${JSON.stringify({ cursor: { partition: '0', offset: '001-0001-000000000000000001' }, events: [{ a: 1 }] })}\n`;

describe('BrokerClient', () => {
  it('refuses a --url that is not a URL as a usage error', () => {
    let thrown: unknown;
    try {
      new BrokerClient({ url: 'not a url' });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(CliError);
    expect(thrown).toMatchObject({ message: '--url: "not a url" is not a URL', exitCode: EXIT.usage });
  });

  it('makes the command exit 2 with that message when --url is not a URL', async () => {
    let stderr = '';
    const err = new PassThrough().on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    expect(await runCli(['--url', 'not a url', 'event-types', 'list'], new PassThrough().resume(), err)).toBe(EXIT.usage);
    expect(stderr).toContain('--url: "not a url" is not a URL');
  });

  it('ends the lines of a stream with a CliError exit 4 when a line is not a batch', async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-json-stream' });
      res.end(`${BATCH}this is not a batch\n`);
    });
    const stream = await client.openStream('GET', '/event-types/x/events');
    const err = await failureOf(stream.lines);
    expect(err).toBeInstanceOf(CliError);
    expect(err).toMatchObject({ exitCode: EXIT.serverError, message: expect.stringMatching(/^unparsable stream line \(19 bytes\): .*; starts this is not a batch$/) as unknown });
  });

  it('ends the lines of a stream with a CliError exit 4 when the connection drops before the broker ends it', async () => {
    const client = await clientOf((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/x-json-stream' });
      res.write(BATCH, () => res.destroy());
    });
    const stream = await client.openStream('GET', '/event-types/x/events');
    const err = await failureOf(stream.lines);
    expect(err).toBeInstanceOf(CliError);
    expect(err).toMatchObject({ exitCode: EXIT.serverError, message: expect.stringMatching(/^the stream broke off/) as unknown });
  });
});
