import { pino, type Logger } from 'pino';
import type { BrokerConfig } from '../config/config-schema.js';

export type { Logger };

/** The process logger: pino JSON lines on stdout; request lines carry `flow_id`, so one request's lines can be found together (docs/operations.md "Logs"). */
export function createLogger(config: Pick<BrokerConfig, 'logLevel'>): Logger {
  return pino({ level: config.logLevel, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime });
}
