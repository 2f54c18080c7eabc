import { Type } from '@sinclair/typebox';
import { Paging } from '../api/route-parts.js';
import { inputOf } from '../request-inputs.js';

const PagingQuery = Type.Object(Paging);

/** A page of a listing: `offset` ≥ 0, `limit` 1..1000. */
export interface Page {
  readonly offset: number;
  readonly limit: number;
}

/**
 * The `offset`/`limit` page of a listing whose route declares {@link Paging} in its query (WIRE.md
 * "Subscriptions": limit 1..1000, default 20; offset ≥ 0, default 0). The pipeline has checked both
 * already (400 `Field "limit" must be between 1 and 1000`, `Field "offset" must not be negative`, `… must
 * be an integer`); this applies the defaults.
 * @param query the request's checked query (`ctx.input.query`)
 */
export function pageOf(query: Readonly<Record<string, unknown>>): Page {
  const { offset = 0, limit = 20 } = inputOf(PagingQuery, query, 'query');
  return { offset, limit };
}
