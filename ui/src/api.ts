// The console's HTTP client: every call carries the bearer token the user typed (kept in this tab's
// sessionStorage only), and failures become ApiErrors holding the RFC 7807 problem.

/** An RFC 7807 problem as the broker answers it. */
export interface Problem {
  readonly title?: string;
  readonly status?: number;
  readonly detail?: string;
}

/** A non-2xx answer. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: Problem | undefined,
    readonly body: unknown,
  ) {
    super(problem ? `${problem.title ?? 'Error'} (${String(status)}): ${problem.detail ?? ''}` : `HTTP ${String(status)}`);
  }
}

/** A whole answer: status, headers and the body parsed as JSON (undefined when empty or not JSON). */
export interface Answer<T> {
  readonly status: number;
  readonly headers: Headers;
  readonly body: T;
}

const TOKEN_KEY = 'broker-console-token';
let unauthorized: (problem: Problem | undefined) => void = () => undefined;

/** The bearer token of this tab's session, if one was entered. */
export function token(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Keeps `value` as this tab's token (sessionStorage: gone when the tab closes), or forgets it (null). */
export function setToken(value: string | null): void {
  if (value === null || value === '') sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, value);
}

/** Registers what happens when the broker answers 401 (the console asks for a token again). */
export function onUnauthorized(listener: (problem: Problem | undefined) => void): void {
  unauthorized = listener;
}

/** The request headers every call carries: the bearer token, and a JSON content type for bodies. */
export function authHeaders(extra: Record<string, string> = {}): Record<string, string> {
  const bearer = token();
  return { ...(bearer === null ? {} : { Authorization: `Bearer ${bearer}` }), ...extra };
}

/**
 * Sends a request and reads the whole answer, whatever its status (a 401 also tells the
 * {@link onUnauthorized} listener). `body` is sent as JSON with `Content-Type: application/json`, as the
 * broker requires of every POST, PUT, PATCH and DELETE body.
 */
export async function request<T = unknown>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Answer<T>> {
  const init: RequestInit = { method, headers: authHeaders(body === undefined ? headers : { 'Content-Type': 'application/json', ...headers }) };
  if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
  const res = await fetch(path, init);
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (res.status === 401) unauthorized(asProblem(parsed));
  return { status: res.status, headers: res.headers, body: parsed as T };
}

/** Like {@link request}, but a status of 400 or more throws an {@link ApiError}. @returns the parsed body */
export async function api<T = unknown>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> {
  const answer = await request<T>(method, path, body, headers);
  if (answer.status >= 400) throw new ApiError(answer.status, asProblem(answer.body), answer.body);
  return answer.body;
}

/** `value` when it looks like a problem. */
export function asProblem(value: unknown): Problem | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const v: { title?: unknown; detail?: unknown } = value;
  return typeof v.title === 'string' || typeof v.detail === 'string' ? { ...v, title: typeof v.title === 'string' ? v.title : undefined, detail: typeof v.detail === 'string' ? v.detail : undefined } : undefined;
}

/** A short text for any error: the problem's `title: detail` for ApiErrors. */
export function errorText(err: unknown): string {
  if (err instanceof ApiError) return err.problem ? `${err.problem.title ?? 'Error'} (${String(err.status)}): ${err.problem.detail ?? ''}` : `HTTP ${String(err.status)}`;
  return err instanceof Error ? err.message : String(err);
}

/** Encodes one path segment (event type names, subscription ids). */
export function seg(value: string): string {
  return encodeURIComponent(value);
}
