import type { AuthorizationPlugin } from '../auth/authorization-plugin.js';
import type { Subject } from '../auth/subject.js';
import { eventOwner } from '../domain/event-type/event-owner.js';
import type { AuthorizationAttribute, EventType } from '../domain/event-type/event-type.js';
import type { Subscription } from '../domain/subscription/subscription.js';
import { brokerError, errorCatalog } from '../errors/catalog.js';
import type { AdminAuthorization } from '../domain/settings/admin-authorization.js';
import type { Feature, Settings } from './settings.js';

/** Operations on an event type (docs/security.md "Authorization: what a subject may do"). */
export type EventTypeOperation = 'admin' | 'read' | 'write';
/** Operations on the admin endpoints (docs/security.md "Authorization: what a subject may do"): `admin` changes the administrators. */
export type SettingsOperation = 'admin' | 'read' | 'write';

/** The detail of 403s for blocked producers (docs/security.md "Blacklist and feature toggles"). */
export const PRODUCER_BLOCKED = errorCatalog.PRODUCER_BLOCKED.template;
/** The closing batch's reason, and the 403 detail, for blocked consumers (docs/security.md "Blacklist and feature toggles"). */
export const CONSUMPTION_BLOCKED = errorCatalog.CONSUMPTION_BLOCKED.template;
/** Why a stream ends when the readers of one of its event types changed: its consumer may no longer be one, and must reconnect to be checked again. */
export const READERS_CHANGED = 'The readers of an event type of this stream changed; reconnect';

/** Identifies an event type's readers list (order-insensitive), to notice when it changes. */
export function readersKey(eventType: Pick<EventType, 'authorization'>): string {
  return JSON.stringify((eventType.authorization?.readers ?? []).map((a) => [a.data_type, a.value]).sort());
}

/**
 * Who may do what (docs/security.md "Authorization: what a subject may do"). Pure decisions over the node's
 * settings snapshot and the plugin; nothing here calls Redis.
 *
 * - Event types: a missing authorization section means open to every authenticated subject; otherwise
 *   the subject must hold one attribute of the operation's list. Administrators (the settings'
 *   `writers` or `admins`) may always perform `admin` on an event type.
 * - Subscriptions: `admins` (update, delete; administrators too) and `readers` (stream, commit, reset).
 * - Admin endpoints: `readers` read, `writers` write, `admins` change the administrators; a higher list
 *   implies the lower ones.
 */
export class AccessControl {
  constructor(
    readonly plugin: AuthorizationPlugin,
    private readonly settings: Settings,
  ) {}

  /** True when `subject` may write admin endpoints: widened limits, any event type's or subscription's admin operations. */
  isAdministrator(subject: Subject): boolean {
    const admins = this.settings.admins();
    return this.holdsAny(subject, admins.writers) || this.holdsAny(subject, admins.admins);
  }

  /** @throws BrokerError 403 unless `subject` may perform `operation` on the admin endpoints */
  requireSettings(subject: Subject, operation: SettingsOperation): void {
    const admins = this.settings.admins();
    const lists: (keyof AdminAuthorization)[] = operation === 'admin' ? ['admins'] : operation === 'write' ? ['writers', 'admins'] : ['readers', 'writers', 'admins'];
    if (!lists.some((list) => this.holdsAny(subject, admins[list]))) {
      throw brokerError('ACCESS_DENIED', { operation: operation === 'read' ? 'READ' : operation === 'write' ? 'WRITE' : 'ADMIN', resource: 'settings' });
    }
  }

  mayAccessEventType(subject: Subject, eventType: Pick<EventType, 'authorization'>, operation: EventTypeOperation): boolean {
    const section = eventType.authorization;
    if (section === undefined) return true;
    const list = operation === 'admin' ? section.admins : operation === 'read' ? section.readers : section.writers;
    if (this.holdsAny(subject, list)) return true;
    return operation === 'admin' && this.isAdministrator(subject);
  }

  /** @throws BrokerError 403 `Access on WRITE event-type:<name> denied` */
  requireEventType(subject: Subject, eventType: Pick<EventType, 'name' | 'authorization'>, operation: EventTypeOperation): void {
    if (!this.mayAccessEventType(subject, eventType, operation)) throw brokerError('ACCESS_DENIED', { operation: upper(operation), resource: `event-type:${eventType.name}` });
  }

  maySubscription(subject: Subject, subscription: Pick<Subscription, 'authorization'>, operation: 'admin' | 'read'): boolean {
    const section = subscription.authorization;
    if (section === undefined) return true;
    if (this.holdsAny(subject, operation === 'admin' ? section.admins : section.readers)) return true;
    return operation === 'admin' && this.isAdministrator(subject);
  }

