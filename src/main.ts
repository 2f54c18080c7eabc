/**
 * Process entry: check the HTTP engine → load config → check the port → compose → listen; SIGTERM/SIGINT
 * drain and exit 0. Startup failures (an HTTP engine that would fall back to its Node.js implementation,
 * bad config, port in use, no redis-server, the data directory's embedded Redis owned by another node,
 * Redis unreachable, a Redis older than 7.0 or with a maxmemory-policy other than noeviction) exit 1
 * with one clear message; what was started by then (the embedded Redis) is stopped first.
 */
import v8 from 'node:v8';
import type { App } from './app.js';
import { ConfigError, loadConfig } from './config/load-config.js';
import { checkHttpEngine } from './http/engine-check.js';
import { assertPortFree } from './http/port-check.js';
import { createLogger } from './observability/logger.js';
import { EmbeddedRedisError } from './storage/redis/embedded-redis.js';

async function main(): Promise<void> {
  // Before the engine is imported (app.js imports it), which would print its fallback warning and go on.
  const engineProblem = checkHttpEngine();
  if (engineProblem !== undefined) {
    process.stderr.write(`broker: cannot start: ${engineProblem}\n`);
    process.exit(1);
  }
  const { createApp } = await import('./app.js');
  let config;
  const warnings: string[] = [];
  try {
    config = loadConfig(process.env, (message) => warnings.push(message));
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`broker: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const logger = createLogger(config);
  for (const message of warnings) logger.warn(message);
  applyHeapGrowth(config.node.heapGrowingPercent, logger);
  const fail = (err: unknown): never => {
    const message = err instanceof EmbeddedRedisError || err instanceof Error ? err.message : String(err);
    logger.fatal({ err }, 'startup failed');
    process.stderr.write(`broker: cannot start: ${message}\n`);
    process.exit(1);
  };
  let app: App;
  try {
    // Before anything else starts (the embedded Redis above all): a taken port fails at once.
    await assertPortFree(config.host, config.port);
    app = await createApp(config, logger);
  } catch (err) {
    return fail(err);
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    app.close().then(
      () => {
        logger.info('stopped');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // SIGUSR1 keeps Node's meaning (open the inspector on 127.0.0.1:9229); SIGUSR2, which would end the
  // process undrained, is logged and ignored (tools send it for heap snapshots or restarts).
  process.on('SIGUSR2', () => logger.warn({ signal: 'SIGUSR2' }, 'signal ignored: SIGTERM or SIGINT stops the node'));
  try {
    await app.start();
  } catch (err) {
    // The port was taken after the check (or the listen failed otherwise): stop what was started.
    stopping = true;
    await app.close().catch((closeErr: unknown) => logger.error({ err: closeErr }, 'closing after a failed start failed'));
    fail(err);
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`broker: fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});

/**
 * Sets V8's old-generation growing factor for this process (`node.heapGrowingPercent`): with V8's own
 * choice the main thread's heap grows to several times its live size between major collections under
 * churn (docs/decisions/0011-heap-growing-factor.md "Figures the code relies on"). V8
 * reads the flag at every collection, so setting it here, before the node allocates in earnest, covers
 * the main thread and the worker threads started after. A `--heap-growing-percent` the operator gave (NODE_OPTIONS or the command line) wins.
 * @param percent 0 leaves V8's own choice
 */
function applyHeapGrowth(percent: number, logger: ReturnType<typeof createLogger>): void {
  const given = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)].some((flag) => /^--heap[-_]growing[-_]percent\b/.test(flag));
  if (given) {
    logger.info('node.heapGrowingPercent not applied: --heap-growing-percent was given to node');
    return;
  }
  if (percent > 0) v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
