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
