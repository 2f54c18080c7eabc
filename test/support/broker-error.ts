import { BrokerError } from '../../src/errors/catalog.js';

/**
 * The BrokerError `work` throws (a refusal the test expects); any other error is rethrown.
 * @throws Error `not refused` when `work` returns
 */
export function refusalOf(work: () => unknown): BrokerError {
  try {
    work();
  } catch (err) {
    if (err instanceof BrokerError) return err;
    throw err;
  }
  throw new Error('not refused');
}
