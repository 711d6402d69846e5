// Transport of the protocol (docs/protocol.md §6): enrolment and report batches over HTTP with
// retries, exponential backoff with full jitter, and Retry-After honoured.

/** Statuses worth a retry (the same batch later); any other non-2xx refuses it for good. */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([408, 425, 429, 500, 502, 503, 504]);

export interface UploaderOptions {
  /** Base URL of the collection service, e.g. ``https://collect.example.org``. */
  server: string;
  /** Study id. */
  study: string;
  /** The study's enrolment secret (docs/protocol.md), sent as the bearer token of the enrolment
   * request only; omit it for a study created with ``enrolment: "open"``. Never stored. */
  enrolmentSecret?: string;
  /** Attempts per request (default 6). */
  retries?: number;
  /** First backoff bound in seconds (default 0.25), doubled per attempt up to ``maxBackoff`` (30). */
  backoff?: number;
  maxBackoff?: number;
  /** Reports per batch (default 256, at most 4096). */
  maxBatch?: number;
  /** Injected for tests and other runtimes; default ``globalThis.fetch``. */
  fetch?: typeof globalThis.fetch;
  /** Injected for tests; default a timer. */
  sleep?: (seconds: number) => Promise<void>;
  /**
   * Called before each wait between two attempts of a request (a busy or rate-limited server,
   * or a transport error), so that the application can say it is waiting and for how long:
   * an enrolment refused by the service's enrolment rate limit (429) waits as long as its
   * ``Retry-After`` says, and ``error`` carries the service's one-line reason (the limit).
   */
  onWait?: (wait: Wait) => void;
}

/** One wait of the uploader between two attempts of a request. */
export interface Wait {
  /** Path of the request (``/v1/studies/{study}/devices``, ``…/reports``). */
  path: string;
  /** Attempt that failed (1 for the first). */
  attempt: number;
  /** Seconds the uploader now waits before the next attempt. */
  seconds: number;
  /** HTTP status of the failed attempt; null for a transport error. */
  status: number | null;
  /** The service's one-line error, when it sent one. */
  error: string | null;
}

/** Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date), or null. */
export function retryAfterSeconds(value: string | null, now: number = Date.now()): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^[0-9]+$/.test(text)) return Number(text);
  const when = Date.parse(text);
  return Number.isNaN(when) ? null : Math.max(0, (when - now) / 1000);
}

/** The ``error`` of a JSON error body, else its first 300 characters (null when unreadable). */
async function errorLine(resp: Response): Promise<string | null> {
  try {
    const text = await resp.text();
    try {
      const parsed = JSON.parse(text) as { error?: unknown };
      if (typeof parsed.error === "string") return parsed.error;
    } catch { /* not JSON */ }
    return text.slice(0, 300);
  } catch {
    return null;
  }
}

/** A uniform number in [0, 1) for backoff jitter (not a privacy path). */
function jitter(): number {
  return globalThis.crypto.getRandomValues(new Uint32Array(1))[0] / 2 ** 32;
}

/** HTTP with retries; ``null`` when the server stayed unreachable or busy. */
export class Uploader {
  readonly server: string;
  readonly study: string;
  readonly enrolmentSecret: string | undefined;
  readonly retries: number;
  readonly backoff: number;
  readonly maxBackoff: number;
  readonly maxBatch: number;
  private readonly fetchFn: typeof globalThis.fetch;
  private readonly sleep: (seconds: number) => Promise<void>;
  private readonly onWait: ((wait: Wait) => void) | undefined;

  constructor(o: UploaderOptions) {
    this.server = o.server.replace(/\/+$/, "");
    this.study = o.study;
    this.enrolmentSecret = o.enrolmentSecret;
    this.retries = o.retries ?? 6;
    this.backoff = o.backoff ?? 0.25;
    this.maxBackoff = o.maxBackoff ?? 30;
    this.maxBatch = Math.min(o.maxBatch ?? 256, 4096);
    this.fetchFn = o.fetch ?? globalThis.fetch.bind(globalThis);
    this.sleep = o.sleep ?? ((s) => new Promise((done) => setTimeout(done, s * 1000)));
    this.onWait = o.onWait;
  }

  /** Send ``body`` as JSON; retry transport errors and RETRY_STATUSES. */
  async request(method: string, path: string, body?: unknown, token?: string): Promise<Response | null> {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (token) headers.authorization = `Bearer ${token}`;
    let wait = this.backoff;
    for (let attempt = 0; attempt < this.retries; attempt++) {
      let after: number | null = null, status: number | null = null, error: string | null = null;
      try {
        const resp = await this.fetchFn(this.server + path, {
          method, headers, body: body === undefined ? undefined : JSON.stringify(body),
        });
        if (!RETRY_STATUSES.has(resp.status)) return resp;
        status = resp.status;
        after = retryAfterSeconds(resp.headers.get("retry-after"));
        error = await errorLine(resp);
      } catch {
        // a transport error: retried like a busy server
      }
      if (attempt + 1 === this.retries) break;
      const seconds = Math.min(Math.max(wait * jitter(), after ?? 0), this.maxBackoff);
      this.onWait?.({ path, attempt: attempt + 1, seconds, status, error });
      await this.sleep(seconds);
      wait = Math.min(2 * wait, this.maxBackoff);
    }
    return null;
  }
}
