/**
 * Pieces the TypeBox schemas of the API's records share (docs/http-api.md): closed objects, string
 * enums, timestamps, string maps and authorization attributes, and {@link DeepReadonly}, with which a
 * record's TypeScript type is derived from its schema (`DeepReadonly<Static<typeof Schema>>`) instead of
 * being written a second time. The records the domain stores and the node serves declare their schemas
 * beside their rules (src/domain/subscription/subscription.ts, …); src/http/api/wire/ re-exports them for the
 * OpenAPI document.
 */
import { Type } from '@sinclair/typebox';

/** A closed object: only the listed properties. */
export const Closed = { additionalProperties: false } as const;

/** A string enum from a constant list. */
export function StringEnum<const T extends readonly string[]>(values: T, options: { description?: string } = {}) {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });
}

/** RFC 3339 timestamp (set by the service). */
export const Timestamp = Type.String({ format: 'date-time', description: 'RFC 3339, set by the service' });

/** A string-to-string map (annotations, labels). */
export const StringMap = (description: string) => Type.Record(Type.String(), Type.String(), { description });

/** One attribute of an authorization list (docs/security.md); `*`/`*` is the wildcard. */
export const AuthorizationAttributeSchema = Type.Object({ data_type: Type.String(), value: Type.String() }, Closed);

/** A list of authorization attributes. */
export const AttributeList = Type.Array(AuthorizationAttributeSchema);

/** `T` with every property and array readonly: the type of a record as the domain hands it around. */
export type DeepReadonly<T> = T extends readonly (infer E)[] ? readonly DeepReadonly<E>[] : T extends object ? { readonly [K in keyof T]: DeepReadonly<T[K]> } : T;
