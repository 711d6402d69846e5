// A device that keeps its state and report queue in a store (docs/protocol.md §6): one save per
// period, reports deleted only after the server acknowledged them.

import { DeviceClient, type Bundle, type ClientState, type Report } from "./client.js";
import { Uploader, type UploaderOptions } from "./uploader.js";

/** Where a device keeps its persistent record (holds the secret and the token). */
export interface Store {
  load(): Promise<string | null>;
  save(text: string): Promise<void>;
}

/** A report in wire form (with the device id). */
export interface WireReport extends Report {
  device: number;
}

/** Status of a report the device withheld itself: never sent (docs/protocol.md §7). */
export const WITHHELD = 0;

/** A report the server refused for good (not resent), or one the device withheld (status
 * ``WITHHELD``, ``report`` null when its bit was never computed into a report). */
export interface Refused {
  interval: number;
  report: WireReport | null;
  status: number;
  error: string;
}

const WITHHELD_ERROR = "withheld on the device: the service holds another bit for this interval "
  + "(the device was restored from an older state and fed other input); never sent";

export interface FlushResult {
  sent: number;
  refused: number;
  pending: number;
  /** True when the server stayed unreachable or busy (the queue is kept). */
  unreachable: boolean;
}

interface Record_ {
  format: "dpfreq-device-1";
  study: string;
  param_id: string;
  client: ClientState;
  device: number | null;
  token: string | null;
  pending: Report[];
  refused: Refused[];
}

/** A store in memory (tests, or a runtime that persists by other means). */
export function memoryStore(initial: string | null = null): Store & { text: string | null } {
  const s = {
    text: initial,
    async load() { return s.text; },
    async save(text: string) { s.text = text; },
  };
  return s;
}

/** A store in ``localStorage`` (browsers) under ``key``. */
export function localStorageStore(key: string, storage: Storage = globalThis.localStorage): Store {
  return {
    async load() { return storage.getItem(key); },
    async save(text: string) { storage.setItem(key, text); },
  };
}

/** Client, queue and uploader of one device in one study. */
export class Device {
  readonly client: DeviceClient;
  readonly uploader: Uploader;
  private readonly store: Store;
  private rec: Record_;
  private synced = false;

  private constructor(client: DeviceClient, uploader: Uploader, store: Store, rec: Record_) {
    this.client = client; this.uploader = uploader; this.store = store; this.rec = rec;
  }

  /** Restore the device kept in ``store``, or create one (a new secret) and save it. */
  static async open(bundle: Bundle, store: Store, options: UploaderOptions): Promise<Device> {
    const text = await store.load();
    const uploader = new Uploader(options);
    if (text !== null) {
      const rec = JSON.parse(text) as Record_;
      if (rec.format !== "dpfreq-device-1" || rec.study !== options.study || rec.param_id !== bundle.param_id) {
        throw new RangeError("the stored device belongs to another study or parameter set.");
      }
      return new Device(DeviceClient.fromState(bundle, rec.client), uploader, store, rec);
    }
    const client = new DeviceClient(bundle);
    const rec: Record_ = { format: "dpfreq-device-1", study: options.study, param_id: bundle.param_id,
      client: client.toState(), device: null, token: null, pending: [], refused: [] };
    const dev = new Device(client, uploader, store, rec);
    await dev.save();
    return dev;
  }

  get deviceId(): number | null { return this.rec.device; }
  get pending(): number { return this.rec.pending.length; }
  get refused(): Refused[] { return [...this.rec.refused]; }

  private save(): Promise<void> {
    this.rec.client = this.client.toState();
    return this.store.save(JSON.stringify(this.rec));
  }

  /** Enrol once (the token is saved); the device id. Throws when the server refuses. */
  async enrol(): Promise<number> {
    if (this.rec.device !== null) return this.rec.device;
    const resp = await this.uploader.request("POST", `/v1/studies/${this.uploader.study}/devices`,
      this.client.enrolment(), this.uploader.enrolmentSecret);
    if (resp === null) throw new Error("enrolment failed: the server stayed unreachable or busy.");
    if (resp.status !== 201) throw new Error(`enrolment refused (${resp.status}): ${await resp.text()}`);
    const out = await resp.json() as { device: number; token: string };
    this.rec.device = out.device;
    this.rec.token = out.token;
    await this.save();
    return out.device;
  }

