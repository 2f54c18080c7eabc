import { brokerError } from '../../errors/catalog.js';

/** `offset`/`limit` query paging (WIRE.md: limit 1..1000, default 20; offset ≥ 0). @throws BrokerError 400 */
export function pageOf(query: URLSearchParams): { offset: number; limit: number } {
  const limit = integer(query.get('limit'), 20, 'limit');
  const offset = integer(query.get('offset'), 0, 'offset');
  if (limit < 1 || limit > 1000) throw brokerError('BAD_REQUEST', { reason: 'limit must be between 1 and 1000' });
  if (offset < 0) throw brokerError('BAD_REQUEST', { reason: 'offset must not be negative' });
  return { offset, limit };
}

function integer(text: string | null, fallback: number, field: string): number {
  if (text === null) return fallback;
  if (!/^-?\d{1,15}$/.test(text)) throw brokerError('BAD_REQUEST', { reason: `${field} must be an integer` });
  return Number(text);
}
