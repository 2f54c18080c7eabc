import { pino, type DestinationStream, type Logger } from 'pino';
import type { BrokerConfig } from '../config/config-schema.js';

export type { Logger };

/**
 * The process logger: pino JSON lines on stdout; request lines carry `flow_id`, so one request's lines can be found together (docs/operations.md "Logs").
 * @param destination where the lines go instead of stdout (a node run inside another process, such as a test's)
 */
export function createLogger(config: Pick<BrokerConfig, 'logLevel'>, destination?: DestinationStream): Logger {
  const options = { level: config.logLevel, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime };
  return destination === undefined ? pino(options) : pino(options, destination);
}
