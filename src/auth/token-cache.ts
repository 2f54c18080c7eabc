/**
 * A bounded map from token text to a value with an expiry time, evicting the oldest insertion when
 * full. Expired entries are dropped when read (or evicted by age of insertion), so memory stays at most
 * `maxEntries` entries. Shared by the `jwt` and `tokeninfo` authenticators.
 */
export class TokenCache<V> {
  private readonly entries = new Map<string, { readonly value: V; readonly expiresAt: number }>();

  /**
   * @param maxEntries most entries kept (0 = nothing is kept)
   * @param now the clock, in epoch milliseconds
   */
  constructor(
    private readonly maxEntries: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** @returns the value stored for `key` unless it has expired */
  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= this.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  /**
   * Stores `value` for `ttlMs` milliseconds (nothing is stored when `ttlMs` ≤ 0), evicting the oldest
   * entries when the cache is full.
   */
  set(key: string, value: V, ttlMs: number): void {
    if (ttlMs <= 0 || this.maxEntries <= 0) return;
    this.entries.delete(key);
    while (this.entries.size >= this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (oldest.done === true) break;
      this.entries.delete(oldest.value);
    }
    this.entries.set(key, { value, expiresAt: this.now() + ttlMs });
  }

  /** Entries held, expired ones not yet dropped included. */
  get size(): number {
    return this.entries.size;
  }

  clear(): void {
    this.entries.clear();
  }
}