  /** @throws BrokerError 403 `Access on READ subscription:<id> denied` */
  requireSubscription(subject: Subject, subscription: Pick<Subscription, 'id' | 'authorization'>, operation: 'admin' | 'read'): void {
    if (!this.maySubscription(subject, subscription, operation)) throw brokerError('ACCESS_DENIED', { operation: upper(operation), resource: `subscription:${subscription.id}` });
  }

  /**
   * Read access to every one of `eventTypes`: what creating a subscription, resetting its cursors and
   * reading its cursors or stats need, as streaming it does, since each of them reveals or moves
   * positions in events the subject could otherwise not read. Administrators get no exception: they may
   * make themselves readers.
   * @throws BrokerError 403 `Access on READ event-type:<name> denied` for the first one denied
   */
  requireEventTypesReadable(subject: Subject, eventTypes: readonly Pick<EventType, 'name' | 'authorization'>[]): void {
    for (const eventType of eventTypes) this.requireEventType(subject, eventType, 'read');
  }

  /**
   * Consuming a subscription (docs/security.md "Authorization: what a subject may do"): reader rights on
   * it and read rights on every one of its event types, and not blocked. @throws BrokerError 403
   */
  requireSubscriptionConsumer(subject: Subject, subscription: Pick<Subscription, 'id' | 'authorization'>, eventTypes: readonly Pick<EventType, 'name' | 'authorization'>[]): void {
    this.requireSubscription(subject, subscription, 'read');
    this.requireEventTypesReadable(subject, eventTypes);
    if (this.consumptionBlocked(subject, eventTypes.map((e) => e.name))) throw brokerError('CONSUMPTION_BLOCKED');
  }

  /** True when the blacklist blocks `subject` from consuming, or blocks consumption of one of `eventTypes`. */
  consumptionBlocked(subject: Subject, eventTypes: readonly string[]): boolean {
    return this.settings.isBlocked('CONSUMER_APP', subject.id) || eventTypes.some((name) => this.settings.isBlocked('CONSUMER_ET', name));
  }

  /** @throws BrokerError 403 `Application or event type is blocked` when the blacklist blocks this publication */
  requireProducerNotBlocked(subject: Subject, eventType: string): void {
    if (this.settings.isBlocked('PRODUCER_APP', subject.id) || this.settings.isBlocked('PRODUCER_ET', eventType)) throw brokerError('PRODUCER_BLOCKED');
  }

  /**
   * Per-event authorization (docs/consuming.md "Per-event authorization"): for an event type with an owner selector, a test
   * of each event's JSON text — may `subject` read it (the selector's name as data type, the owner value
   * as value)? Undefined when every event may be read (no selector, or a static owner the subject holds).
   * A static owner the subject does not hold leaves every event out.
   */
  eventFilter(subject: Subject, eventType: Pick<EventType, 'event_owner_selector'>): ((event: string) => boolean) | undefined {
    const selector = eventType.event_owner_selector;
    if (selector === undefined) return undefined;
    const may = (value: string) => this.plugin.matches(subject, { data_type: selector.name, value });
    if (selector.type === 'static') return may(selector.value) ? undefined : () => false;
    return (event) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(event);
      } catch {
        return false;
      }
      const owner = eventOwner(selector, parsed);
      return owner !== undefined && may(owner);
    };
  }

  /**
   * @param operation what the feature disables, as the start of a sentence (`Event type creation`)
   * @throws BrokerError FEATURE_DISABLED (403) when `feature` is on (it disables the operation)
   */
  requireFeatureOff(feature: Feature, operation: string): void {
    if (this.settings.enabled(feature)) throw brokerError('FEATURE_DISABLED', { operation, feature });
  }

  /** @throws BrokerError READ_ONLY (503) while `disable_db_write_operations` is on */
  requireWritable(): void {
    if (this.settings.enabled('disable_db_write_operations')) {
      throw brokerError('READ_ONLY');
    }
  }

  enabled(feature: Feature): boolean {
    return this.settings.enabled(feature);
  }

  /**
   * Attributes the plugin refuses (docs/security.md "The plugin"), as 422 detail lines.
   * @param sections field name prefix → attribute list, e.g. `authorization.readers`
   */
  attributeProblems(sections: Readonly<Record<string, readonly AuthorizationAttribute[] | undefined>>): string[] {
    const problems: string[] = [];
    for (const [field, list] of Object.entries(sections)) {
      (list ?? []).forEach((attribute, i) => {
        const problem = this.plugin.validate(attribute);
        if (problem !== undefined) problems.push(`Field "${field}[${i}]": ${problem}`);
      });
    }
    return problems;
  }

  private holdsAny(subject: Subject, list: readonly AuthorizationAttribute[]): boolean {
    return list.some((attribute) => this.plugin.matches(subject, attribute));
  }
}

function upper(operation: EventTypeOperation): 'ADMIN' | 'READ' | 'WRITE' {
  return operation === 'admin' ? 'ADMIN' : operation === 'read' ? 'READ' : 'WRITE';
}
