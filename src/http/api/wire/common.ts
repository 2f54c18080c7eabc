/** Pieces every wire schema uses: closed objects, enums, timestamps, maps, problems, authorization attributes, paging links. */
import { Type, type Static } from '@sinclair/typebox';

/** A closed object: only the listed properties. */
export const Closed = { additionalProperties: false } as const;

/** A string enum from a constant list. */
export function StringEnum<const T extends readonly string[]>(values: T, options: { description?: string } = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

/** RFC 3339 timestamp (set by the service). */
export const Timestamp = Type.String({ format: 'date-time', description: 'RFC 3339, set by the service' });

/** A string-to-string map (annotations, labels). */
export const StringMap = (description: string) => Type.Record(Type.String(), Type.String(), { description });

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

/** One attribute of an authorization list (docs/security.md); `*`/`*` is the wildcard. */
export const AuthorizationAttributeSchema = Type.Object({ data_type: Type.String(), value: Type.String() }, Closed);

/** A list of authorization attributes. */
export const AttributeList = Type.Array(AuthorizationAttributeSchema);

/** A page link (`_links.prev`, `_links.next`). */
export const Link = Type.Object({ href: Type.String() }, Closed);
/** Paging links of a listing. */
export const PageLinksSchema = Type.Object({ prev: Type.Optional(Link), next: Type.Optional(Link) }, Closed);
