/**
 * Request bodies of the schema version endpoints (docs/http-api.md "Endpoints"), as JSON
 * Schema checked by ajv (src/domain/json/input-check.ts):
 * - `POST /event-types/{name}/schemas`: the event type's next `schema` ({@link SchemaVersionInputSchema},
 *   the very node of `EventTypeInputSchema` a `PUT` checks, so both answer the same lines);
 * - `POST /event-types/{name}/schemas?fetch=true`: a schema to find among the stored versions;
 * - `POST /event-types/{name}/schemas/{version}/compatibility-check`: a schema to compare.
 * Whether the text is a valid, compatible schema is the registry's (in a worker). Pure: no I/O.
 */
import { Type } from '@sinclair/typebox';
import { EventTypeInputSchema } from '../event-type/event-type-input.js';

/**
 * The body of `POST /event-types/{name}/schemas` (without `fetch`): `{type, schema}` as the `schema` of
 * an event type (docs/concepts.md "Schema versions"), checked as that field of the event type input, so a problem is
 * named `schema.type` or `schema.schema` as for a `PUT`.
 */
export const SchemaVersionInputSchema = EventTypeInputSchema.properties.schema;

/**
 * A schema addition's body placed where the event type input has it (`{schema: <body>}`): checking this
 * names the body's problems as a `PUT` does. The registry answers its malformed (400) problems before
 * looking the event type up; the rest come from the event type input check, after the admin check.
 */
export const SchemaAdditionCheck = Type.Object({ schema: SchemaVersionInputSchema });

const SCHEMA_TEXT = 'must be a string: the JSON Schema as text';
const TYPE_TEXT = 'must be "json_schema" (JSON Schema draft 04)';
/** The schema text: any failure is a broken rule (422), as the registry has always answered. */
const SchemaText = Type.String({ 'x-status': 422, 'x-messages': { required: SCHEMA_TEXT, type: SCHEMA_TEXT }, description: 'the JSON Schema (draft-04) as JSON text' });

/**
 * The body of `POST /event-types/{name}/schemas?fetch=true`: `type` `json_schema` (also `json-schema`,
 * any case, as for an event type) and `schema`, the text to find. Not an object: 400; anything else
 * missing or wrong: 422. Whether `schema` is JSON is the registry's (422).
 */
export const SchemaFetchInputSchema = Type.Object(
  {
    type: Type.String({ 'x-any-case-enum': ['json_schema', 'json-schema'], 'x-status': 422, 'x-messages': { required: TYPE_TEXT, type: TYPE_TEXT, 'x-any-case-enum': TYPE_TEXT } }),
    schema: SchemaText,
  },
  { 'x-messages': { type: 'must be a JSON object {"type": "json_schema", "schema": "<JSON Schema as text>"}' } },
);

/**
 * The body of `POST /event-types/{name}/schemas/{version}/compatibility-check`: `schema`, the text to
 * compare (the event type's schema type applies; a `type` sent is ignored). Not an object: 400; no
 * string `schema`: 422.
 */
export const CompatibilityCheckInputSchema = Type.Object(
  { schema: SchemaText },
  { 'x-messages': { type: 'must be a JSON object {"schema": "<JSON Schema as text>"}' } },
);