  /** Read ``X[t] = x``; queue the reports due and save state and queue together. A report
   * the client withholds (its slot was sent with another bit, see ``sync``) is kept aside as
   * refused with status ``WITHHELD``. */
  async observe(t: number, x: number): Promise<Report[]> {
    const before = this.client.withheld.length;
    const reps = this.client.observe(t, x);
    for (const j of this.client.withheld.slice(before)) {
      this.rec.refused.push({ interval: j, report: null, status: WITHHELD, error: WITHHELD_ERROR });
    }
    const queued = new Map(this.rec.pending.map((r) => [r.interval, r.bit]));
    for (const r of reps) {
      const bit = queued.get(r.interval);
      if (bit === undefined) this.rec.pending.push(r);
      else if (bit !== r.bit) this.withhold(r);
    }
    await this.save();
    return reps;
  }

  private withhold(r: Report): void {
    const report = this.rec.device === null ? null : { ...r, device: this.rec.device };
    this.rec.refused.push({ interval: r.interval, report, status: WITHHELD, error: WITHHELD_ERROR });
  }

  /**
   * Read the slots the service holds for this device (``GET /v1/studies/{study}/reports``) and
   * never send another bit for any of them: a queued report that disagrees is withheld (kept
   * aside as refused, status ``WITHHELD``), one that agrees is dropped (it is stored), and the
   * client withholds such reports of the periods to come. ``flush`` does this once before its
   * first upload of each run (after a restart the store may be an older copy). Returns null
   * when the service stayed unreachable or busy, else the queued reports found ``stored`` and
   * those ``refused`` (withheld, or all of them when the service refused the request).
   */
  async sync(): Promise<{ stored: number; refused: number } | null> {
    const { device, token } = this.rec;
    if (device === null || token === null) throw new Error("sync before enrolment: call enrol first.");
    const resp = await this.uploader.request("GET", `/v1/studies/${this.uploader.study}/reports`, undefined, token);
    if (resp === null) return null;
    let stored = 0, refused = 0;
    if (resp.status !== 200) {
      const error = (await resp.text()).slice(0, 500);
      this.rec.refused.push(...this.rec.pending.map((r) => ({ interval: r.interval, report: { ...r, device }, status: resp.status, error })));
      refused = this.rec.pending.length;
      this.rec.pending = [];
    } else {
      const held = new Map((await resp.json() as { slots: [number, number][] }).slots);
      this.client.noteSent(held);
      const keep: Report[] = [];
      for (const r of this.rec.pending) {
        const bit = held.get(r.interval);
        if (bit === undefined) keep.push(r);
        else if (bit === r.bit) stored += 1;
        else { this.withhold(r); refused += 1; }
      }
      this.rec.pending = keep;
    }
    this.synced = true;
    await this.save();
    return { stored, refused };
  }

  /** Send the queue in batches (after ``sync`` once per run); stop early (queue kept) when the
   * server is unreachable. */
  async flush(): Promise<FlushResult> {
    const { device, token } = this.rec;
    if (device === null || token === null) throw new Error("flush before enrolment: call enrol first.");
    let sent = 0, refused = 0;
    if (!this.synced) {
      const got = await this.sync();
      if (got === null) return { sent, refused, pending: this.rec.pending.length, unreachable: true };
      sent += got.stored;  // acknowledged before (by an earlier run of this device)
      refused += got.refused;
    }
    while (this.rec.pending.length > 0) {
      const batch = this.rec.pending.slice(0, this.uploader.maxBatch);
      const wire = batch.map((r) => ({ ...r, device }));
      const resp = await this.uploader.request("POST", `/v1/studies/${this.uploader.study}/reports`,
        { reports: wire }, token);
      if (resp === null) return { sent, refused, pending: this.rec.pending.length, unreachable: true };
      if (resp.status === 200) {
        sent += batch.length;
      } else {
        const error = (await resp.text()).slice(0, 500);
        this.rec.refused.push(...wire.map((report) => ({ interval: report.interval, report, status: resp.status, error })));
        refused += batch.length;
      }
      this.rec.pending = this.rec.pending.slice(batch.length);
      await this.save();
    }
    return { sent, refused, pending: 0, unreachable: false };
  }
}
