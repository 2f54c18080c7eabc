import { LRUCache } from 'lru-cache';

/**
 * A bounded map from token text to a value with its own time to live, on lru-cache: at most
 * `maxEntries` entries (the least recently used goes first), an entry is never returned after its
 * expiry. Shared by the `jwt` and `tokeninfo` authenticators (config `caches.tokenEntries`).
 */
export class TokenCache<V> {
  /** Values with their expiry (epoch ms): lru-cache's own ttl evicts them, the exact expiry decides a read. */
  private readonly entries: LRUCache<string, { readonly value: V; readonly expiresAt: number }> | undefined;

  /**
   * @param maxEntries most entries kept (0 = nothing is kept)
   * @param now the clock, in epoch milliseconds (tests drive it)
   */
  constructor(
    maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {
    this.entries = maxEntries > 0 ? new LRUCache({ max: maxEntries, perf: { now }, ttlResolution: 0 }) : undefined;
  }

  /** @returns the value stored for `key` unless it has expired */
  get(key: string): V | undefined {
    const entry = this.entries?.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.entries?.delete(key);
      return undefined;
    }
    return entry.value;
  }

  /** Stores `value` for `ttlMs` milliseconds (nothing is stored when `ttlMs` ≤ 0). */
  set(key: string, value: V, ttlMs: number): void {
    if (ttlMs <= 0) return;
    this.entries?.set(key, { value, expiresAt: this.now() + ttlMs }, { ttl: ttlMs });
  }

  /** Entries held, expired ones not yet dropped included. */
  get size(): number {
    return this.entries?.size ?? 0;
  }

  clear(): void {
    this.entries?.clear();
  }
}
