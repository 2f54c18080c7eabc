import { Type } from '@sinclair/typebox';
import { envelopeSchemas, type AvroSchemaVersion } from '../../avro/envelope-schemas.js';
import { brokerError } from '../../errors/catalog.js';
import { json, problems, routesOf, type Route } from '../api/route-model.js';
import { AvroSchemaVersionSchema } from '../api/wire-schemas.js';

const route = routesOf<undefined>();

/**
 * Avro schemas of the service's own envelopes (docs/http-api.md; schemas in
 * `src/avro/envelope-schemas.ts`): `batch.publishing`, `batch.consumption`, `metadata`.
 * - `GET /avro-schemas/{name}/versions` → 200 `{"items": [AvroSchema, …]}`, newest version first;
 * - `GET /avro-schemas/{name}/versions/{version}` → 200 AvroSchema `{"version": "1", "avro_schema": {…}}`.
 * Unknown name or version → 404 problem (thrown synchronously; the request pipeline maps it). Authenticated
 * like every route; no further authorization.
 */
export const AVRO_SCHEMA_ROUTES: readonly Route<undefined>[] = [
  route({
    method: 'GET', path: '/avro-schemas/{name}/versions', operationId: 'listAvroSchemaVersions', tag: 'Settings', access: 'authenticated',
    params: Type.Object({ name: Type.String({ description: 'batch.publishing, batch.consumption or metadata' }) }),
    summary: 'Avro schemas of the service\'s envelopes', responses: { '200': json('newest first', Type.Object({ items: Type.Array(AvroSchemaVersionSchema) }, { additionalProperties: false })), ...problems(404) },
    handler: (ctx) => Promise.resolve({ status: 200, body: { items: versionsOf(ctx.input.params.name) } }),
  }),
  route({
    method: 'GET', path: '/avro-schemas/{name}/versions/{version}', operationId: 'getAvroSchemaVersion', tag: 'Settings', access: 'authenticated',
    params: Type.Object({ name: Type.String(), version: Type.String() }),
    summary: 'One Avro schema version', responses: { '200': json('the version', AvroSchemaVersionSchema), ...problems(404) },
    handler: (ctx) => {
      const { name, version } = ctx.input.params;
      const found = versionsOf(name).find((v) => v.version === version);
      if (found === undefined) throw brokerError('AVRO_SCHEMA_VERSION_NOT_FOUND', { version, name });
      return Promise.resolve({ status: 200, body: found });
    },
  }),
];

/**
 * The versions of a served schema, newest first.
 * @throws BrokerError NOT_FOUND when no schema has that name
 */
function versionsOf(name: string): readonly AvroSchemaVersion[] {
  const versions = envelopeSchemas.get(name);
  if (versions === undefined) throw brokerError('AVRO_SCHEMA_NOT_FOUND', { name });
  return versions;
}
