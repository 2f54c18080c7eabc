/**
 * The media type rule of request bodies: every body is JSON, and a web page cannot send one cross-site
 * without a CORS preflight (docs/security.md "Cross-site requests"). Pure, no I/O; the HTTP server applies it to every POST, PUT, PATCH and DELETE
 * before authentication, so a refused request does nothing.
 */

const JSON_MEDIA_TYPE = /^application\/(?:[a-z0-9!#$&^_.+-]+\+)?json$/;

/**
 * Why a state-changing request's body is not declared as JSON (no cross-site writes), or
 * undefined when it is. A `Content-Type`, when sent, must be `application/json` or an
 * `application/<x>+json` type (any case), with any parameters but a `charset` other than UTF-8; without
 * one, the request must have no body (no `Content-Length` above 0, no chunked body), as a DELETE or a
 * body-less POST has. So the bodies a web page can send cross-site without a CORS preflight
 * (`text/plain`, `application/x-www-form-urlencoded`, `multipart/form-data`) are refused, also when empty.
 * @param headers the request headers (lower-case names)
 * @returns the detail of the 415 problem, or undefined
 */
export function bodyMediaTypeProblem(headers: Readonly<Record<string, string | undefined>>): string | undefined {
  const contentType = headers['content-type'];
  if (contentType === undefined) {
    const hasBody = headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? '0') > 0;
    return hasBody ? 'the request body must be declared as JSON: send Content-Type: application/json' : undefined;
  }
  const [essence = '', ...parameters] = contentType.split(';');
  const refused = `Content-Type ${JSON.stringify(contentType.slice(0, 100))} is not accepted: request bodies must be JSON (application/json or a +json type)`;
  if (!JSON_MEDIA_TYPE.test(essence.trim().toLowerCase())) return refused;
  for (const parameter of parameters) {
    const [name = '', value = ''] = parameter.split('=');
    const charset = value.trim().replace(/^"(.*)"$/, '$1').toLowerCase();
    if (name.trim().toLowerCase() === 'charset' && charset !== 'utf-8' && charset !== 'utf8') return `${refused}, in UTF-8`;
  }
  return undefined;
}
