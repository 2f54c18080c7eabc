/**
 * The `RateLimit-Policy` and `RateLimit` response headers of the publishing quotas (docs/publishing.md
 * "Quotas"), in the structured-field syntax of the IETF draft "RateLimit header fields for HTTP"
 * (draft-ietf-httpapi-ratelimit-headers): each a List of Items, the item a String naming the policy.
 *
 *     RateLimit-Policy: "subject-events";q=2000;qu="events";w=1, "subject-bytes";q=1000000;qu="content-bytes";w=1
 *     RateLimit: "subject-events";r=1500;t=1, "subject-bytes";r=740000;t=1
 *
 * `q` the quota per window `w` (1 second: a token bucket holding one second of the quota), `qu` its unit
 * (`content-bytes` as the draft registers it; `events` ours), `r` what is left now (0 in debt), `t` the
 * whole seconds until the bucket is full again. Pure: no I/O.
 */

/** A policy's name: what a quota is set for and what it counts. */
export type RateLimitPolicyName = `${'subject' | 'application'}-${'events' | 'bytes'}`;

/** One quota that applies to a publish and the state of its bucket. */
export interface RateLimitState {
  readonly policy: RateLimitPolicyName;
  /** The quota per second. */
  readonly quota: number;
  /** What is left in its bucket (fractional; negative in debt). */
  readonly left: number;
}

/** The `qu` of a policy: the draft's registered `content-bytes`, or `events`. */
function unitOf(policy: RateLimitPolicyName): string {
  return policy.endsWith('-bytes') ? 'content-bytes' : 'events';
}

/**
 * The two headers for the quotas that apply (none when `states` is empty).
 * `r` is the whole units left (0 in debt); `t` the whole seconds until the bucket holds its quota again.
 */
export function rateLimitHeaders(states: readonly RateLimitState[]): Record<string, string> {
  if (states.length === 0) return {};
  const policy = states.map((s) => `"${s.policy}";q=${s.quota};qu="${unitOf(s.policy)}";w=1`).join(', ');
  const current = states.map((s) => `"${s.policy}";r=${Math.max(0, Math.floor(s.left))};t=${Math.max(0, Math.ceil((s.quota - s.left) / s.quota - 1e-9))}`).join(', ');
  return { 'RateLimit-Policy': policy, RateLimit: current };
}

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
