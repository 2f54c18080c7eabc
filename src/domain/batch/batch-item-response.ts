/**
 * The items of a 207 or 422 answer to a batch (docs/publishing.md "Answers"), as the
 * publish workers, the publisher and the deleted-events service build them: the schema the OpenAPI
 * document shows (src/http/api/wire/event-types.ts re-exports it) and the type derived from it.
 */
import { Type, type Static } from '@sinclair/typebox';
import { Closed } from '../json/wire-parts.js';

/** One item of a 207 or 422 publishing answer (docs/publishing.md "Answers"). */
export const BatchItemResponseSchema = Type.Object(
  {
    eid: Type.String({ description: '`metadata.eid` of the event, `""` when it had none' }),
    publishing_status: Type.Union([Type.Literal('submitted'), Type.Literal('failed'), Type.Literal('aborted')]),
    step: Type.Union([Type.Literal('none'), Type.Literal('validating'), Type.Literal('partitioning'), Type.Literal('enriching'), Type.Literal('publishing')]),
    detail: Type.String(),
  },
  Closed,
);

/** One item of a 422/207 answer (docs/publishing.md "Answers"), derived from {@link BatchItemResponseSchema}. */
export type BatchItemResponse = Static<typeof BatchItemResponseSchema>;

/** Step names of BatchItemResponse (docs/publishing.md "Answers"): `none`, then the steps an event goes through in order. */
export type PublishStep = BatchItemResponse['step'];
