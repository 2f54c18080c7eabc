/**
 * The `overload` scenario's reference server: the broker's HTTP engine and publishing admission with
 * nothing behind them, to measure what the load generator alone allows on the same cores
 * (docs/load-testing.md "What the load generator leaves"). It serves:
 *
 * - `POST /event-types/<name>/events`: admitted under the same bound as a node (`PublishAdmission`,
 *   `http.publishMaxInFlightBytes`, default 16 MiB, from `BROKER_HTTP_PUBLISH_MAX_IN_FLIGHT_BYTES`);
 *   an admitted body is read whole and dropped, then answered `200`; a publish beyond the bound is
 *   refused as a node refuses it — `503`, `Retry-After: 1`, a problem, sent before the body
 *   (`answerBeforeBody`);
 * - `GET /health`: `200 {"status":"OK"}`.
 *
 * No validation, no Redis, no worker threads: what such a server measures under a load is the least any
 * node would see under it. Run as a child process:
 *
 *   node dist/bench/null-node.js <port>
 *
 * Prints `listening <port>` on stdout once it accepts connections; exits on SIGTERM.
 */
import HyperExpress from 'hyper-express';
import { answerBeforeBody } from '../src/http/engine-workarounds.js';
import { PublishAdmission } from '../src/http/publish-admission.js';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  process.stderr.write('usage: node dist/bench/null-node.js <port>\n');
  process.exit(2);
}

const DEFAULT_BOUND = 16 * 1024 * 1024;
const admission = new PublishAdmission(Number(process.env.BROKER_HTTP_PUBLISH_MAX_IN_FLIGHT_BYTES ?? DEFAULT_BOUND));
const REFUSAL = JSON.stringify({ type: 'about:blank', title: 'Service Unavailable', status: 503, detail: 'publishing is at its bound of bytes in flight' });

const app = new HyperExpress.Server({ max_body_length: Number.MAX_SAFE_INTEGER, max_body_buffer: 64 * 1024, auto_close: false });

app.post('/event-types/:name/events', async (req, res) => {
  let admitted;
  try {
    admitted = admission.admit(Number(req.headers['content-length'] ?? 0));
  } catch {
    answerBeforeBody(req, res, 503, { 'Content-Type': 'application/problem+json', 'Retry-After': '1' }, REFUSAL);
    return;
  }
  // A client that leaves mid-body leaves the read pending for good: its bytes go back when it leaves.
  res.once('close', () => admitted.release());
  try {
    await req.buffer();
    res.status(200).json({});
  } catch {
    if (!res.completed) res.status(400).send();
  } finally {
    admitted.release();
  }
});

app.get('/health', (_req, res) => {
  res.json({ status: 'OK' });
});

await app.listen(port, '127.0.0.1');
process.stdout.write(`listening ${port}\n`);

process.once('SIGTERM', () => {
  app.close();
  process.exit(0);
});
