/**
 * Request bodies of the settings (docs/operations.md "Administrator settings"): the
 * administrators (`POST`/`PUT /settings/admins`) and a feature toggle (`POST /settings/features`), each a
 * JSON Schema checked by ajv (src/domain/json/input-check.ts). What a schema cannot say stays a rule here
 * (an attribute at most once per list) or a lookup where the data is (a feature's name in
 * services/settings.ts, the attributes the authorization plugin accepts in services/access-control.ts).
 * Pure: no I/O.
 */
import { Type, type Static } from '@sinclair/typebox';
import type { AuthorizationAttribute } from '../event-type/event-type.js';
import { AttributeListInput, duplicateAttributeProblems } from '../event-type/event-type-input.js';
import { checkBody, Problems, type RuleResult } from '../event-type/rule-problems.js';

/**
 * The body of `POST`/`PUT /settings/admins` (docs/security.md "Authorization: what a subject may do"): `admins`, `readers` and
 * `writers`, each a non-empty list of at most 100 attributes of non-empty strings (422; a list of
 * the wrong JSON type 400).
 */
export const AdminsInputSchema = Type.Object(
  { admins: AttributeListInput, readers: AttributeListInput, writers: AttributeListInput },
  { 'x-messages': { type: 'must be an object with admins, readers and writers' }, description: 'the administrators: admins change them and storages, readers read settings, writers change the blacklist and features' },
);

/** The three lists of administrators after {@link parseAdminsInput}. */
export interface AdminsInput {
  readonly admins: readonly AuthorizationAttribute[];
  readonly readers: readonly AuthorizationAttribute[];
  readonly writers: readonly AuthorizationAttribute[];
}

/**
 * Checks an administrators body: {@link AdminsInputSchema}, then each attribute at most once per list (422).
 * @param body the parsed JSON body (declared properties holding `null` are removed from it)
 * @returns the three lists, or 400 (not an object, a list of the wrong JSON type) / 422 with one line per problem
 */
export function parseAdminsInput(body: unknown): RuleResult<AdminsInput> {
  const checked = checkBody(AdminsInputSchema, body);
  if (!checked.ok) return checked;
  const p = new Problems();
  for (const field of ['admins', 'readers', 'writers'] as const) duplicateAttributeProblems(checked.value[field], field, p);
  return p.result<AdminsInput>(checked.value, 'invalid administrators');
}

/** Every failure of a feature body is a 400 (as the reference answers an unknown feature: malformed). */
const malformed = (text: string) => ({ 'x-status': 400, 'x-messages': { required: text, type: text } });

/**
 * The body of `POST /settings/features` (docs/operations.md "Feature toggles"): `{"feature": "<name>", "enabled": true|false}`,
 * any failure 400. The name is any string here; an unknown one is refused where the features are
 * known (`Settings.setFeature`, 400).
 */
export const FeatureInputSchema = Type.Object(
  {
    feature: Type.String({ description: 'a feature name (any case); an unknown one is 400', ...malformed('must be a string') }),
    enabled: Type.Boolean(malformed('must be true or false')),
  },
  { 'x-status': 400, 'x-messages': { type: 'must be an object {"feature": "...", "enabled": true|false}' }, description: 'turn a feature on or off' },
);

/** A feature body that passed {@link FeatureInputSchema}. */
export type FeatureInput = Static<typeof FeatureInputSchema>;
