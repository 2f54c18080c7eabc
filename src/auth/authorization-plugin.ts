import type { AuthorizationAttribute } from '../domain/event-type/event-type.js';
import type { Subject } from './subject.js';

/** The wildcard attribute `{"data_type":"*","value":"*"}` (docs/security.md "Authorization: what a subject may do"): every authenticated subject matches it. */
export const WILDCARD = '*';

/**
 * Decides what authorization attributes mean (docs/security.md "Authorization: what a subject may do"). The broker
 * asks the plugin two things: whether an attribute may be stored at all (checked when an event type,
 * subscription or the admin settings are created or updated), and whether a subject holds it.
 * Replace it by passing another implementation to `createApp`; {@link DefaultAuthorizationPlugin} is
 * the one the node uses.
 */
export interface AuthorizationPlugin {
  /** The data types an attribute may have, for error messages and docs (the wildcard `*` aside). */
  readonly dataTypes: readonly string[];
  /** Why `attribute` cannot be stored (422 detail), or undefined when it is valid. */
  validate(attribute: AuthorizationAttribute): string | undefined;
  /** True when `subject` holds `attribute` (the wildcard `*`/`*` matches every subject). */
  matches(subject: Subject, attribute: AuthorizationAttribute): boolean;
}

/**
 * The default plugin: an attribute `{data_type, value}` is held by a subject whose attributes (mapped
 * from token claims by `auth.attributeClaims`) list `value` under `data_type`; `*`/`*` is held by
 * everyone. Known data types are the configured claim mapping's keys (default `user`, `service`,
 * `team`); any other data type is refused when stored. A `*` value on its own matches any value of that
 * data type; a `*` data type is only valid with a `*` value.
 */
export class DefaultAuthorizationPlugin implements AuthorizationPlugin {
  readonly dataTypes: readonly string[];

  /** @param dataTypes the accepted data types (the keys of `auth.attributeClaims`) */
  constructor(dataTypes: readonly string[]) {
    this.dataTypes = [...dataTypes];
  }

  validate(attribute: AuthorizationAttribute): string | undefined {
    if (attribute.data_type === WILDCARD) {
      return attribute.value === WILDCARD ? undefined : `the wildcard data type "*" only goes with the value "*"`;
    }
    if (!this.dataTypes.includes(attribute.data_type)) {
      return `unknown authorization data type "${attribute.data_type}"; known: ${[...this.dataTypes, WILDCARD].join(', ')}`;
    }
    return undefined;
  }

  matches(subject: Subject, attribute: AuthorizationAttribute): boolean {
    if (attribute.data_type === WILDCARD) return attribute.value === WILDCARD;
    const values = subject.attributes.get(attribute.data_type);
    if (values === undefined || values.length === 0) return false;
    return attribute.value === WILDCARD || values.includes(attribute.value);
  }
}
