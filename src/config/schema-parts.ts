/**
 * Pieces the configuration schema is built from (TypeBox, so the config type is derived from the schema
 * rather than written beside it): closed sections, enums, positive integers, and the readonly view of a
 * derived type. They produce plain JSON Schema keywords, which ajv checks like any hand-written schema.
 */
import { Type, type TInteger, type TUnsafe } from '@sinclair/typebox';

/** A closed section: keys not in the schema are refused (`additionalProperties: false`). */
export const Closed = { additionalProperties: false } as const;

/** An integer key with a lower bound (default 1) and the description docs/configuration.md shows. */
export function positiveInt(description: string, minimum = 1): TInteger {
  return Type.Integer({ minimum, description });
}

/**
 * One of a constant list of values: JSON Schema `enum` (no `type` keyword, as the hand-written schema
 * had), typed as the union of the values.
 */
export function OneOf<const T extends readonly string[]>(values: T, options: { description?: string } = {}): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ enum: [...values], ...options });
}

/** `T` with every property and array readonly: the loaded configuration is deep-frozen. */
export type DeepReadonly<T> = T extends readonly (infer E)[] ? readonly DeepReadonly<E>[] : T extends object ? { readonly [K in keyof T]: DeepReadonly<T[K]> } : T;
