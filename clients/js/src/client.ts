// The device state machine of the protocol (docs/protocol.md §2, §4, §5).

import { Hmac } from "./sha256.js";
import { KeyedStream, concat, cumulativeMasses, deriveMessage, encodePart } from "./keyed.js";

/** The protocol version this client speaks (docs/protocol.md); a bundle of another is refused. */
export const PROTOCOL_VERSION = 2;
const DOMAIN = "longitudinal-device";
const DISTANCE = ["rr", "futurerand", "calibrated", "threshold"];

/** What a device receives: the public parameters and the exact law it samples (§1). */
export interface Bundle {
  protocol: number;
  param_id: string;
  horizon: number;
  padded_horizon: number;
  max_changes: number;
  /** The randomizer the devices run: "erlingsson" or a distance randomizer. */
  method: string;
  per_order_sparsity: boolean;
  /** Distance randomizers: budget k_h → integer weights w(0..k_h) as decimal strings. */
  laws: Record<string, string[]>;
  /** Erlingsson et al.: the exact fraction γ = "s/t". */
  gamma: string | null;
}

/** One report as the device emits it; the uploader adds ``device``. */
export interface Report {
  param_id: string;
  order: number;
  interval: number;
  bit: number;
}

/** The enrolment message. */
export interface EnrolmentMessage {
  protocol_version: number;
  param_id: string;
  order: number;
}

/** Persistent state (holds the device secret: keep it on the device). */
export interface ClientState {
  secret: string;
  t: number;
  prev: number;
  last_x: number;
  raw_x: number;
  changes_used: number;
  frozen: number;
  kept: [number, number] | null;
  used: number;
  /** Slots already sent for intervals still to come, ``[interval, bit]`` (see ``noteSent``). */
  ahead: [number, number][];
  /** Intervals whose report was withheld: another bit was already sent for them. */
  withheld: number[];
}

function fail(what: string): never {
  throw new RangeError(what);
}

function isInt(x: unknown, lo: number, hi: number): x is number {
  return typeof x === "number" && Number.isSafeInteger(x) && x >= lo && x <= hi;
}

/** Check a bundle's fields (one RangeError naming the first bad field). */
export function checkBundle(b: Bundle): Bundle {
  if (b.protocol !== PROTOCOL_VERSION) {
    const fix = typeof b.protocol === "number" && b.protocol > PROTOCOL_VERSION
      ? "this client is outdated: update it" : "the bundle is outdated: fetch the study's bundle again";
    fail(`protocol of the bundle must be ${PROTOCOL_VERSION}, the supported protocol version (${fix}); got ${b.protocol}.`);
  }
  if (typeof b.param_id !== "string" || !b.param_id) fail("param_id of the bundle must be a non-empty string.");
  if (!isInt(b.horizon, 1, 1 << 24)) fail(`horizon of the bundle must be in 1..2^24; got ${b.horizon}.`);
  const d = 2 ** Math.ceil(Math.log2(b.horizon));
  if (b.padded_horizon !== d) fail(`padded_horizon of the bundle must be ${d}; got ${b.padded_horizon}.`);
  if (!isInt(b.max_changes, 1, 4096)) fail(`max_changes of the bundle must be in 1..4096; got ${b.max_changes}.`);
  if (b.method === "erlingsson") {
    if (typeof b.gamma !== "string" || !/^[1-9][0-9]*\/[1-9][0-9]*$/.test(b.gamma)
      || !b.gamma.split("/").every((x) => Number.isSafeInteger(Number(x)))) {
      fail("gamma of the bundle must be \"s/t\" with integers below 2^53.");
    }
  } else if (!DISTANCE.includes(b.method)) {
    fail(`method of the bundle must be one of erlingsson, ${DISTANCE.join(", ")}; got ${b.method}.`);
  }
  return b;
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (x) => x.toString(16).padStart(2, "0")).join("");
}

function unhex(text: string): Uint8Array {
  if (!/^[0-9a-f]{64}$/.test(text)) fail("secret must be 64 lower-case hex digits.");
  return Uint8Array.from(text.match(/../g)!, (x) => parseInt(x, 16));
}

/** One device: ``observe(t, x)`` for t = 1, 2, …; send what it returns. */
export class DeviceClient {
  readonly bundle: Bundle;
  readonly order: number;
  /** Erlingsson et al.: index of the kept change (0 otherwise). */
  readonly r: number;
  /** Distance randomizers: the pre-computed vector (empty otherwise). */
  readonly v: Int8Array;
  private readonly mac: Hmac;
  private readonly prefix: Uint8Array;
  private readonly heads = new Map<string, [[Uint32Array, Uint8Array], number]>();
  private readonly gamma: [number, number];
  private state: ClientState;

