// A small HTTP helper over `fetch()`, which componentize-js implements on `wasi:http`: every
// request goes through the host's allow-list.
//
//   import { http } from 'orchard-sdk';
//   const r = await http.get(url, { auth: [user, password] });
//   if (r.status === 404) return undefined;
//   const data = r.raiseForStatus('get user').json();
//
// `fetch()` rejects without saying why when there is no response (connection refused, or the
// host's allow-list denied the destination: the host logs which); that becomes a
// `TransportError`, a `Transient` failure.

import { InvalidConfiguration, Transient } from './errors.js';

/** Connecting, sending or receiving failed (or the host's allow-list denied the request). */
export class TransportError extends Transient {
  get name() {
    return 'TransportError';
  }
}

/** The URL could not be understood. */
export class InvalidUrl extends InvalidConfiguration {
  get name() {
    return 'InvalidUrl';
  }
}

/** One URL path segment, percent-encoded (`/` too). */
export function quote(segment) {
  return encodeURIComponent(segment);
}

/** The value of an `authorization` header for HTTP basic authentication. */
export function basicAuth(user, password) {
  const bytes = new TextEncoder().encode(`${user}:${password}`);
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return `Basic ${btoa(binary)}`;
}

/** A complete response. */
export class Response {
  constructor(status, headers, body) {
    /** @type {number} */
    this.status = status;
    /** @type {Array<[string, string]>} */
    this.headers = headers;
    /** @type {Uint8Array} */
    this.body = body;
  }

  /** 2xx. */
  get ok() {
    return this.status >= 200 && this.status < 300;
  }

  /** The first value of a header (case-insensitive). */
  header(name) {
    const n = name.toLowerCase();
    const found = this.headers.find(([k]) => k.toLowerCase() === n);
    return found ? found[1] : undefined;
  }

  /** The body as text. */
  text() {
    return new TextDecoder().decode(this.body);
  }

  /** The body parsed as JSON; a `Transient` failure when it is not JSON. */
  json() {
    try {
      return JSON.parse(this.text());
    } catch (e) {
      throw new Transient(`response is not JSON: ${e.message}: ${this.text().slice(0, 200)}`);
    }
  }

  /**
   * The response if 2xx, else a failure carrying status and body: 4xx other than 404, 408,
   * 409 and 429 are `InvalidConfiguration` (the request itself is wrong), the rest `Transient`.
   */
  raiseForStatus(what) {
    if (this.ok) return this;
    const message = `${what}: HTTP ${this.status}: ${this.text().trim().slice(0, 1000)}`;
    if (this.status >= 400 && this.status < 500 && ![404, 408, 409, 429].includes(this.status)) {
      throw new InvalidConfiguration(message);
    }
    throw new Transient(message);
  }
}

/**
 * Sends a request and reads the whole response. `json` sets a JSON body and its content type;
 * `auth` is `[user, password]` for basic authentication. Any HTTP status is a `Response`; no
 * response at all throws a `TransportError`.
 *
 * @param {string} method
 * @param {string} url
 * @param {{headers?: Record<string, string>, body?: string | Uint8Array, json?: unknown,
 *          auth?: [string, string]}} [options]
 * @returns {Promise<Response>}
 */
export async function request(method, url, options = {}) {
  if (!/^https?:\/\/[^/]+/.test(url)) throw new InvalidUrl(`invalid URL ${JSON.stringify(url)}`);
  const headers = { ...(options.headers || {}) };
  let body = options.body;
  if (options.json !== undefined) {
    body = JSON.stringify(options.json);
    headers['content-type'] = 'application/json';
  }
  if (options.auth) headers.authorization = basicAuth(options.auth[0], options.auth[1]);
  method = method.toUpperCase();
  let response;
  let bytes;
  try {
    response = await fetch(url, { method, headers, body });
    bytes = new Uint8Array(await response.arrayBuffer());
  } catch (e) {
    const reason = e && e.message ? e.message : String(e);
    throw new TransportError(
      `HTTP transport error: ${method} ${url}: ${reason} (connection failed, or denied by the host's allow-list: see the host's log)`,
    );
  }
  return new Response(response.status, [...response.headers.entries()], bytes);
}

export const get = (url, options) => request('GET', url, options);
export const post = (url, options) => request('POST', url, options);
export const put = (url, options) => request('PUT', url, options);
export const patch = (url, options) => request('PATCH', url, options);
const del = (url, options) => request('DELETE', url, options);
export { del as delete };
