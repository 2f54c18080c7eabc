/**
 * The administrators (docs/operations.md "Administrator settings"; docs/security.md "Authorization: what
 * a subject may do") as stored and as `GET /settings/admins` serves them: the schema the OpenAPI document
 * shows (src/http/api/wire/settings.ts re-exports it) and the type derived from it. The bodies that set
 * them are read in src/domain/settings/settings-input.ts, which keeps each list non-empty, so the admin
 * endpoints can never lock everyone out.
 */
import { Type, type Static } from '@sinclair/typebox';
import { AttributeList, Closed, type DeepReadonly } from '../json/wire-parts.js';

/** The administrators: admins change them and storages, readers read settings, writers change the blacklist and features. */
export const AdminAuthorizationSchema = Type.Object({ admins: AttributeList, readers: AttributeList, writers: AttributeList }, { ...Closed, description: 'the administrators: admins change them and storages, readers read settings, writers change the blacklist and features' });

/** The administrators, derived from {@link AdminAuthorizationSchema}. */
export type AdminAuthorization = DeepReadonly<Static<typeof AdminAuthorizationSchema>>;
