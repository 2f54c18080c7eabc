/**
 * Process entry: load config → compose → listen; SIGTERM/SIGINT drain and exit 0 (issue 2 §1.6).
 * Startup failures (bad config, no redis-server, Redis unreachable) exit 1 with one clear message.
 */
import { createApp, type App } from './app.js';
import { ConfigError, loadConfig } from './config/load-config.js';
import { createLogger } from './observability/logger.js';
import { EmbeddedRedisError } from './storage/embedded-redis.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`broker: ${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  const logger = createLogger(config);
  let app: App;
  try {
    app = await createApp(config, logger);
  } catch (err) {
    const message = err instanceof EmbeddedRedisError || err instanceof Error ? err.message : String(err);
    logger.fatal({ err }, 'startup failed');
    process.stderr.write(`broker: cannot start: ${message}\n`);
    process.exit(1);
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
  await app.start();
}

main().catch((err: unknown) => {
  process.stderr.write(`broker: fatal: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