  /** A device for ``bundle``; a new secret from ``crypto.getRandomValues`` unless given. */
  constructor(bundle: Bundle, secret?: Uint8Array) {
    this.bundle = checkBundle(bundle);
    if (secret === undefined) {
      secret = globalThis.crypto.getRandomValues(new Uint8Array(32));
    } else if (secret.length !== 32) {
      fail(`secret must be 32 bytes; got ${secret.length}.`);
    }
    this.mac = new Hmac(secret);
    this.prefix = deriveMessage([DOMAIN, bundle.param_id]);
    const d = bundle.padded_horizon, k = bundle.max_changes;
    this.order = this.stream("order").uniformBelow(Math.log2(d) + 1);
    const erl = bundle.method === "erlingsson";
    this.r = erl ? 1 + this.stream("kept-change").uniformBelow(k) : 0;
    const [s, t] = erl ? bundle.gamma!.split("/").map(Number) : [1, 1];
    this.gamma = [s, t];
    if (erl) {
      this.v = new Int8Array(0);
    } else {
      const kh = bundle.per_order_sparsity ? Math.min(k, d >> this.order) : k;
      const weights = bundle.laws[String(kh)];
      if (!Array.isArray(weights) || weights.length !== kh + 1) fail(`laws of the bundle must hold ${kh + 1} weights for budget ${kh}.`);
      this.v = this.stream("vector").distanceVector(cumulativeMasses(weights.map(BigInt)), kh);
    }
    this.state = { secret: hex(secret), t: 0, prev: 0, last_x: 0, raw_x: 0, changes_used: 0, frozen: 0, kept: null, used: 0, ahead: [], withheld: [] };
  }

  /** The keyed stream of (purpose[, slot]) (§3). */
  stream(purpose: string, slot?: number): KeyedStream {
    let head = this.heads.get(purpose);
    if (head === undefined) {
      const bytes = concat([this.prefix, encodePart(purpose)]);
      head = [this.mac.absorb(bytes), bytes.length];
      this.heads.set(purpose, head);
    }
    const rest = slot === undefined ? new Uint8Array(0) : encodePart(slot);
    return new KeyedStream(this.mac.digestAfter(head[0], head[1], rest));
  }

  /** Last period seen. */
  get t(): number { return this.state.t; }

  /** A copy of the persistent state (with the secret). */
  toState(): ClientState {
    const st = this.state;
    return { ...st, kept: st.kept && [...st.kept] as [number, number],
      ahead: st.ahead.map(([j, b]) => [j, b] as [number, number]), withheld: [...st.withheld] };
  }

  /** Intervals whose report was withheld (docs/protocol.md §7). */
  get withheld(): number[] { return [...this.state.withheld]; }

  /**
   * Tell the device that reports of it were already sent, as ``[interval, bit]`` pairs of its
   * order (the slots the service holds for it, say). A report computed later for such an
   * interval is returned when its bit is the one sent and **withheld** otherwise (not returned;
   * its interval goes to ``withheld``): two different bits for one slot would show that the
   * device's input changed (a device restored from an older state and fed other input).
   * Intervals already passed are ignored. Throws a RangeError on an interval out of range, a
   * bit not 0/1, or two bits for one interval.
   */
  noteSent(slots: Iterable<[number, number]>): void {
    const limit = this.bundle.padded_horizon / 2 ** this.order;
    const done = Math.floor(this.state.t / 2 ** this.order);
    const known = new Map(this.state.ahead);
    for (const [j, bit] of slots) {
      if (!isInt(j, 1, limit)) fail(`interval of noteSent must be an integer in 1..${limit}; got ${j}.`);
      if (bit !== 0 && bit !== 1) fail(`bit of noteSent must be 0 or 1; got ${bit}.`);
      if (j <= done) continue;
      if ((known.get(j) ?? bit) !== bit) fail(`slots of noteSent must hold one bit per interval; got two for interval ${j}.`);
      known.set(j, bit);
    }
    this.state.ahead = [...known.entries()].sort((a, b) => a[0] - b[0]);
  }

