/**
 * Prototype-changing keys in untrusted JSON: control-plane request bodies that hold one are refused
 * with 400 (docs/security.md "Hostile input"), so no later code has to be careful when it copies them.
 */

/**
 * Path of a key (the first one met) in a parsed JSON value that would change a prototype if the value were ever
 * copied key by key into another object (`Object.assign`, a deep merge, `target[key] = value`):
 * `__proto__` anywhere, or `constructor` holding an object with a `prototype` key (the two shapes
 * Fastify's secure-json-parse refuses). `JSON.parse` itself only creates own properties, so the value
 * found is harmless as it is; request bodies of the control plane refuse it anyway (400) so no later
 * code has to be careful. Iterative, so any depth is safe.
 *
 * @returns a JSON pointer such as `#/options/__proto__`, or undefined
 */
export function findPrototypeKey(value: unknown): string | undefined {
  const pending: { node: unknown; pointer: string }[] = [{ node: value, pointer: '#' }];
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    const { node, pointer } = item;
    if (typeof node !== 'object' || node === null) continue;
    if (Array.isArray(node)) {
      node.forEach((child: unknown, i) => pending.push({ node: child, pointer: `${pointer}/${i}` }));
      continue;
    }
    for (const key of Object.keys(node)) {
      const child: unknown = (node as Record<string, unknown>)[key];
      const at = `${pointer}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`;
      if (key === '__proto__') return at;
      if (key === 'constructor' && typeof child === 'object' && child !== null && Object.hasOwn(child, 'prototype')) return `${at}/prototype`;
      pending.push({ node: child, pointer: at });
    }
  }
  return undefined;
}

/**
 * Whether JSON text may contain a key {@link findPrototypeKey} looks for: `__proto__` or `prototype`
 * spelled out, or any `\u` escape (which could spell them). Text without any of them needs no walk,
 * which keeps the check to a few native substring searches for nearly every body.
 */
export function mayHavePrototypeKey(text: string): boolean {
  return text.includes('__proto__') || text.includes('prototype') || text.includes('\\u');
}
