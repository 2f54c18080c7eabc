import { BrokerError } from '../errors/catalog.js';
import type { AuthorizationAttribute } from '../domain/event-type/event-type.js';
import type { EventTypeRegistry, RegistryCaller } from './event-types/event-type-registry.js';
import type { Settings } from './settings.js';

/** The registry caller for the service's own event types: an administrator, no authorization rules, trusted schemas. */
const SERVICE_CALLER: RegistryCaller = { isAdmin: true, authorizationProblems: () => [], requireAdmin: () => undefined, trusted: true };

/**
 * Registers one of the service's own event types unless it exists (docs/operations.md "The broker's own
 * event types"): every node does so at startup and the first wins; an existing one is left as it is (its
 * validators prepared on this node).
 * @param definition the `POST /event-types` body
 * @throws BrokerError other than EVENT_TYPE_EXISTS (e.g. 503 when Redis is down, 422 for a broken definition)
 */
export async function ensureServiceEventType(registry: EventTypeRegistry, definition: Record<string, unknown>): Promise<void> {
  try {
    await registry.create(definition, SERVICE_CALLER);
  } catch (err) {
    if (!(err instanceof BrokerError && err.code === 'EVENT_TYPE_EXISTS')) throw err;
    // Another node may have created it a moment ago, before this one listened to change notices: its
    // validators are prepared here, so its first batch on this node compiles nothing either.
    await registry.prepareValidators(definition.name as string);
  }
}

/**
 * The authorization of a service event type only the administrators may touch: their `admins` list
 * changes it and publishes to it, any admin list (readers, writers, admins; each attribute once) reads it.
 */
export function administratorsOnly(settings: Pick<Settings, 'admins'>): { admins: AuthorizationAttribute[]; readers: AuthorizationAttribute[]; writers: AuthorizationAttribute[] } {
  const lists = settings.admins();
  const readers = [...new Map([...lists.readers, ...lists.writers, ...lists.admins].map((a) => [`${a.data_type}\u0000${a.value}`, a])).values()];
  return { admins: [...lists.admins], readers, writers: [...lists.admins] };
}