  /** Rebuild a device from ``toState()``: same secret, so the same draws. */
  static fromState(bundle: Bundle, state: ClientState): DeviceClient {
    const c = new DeviceClient(bundle, unhex(state.secret));
    const d = bundle.padded_horizon, k = bundle.max_changes;
    if (!isInt(state.t, 0, d)) fail(`t of the state must be in 0..${d}.`);
    for (const f of ["prev", "last_x", "raw_x"] as const) if (!isInt(state[f], 0, 1)) fail(`${f} of the state must be 0 or 1.`);
    if (!isInt(state.changes_used, 0, Math.min(k, state.t))) fail("changes_used of the state is out of range.");
    if (!isInt(state.frozen, 0, state.t)) fail("frozen of the state is out of range.");
    if (!isInt(state.used, 0, Math.min(state.changes_used, c.v.length || 1))) fail("used of the state is out of range.");
    const kept = state.kept;
    if (kept !== null && !(c.r > 0 && Array.isArray(kept) && isInt(kept[0], 1, state.t) && (kept[1] === 1 || kept[1] === -1))) fail("kept of the state must be null or [time, sign].");
    const limit = d / 2 ** c.order, done = Math.floor(state.t / 2 ** c.order);
    const ahead = state.ahead, withheld = state.withheld;
    if (!Array.isArray(ahead) || !ahead.every((a) => Array.isArray(a) && a.length === 2 && isInt(a[0], done + 1, limit) && (a[1] === 0 || a[1] === 1))
      || new Set(ahead.map((a) => a[0])).size !== ahead.length) fail("ahead of the state must list [interval, bit] of intervals still to come.");
    if (!Array.isArray(withheld) || !withheld.every((j) => isInt(j, 1, done))) fail("withheld of the state must list intervals already passed.");
    c.state = { ...state, kept: kept && [kept[0], kept[1]], ahead: ahead.map(([j, b]) => [j, b] as [number, number]), withheld: [...withheld] };
    return c;
  }

  /** The enrolment message. */
  enrolment(): EnrolmentMessage {
    return { protocol_version: PROTOCOL_VERSION, param_id: this.bundle.param_id, order: this.order };
  }

  /** Read ``X[t] = x`` for the next period ``t``; the reports due (all remaining ones at the last period). */
  observe(t: number, x: number): Report[] {
    const st = this.state;
    if (x !== 0 && x !== 1) fail(`x of observe must be 0 or 1; got ${x}.`);
    if (st.t >= this.bundle.horizon) fail("observe called after the last period of the horizon.");
    if (t !== st.t + 1) fail(`t of observe must be the next period ${st.t + 1}; got ${t}.`);
    const out: Report[] = [];
    const rep = this.advance(x);
    if (rep) out.push(rep);
    if (st.t === this.bundle.horizon) out.push(...this.finish());
    return out;
  }

  /** Pad with the last value up to the power-of-two horizon; the reports due. */
  finish(): Report[] {
    const out: Report[] = [];
    while (this.state.t < this.bundle.padded_horizon) {
      const rep = this.advance(this.state.raw_x);
      if (rep) out.push(rep);
    }
    return out;
  }

  private advance(x: number): Report | null {
    const st = this.state, b = this.bundle, h = this.order;
    const t = ++st.t;
    if (x !== st.raw_x) {
      st.raw_x = x;
      if (st.changes_used < b.max_changes) {
        st.changes_used += 1;
        st.last_x = x;
        if (this.r > 0 && st.changes_used === this.r) st.kept = [t, x === 1 ? 1 : -1];
      } else {
        st.frozen += 1;
      }
    }
    const span = 2 ** h;
    if (t % span !== 0) return null;
    const j = t / span;
    let s: number;
    if (this.r > 0) {
      const kept = st.kept;
      s = kept !== null && t - span < kept[0] && kept[0] <= t ? kept[1] : 0;
    } else {
      s = st.last_x - st.prev;
    }
    st.prev = st.last_x;
    let y: number;
    if (s === 0) {
      y = this.stream("coin", j).coin();
    } else {
      st.used += 1;
      y = this.r > 0 ? (this.stream("keep", j).keep(this.gamma[0], this.gamma[1]) ? s : -s)
        : this.v[st.used - 1] * s;
    }
    const bit = (y + 1) / 2;
    const at = st.ahead.findIndex((a) => a[0] === j);
    if (at >= 0) {
      const sent = st.ahead[at][1];
      st.ahead.splice(at, 1);
      if (sent !== bit) { st.withheld.push(j); return null; } // another bit was sent: withhold
    }
    return { param_id: b.param_id, order: h, interval: j, bit };
  }
}
