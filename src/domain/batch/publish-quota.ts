/**
 * Publishing quotas (docs/publishing.md "Quotas"): how many events and bytes per second one producer may
 * publish in the whole cluster, set by administrators per publishing subject or per owning application of
 * the event types published to. Schemas of the wire shapes and the quota keys; pure, no I/O.
 */
import { Type, type Static } from '@sinclair/typebox';

/** What a quota is set for: the publishing subject (its id) or the `owning_application` of the event types published to. */
export const QUOTA_KINDS = ['subject', 'owning_application'] as const;
/** One of {@link QUOTA_KINDS}. */
export type QuotaKind = (typeof QUOTA_KINDS)[number];

/**
 * The body of `PUT /settings/quotas/{kind}/{name}`: `events_per_second` and/or `bytes_per_second`, each a
 * positive integer (at least one of them; 422 otherwise, 400 for a value of the wrong JSON type).
 */
export const PublishQuotaSchema = Type.Object(
  {
    events_per_second: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000_000, description: 'events per second this producer may publish, counted for the whole cluster' })),
    bytes_per_second: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000_000_000, description: 'bytes of publish bodies (as received, inflated) per second this producer may publish, counted for the whole cluster' })),
  },
  { additionalProperties: false, minProperties: 1, description: 'a publishing quota: at least one of events_per_second and bytes_per_second' },
);

/** A quota as stored and served. */
export type PublishQuota = Static<typeof PublishQuotaSchema>;

/** One quota of `GET /settings/quotas`. */
export const PublishQuotaEntrySchema = Type.Object({
  kind: Type.Union(QUOTA_KINDS.map((k) => Type.Literal(k)), { description: 'subject: the publishing subject\'s id; owning_application: the owning application of the event types published to' }),
  name: Type.String({ description: 'the subject id or the application' }),
  events_per_second: Type.Optional(Type.Integer()),
  bytes_per_second: Type.Optional(Type.Integer()),
});

/** `GET /settings/quotas`. */
export const PublishQuotaListSchema = Type.Object({ items: Type.Array(PublishQuotaEntrySchema) });
/** One quota as listed: its kind, name and rates. */
export type PublishQuotaEntry = Static<typeof PublishQuotaEntrySchema>;

/** The settings entry of a quota: `<kind>:<name>`. */
export function quotaEntry(kind: QuotaKind, name: string): string {
  return `${kind}:${name}`;
}

/** Whether `value` is a quota kind. */
export function isQuotaKind(value: string): value is QuotaKind {
  return (QUOTA_KINDS as readonly string[]).includes(value);
}
