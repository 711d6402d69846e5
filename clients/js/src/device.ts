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

/** A batch the server refused for good (not resent). */
export interface Refused {
  report: WireReport;
  status: number;
  error: string;
}

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

  /** Read ``X[t] = x``; queue the reports due and save state and queue together. */
  async observe(t: number, x: number): Promise<Report[]> {
    const reps = this.client.observe(t, x);
    const queued = new Set(this.rec.pending.map((r) => r.interval));
    for (const r of reps) if (!queued.has(r.interval)) this.rec.pending.push(r);
    await this.save();
    return reps;
  }

  /** Send the queue in batches; stop early (queue kept) when the server is unreachable. */
  async flush(): Promise<FlushResult> {
    const { device, token } = this.rec;
    if (device === null || token === null) throw new Error("flush before enrolment: call enrol first.");
    let sent = 0, refused = 0;
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
        this.rec.refused.push(...wire.map((report) => ({ report, status: resp.status, error })));
        refused += batch.length;
      }
      this.rec.pending = this.rec.pending.slice(batch.length);
      await this.save();
    }
    return { sent, refused, pending: 0, unreachable: false };
  }
}
