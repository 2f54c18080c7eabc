/**
 * Baseline (a) of `bench/publish-batches.ts`: a hyper-express server that only reads the request
 * body, `JSON.parse`s it and answers 200 with an empty body, on the main thread. The same body limits
 * as the broker's HTTP server. Run as a child process:
 *
 *   node dist/bench/baseline-parse-server.js <port>
 *
 * Prints `listening <port>` on stdout once it accepts connections; exits on SIGTERM.
 */
import HyperExpress from 'hyper-express';

const port = Number(process.argv[2]);
if (!Number.isInteger(port) || port <= 0) {
  process.stderr.write('usage: node dist/bench/baseline-parse-server.js <port>\n');
  process.exit(2);
}

const app = new HyperExpress.Server({ max_body_length: 52_428_800, max_body_buffer: 64 * 1024 });

app.post('/*', async (req, res) => {
  try {
    const body = await req.buffer();
    JSON.parse(body.toString('utf8'));
    res.status(200).send();
  } catch {
    res.status(400).send();
  }
});

await app.listen(port, '127.0.0.1');
process.stdout.write(`listening ${port}\n`);

process.once('SIGTERM', () => {
  app.close();
  process.exit(0);
});
