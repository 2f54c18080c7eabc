import { envelopeSchemas, type AvroSchemaVersion } from '../../avro/envelope-schemas.js';
import { brokerError } from '../../errors/catalog.js';
import type { HttpServer } from '../server.js';

/**
 * Avro schemas of the service's own envelopes (spec "Settings, storages and others", "Versioning" item 5;
 * schemas in `src/avro/envelope-schemas.ts`): `batch.publishing`, `batch.consumption`, `metadata`.
 * - `GET /avro-schemas/{name}/versions` → 200 `{"items": [AvroSchema, …]}`, newest version first;
 * - `GET /avro-schemas/{name}/versions/{version}` → 200 AvroSchema `{"version": "1", "avro_schema": {…}}`.
 * Unknown name or version → 404 problem (thrown synchronously; the request pipeline maps it). Authenticated
 * like every route; no further authorization.
 */
export function avroSchemaRoutes(http: HttpServer): void {
  http.route('GET', '/avro-schemas/:name/versions', (ctx) => Promise.resolve({ status: 200, body: { items: versionsOf(ctx.params.name ?? '') } }));

  http.route('GET', '/avro-schemas/:name/versions/:version', (ctx) => {
    const name = ctx.params.name ?? '';
    const version = ctx.params.version ?? '';
    const found = versionsOf(name).find((v) => v.version === version);
    if (found === undefined) throw brokerError('AVRO_SCHEMA_VERSION_NOT_FOUND', { version, name });
    return Promise.resolve({ status: 200, body: found });
  });
}

/**
 * The versions of a served schema, newest first.
 * @throws BrokerError NOT_FOUND when no schema has that name
 */
function versionsOf(name: string): readonly AvroSchemaVersion[] {
  const versions = envelopeSchemas.get(name);
  if (versions === undefined) throw brokerError('AVRO_SCHEMA_NOT_FOUND', { name });
  return versions;
}
