/**
 * Reading the `RateLimit-Policy` and `RateLimit` response headers of a broker's publish answers
 * (docs/publishing.md "Quotas"; the IETF draft "RateLimit header fields for HTTP",
 * draft-ietf-httpapi-ratelimit-headers), and pacing a producer by them so that it stays under its quota
 * without being refused. The broker writes them in src/domain/batch/rate-limit-headers.ts. Pure: no I/O.
 */

/** One policy of a `RateLimit` header as read by a client: what is left (`r`) and the seconds until it is full (`t`). */
export interface RateLimitReading {
  readonly policy: string;
  readonly remaining: number;
  readonly resetSeconds: number;
}

/** One policy of a `RateLimit-Policy` header as read by a client: its quota (`q`), unit (`qu`) and window (`w`, seconds). */
export interface RateLimitPolicyReading {
  readonly policy: string;
  readonly quota: number;
  readonly unit: string;
  readonly windowSeconds: number;
}

/** The members of a structured-field List of Items with their parameters (the subset these headers use: String items, Integer or String parameters). */
function listItems(header: string | undefined): { readonly item: string; readonly params: ReadonlyMap<string, string> }[] {
  if (header === undefined) return [];
  const members: { item: string; params: Map<string, string> }[] = [];
  for (const member of header.split(/,(?=(?:[^"]*"[^"]*")*[^"]*$)/)) {
    const [head, ...rest] = member.trim().split(/;(?=(?:[^"]*"[^"]*")*[^"]*$)/);
    if (head === undefined || head === '') continue;
    const params = new Map<string, string>();
    for (const param of rest) {
      const eq = param.indexOf('=');
      if (eq < 0) params.set(param.trim(), '?1');
      else params.set(param.slice(0, eq).trim(), param.slice(eq + 1).trim().replace(/^"(.*)"$/, '$1'));
    }
    members.push({ item: head.trim().replace(/^"(.*)"$/, '$1'), params });
  }
  return members;
}

/** Reads a `RateLimit` header; members without a numeric `r` are left out. */
export function readRateLimit(header: string | undefined): RateLimitReading[] {
  return listItems(header).flatMap(({ item, params }) => {
    const remaining = Number(params.get('r'));
    const reset = Number(params.get('t') ?? 0);
    return Number.isFinite(remaining) && Number.isFinite(reset) ? [{ policy: item, remaining, resetSeconds: reset }] : [];
  });
}

/** Reads a `RateLimit-Policy` header; members without a numeric `q` are left out (`qu` defaults to `requests`, `w` to 1). */
export function readRateLimitPolicy(header: string | undefined): RateLimitPolicyReading[] {
  return listItems(header).flatMap(({ item, params }) => {
    const quota = Number(params.get('q'));
    const windowSeconds = Number(params.get('w') ?? 1);
    return Number.isFinite(quota) && Number.isFinite(windowSeconds) ? [{ policy: item, quota, unit: params.get('qu') ?? 'requests', windowSeconds }] : [];
  });
}

/** What the next request would take of each kind of quota: its events and its body's bytes. */
export interface RequestNeed {
  readonly events: number;
  readonly contentBytes: number;
}

/**
 * How long a client that follows the RateLimit headers waits before its next request (docs/publishing.md
 * "Quotas"; `broker publish` paces itself by it). For each policy of the last answer: nothing when what is
 * left (`r`) covers the request (at most a window's quota of it: a larger request waits for a full
 * bucket and goes alone); when something is left, the time the policy's rate takes to refill the
 * difference; when nothing is left (a bucket in debt reads as 0), the `t` seconds until it is full again.
 * The longest wait wins, less the time already passed since that answer.
 * @param policyHeader the last answer's `RateLimit-Policy`
 * @param rateLimitHeader the last answer's `RateLimit`
 * @param need what the next request takes
 * @param sinceAnswerMs ms since that answer came
 * @returns ms to wait (0: send now)
 */
export function pacingDelayMs(policyHeader: string | undefined, rateLimitHeader: string | undefined, need: RequestNeed, sinceAnswerMs: number): number {
  const policies = new Map(readRateLimitPolicy(policyHeader).map((p) => [p.policy, p]));
  let waitMs = 0;
  for (const reading of readRateLimit(rateLimitHeader)) {
    const policy = policies.get(reading.policy);
    if (policy === undefined || policy.quota <= 0) continue;
    const needed = Math.min(policy.quota, policy.unit === 'events' ? need.events : policy.unit === 'content-bytes' ? need.contentBytes : 1);
    if (reading.remaining >= needed) continue;
    const refillMs = reading.remaining > 0 ? ((needed - reading.remaining) / policy.quota) * policy.windowSeconds * 1000 : reading.resetSeconds * 1000;
    waitMs = Math.max(waitMs, refillMs);
  }
  return Math.max(0, Math.ceil(waitMs - sinceAnswerMs));
}
