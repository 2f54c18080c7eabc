/** Pieces every wire schema uses: closed objects, enums, timestamps, maps and authorization attributes (declared in src/domain/json/wire-parts.ts), problems, paging links. */
import { Type, type Static } from '@sinclair/typebox';
import { Closed } from '../../../domain/json/wire-parts.js';

export { Closed, StringEnum, Timestamp, StringMap, AuthorizationAttributeSchema, AttributeList } from '../../../domain/json/wire-parts.js';

/** RFC 7807 problem (docs/errors.md): every failure answers one, as `application/problem+json`. */
export const ProblemSchema = Type.Object(
  {
    type: Type.Optional(Type.String({ description: 'URI reference naming the kind of problem' })),
    title: Type.String({ description: 'the HTTP reason phrase of `status`' }),
    status: Type.Integer({ minimum: 400, maximum: 599 }),
    detail: Type.Optional(Type.String({ description: 'what went wrong, for a person; several problems one per line; for a 500, the trace id in the node log' })),
    instance: Type.Optional(Type.String()),
    errors: Type.Optional(
      Type.Array(
        Type.Object({
          pointer: Type.String({ description: 'RFC 6901 JSON pointer of the failing value within `in`' }),
          in: Type.Optional(Type.String({ description: '`body`, `query`, `path` or `header`' })),
          detail: Type.String(),
        }),
        { description: 'for a request that broke its schema: one entry per failing value' },
      ),
    ),
  },
  { description: 'RFC 7807 problem details' },
);
/** A problem body. */
export type ProblemBody = Static<typeof ProblemSchema>;

/** A page link (`_links.prev`, `_links.next`). */
export const Link = Type.Object({ href: Type.String() }, Closed);
/** Paging links of a listing. */
export const PageLinksSchema = Type.Object({ prev: Type.Optional(Link), next: Type.Optional(Link) }, Closed);
