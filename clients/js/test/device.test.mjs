// Queue, persistence and uploader against a fake collection service (no network).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Device, DeviceClient, WITHHELD, memoryStore, retryAfterSeconds, Hmac, sha256 } from "../dist/index.js";
import { fileStore } from "../dist/node.js";

const VECTORS = fileURLToPath(new URL("../../vectors/", import.meta.url));
const CASE = JSON.parse(readFileSync(VECTORS + "devices.json", "utf8")).cases
  .find((c) => c.bundle.horizon === 30 && c.bundle.method === "threshold");
const BUNDLE = CASE.bundle;

/** A fake service: enrols, stores slots like the real one (409 on a different bit), answers
 * a device's read of its stored slots, and the scripted statuses first; ``seen`` keeps every
 * bit that reached it per interval, stored or not. */
function fakeServer(script = []) {
  const slots = new Map();
  const seen = new Map();
  const calls = [];
  const fetch = async (url, init) => {
    const body = init.body ? JSON.parse(init.body) : null;
    calls.push({ url, method: init.method, body, auth: init.headers.authorization });
    const next = script.shift();
    if (next === "throw") throw new TypeError("network down");
    if (next) return new Response(next.body ?? "busy", { status: next.status, headers: next.headers });
    if (url.endsWith("/devices")) {
      return Response.json({ device: 42, token: "tok", order: body.order }, { status: 201 });
    }
    if (init.method === "GET") {
      return Response.json({ device: 42, slots: [...slots.entries()].sort((a, b) => a[0] - b[0]) });
    }
    for (const r of body.reports) {
      if (!seen.has(r.interval)) seen.set(r.interval, new Set());
      seen.get(r.interval).add(r.bit);
    }
    for (const r of body.reports) {
      if (slots.has(r.interval) && slots.get(r.interval) !== r.bit) return new Response("conflict", { status: 409 });
    }
    for (const r of body.reports) slots.set(r.interval, r.bit);
    return Response.json({ stored: body.reports.length });
  };
  return { fetch, slots, seen, calls };
}

const options = (srv, sleeps) => ({
  server: "http://collect.test/", study: "s1", fetch: srv.fetch, maxBatch: 3,
  sleep: async (s) => { sleeps.push(s); },
});

test("enrol, observe, flush: every report stored once, state saved each period", async () => {
  const srv = fakeServer();
  const store = memoryStore();
  const dev = await Device.open(BUNDLE, store, options(srv, []));
  assert.equal(await dev.enrol(), 42);
  assert.equal(srv.calls[0].body.param_id, BUNDLE.param_id);
  let all = [];
  for (let t = 1; t <= 30; t++) {
    all = all.concat(await dev.observe(t, t > 10 ? 1 : 0));
    assert.equal(JSON.parse(store.text).client.t, t === 30 ? 32 : t);
  }
  const res = await dev.flush();
  assert.deepEqual(res, { sent: all.length, refused: 0, pending: 0, unreachable: false });
  assert.equal(srv.slots.size, 32 >> dev.client.order);
  assert.equal(srv.calls[1].method, "GET"); // the stored slots, read before the first upload
  assert.ok(srv.calls.slice(2).every((c) => c.auth === "Bearer tok" && c.body.reports.every((r) => r.device === 42)));
});

test("a device restored from its store resends identical bits (no conflict)", async () => {
  const srv = fakeServer();
  const store = memoryStore();
  const a = await Device.open(BUNDLE, store, options(srv, []));
  await a.enrol();
  for (let t = 1; t <= 20; t++) await a.observe(t, t % 7 === 0 ? 1 : 0);
  const saved = store.text;
  await a.flush();
  for (let t = 21; t <= 30; t++) await a.observe(t, 1);
  await a.flush();
  const b = await Device.open(BUNDLE, memoryStore(saved), options(srv, []));
  assert.equal(b.client.order, a.client.order);
  for (let t = 21; t <= 30; t++) await b.observe(t, 1);
  const res = await b.flush();
  assert.equal(res.refused, 0);
  assert.equal(res.unreachable, false);
  assert.ok([...srv.seen.values()].every((bits) => bits.size === 1));
});

/** A record of a new device with the given secret (tests choose it; Device.open draws one). */
function storeWith(secret) {
  const client = new DeviceClient(BUNDLE, secret);
  return JSON.stringify({ format: "dpfreq-device-1", study: "s1", param_id: BUNDLE.param_id,
    client: client.toState(), device: null, token: null, pending: [], refused: [] });
}

const A = (t) => (t > 10 && t % 2 === 1 ? 1 : 0);
const B = (t) => (t > 10 && t % 3 === 0 ? 1 : 0);

/** A secret whose device, restored at period 10 and fed B instead of A, computes another bit
 * for at least one slot it sent (found by a shadow client; the search is deterministic). */
function divergingSecret() {
  for (let i = 0; i < 256; i++) {
    const secret = new Uint8Array(32).fill(i);
    const a = new DeviceClient(BUNDLE, secret), b = new DeviceClient(BUNDLE, secret);
    const bits = new Map();
    for (let t = 1; t <= 30; t++) for (const r of a.observe(t, A(t))) bits.set(r.interval, r.bit);
    let differ = 0;
    for (let t = 1; t <= 30; t++) for (const r of b.observe(t, t <= 10 ? A(t) : B(t))) differ += bits.get(r.interval) !== r.bit;
    if (differ > 0 && a.order <= 1) return { secret, differ };
  }
  throw new Error("no diverging secret among the 256 tried");
}

for (const when of ["queued before the first flush", "observed after the first flush"]) {
  test(`a device restored from an older store and fed other input withholds the slots it sent (${when})`, async () => {
    const { secret, differ } = divergingSecret();
    const srv = fakeServer();
    const store = memoryStore(storeWith(secret));
    const a = await Device.open(BUNDLE, store, options(srv, []));
    await a.enrol();
    for (let t = 1; t <= 10; t++) await a.observe(t, A(t));
    const snapshot = store.text;
    for (let t = 11; t <= 30; t++) await a.observe(t, A(t));
    assert.equal((await a.flush()).refused, 0);
    const b = await Device.open(BUNDLE, memoryStore(snapshot), options(srv, []));
    if (when === "observed after the first flush") assert.equal((await b.flush()).refused, 0);
    for (let t = 11; t <= 30; t++) await b.observe(t, B(t));
    const res = await b.flush();
    assert.equal(res.unreachable, false);
    assert.equal(res.refused, when === "observed after the first flush" ? 0 : differ);
    const withheld = b.refused.filter((r) => r.status === WITHHELD);
    assert.equal(withheld.length, differ);
    assert.ok(withheld.every((r) => r.error.startsWith("withheld")));
    assert.equal(withheld.every((r) => r.report === null), when === "observed after the first flush");
    assert.deepEqual(b.client.withheld.length, when === "observed after the first flush" ? differ : 0);
    // the service never saw two bits for one slot
    assert.ok([...srv.seen.values()].every((bits) => bits.size === 1));
  });
}

test("noteSent: validation, and a state with slots ahead survives toState/fromState", () => {
  const c = new DeviceClient(BUNDLE, new Uint8Array(32).fill(7));
  const limit = 32 >> c.order;
  assert.throws(() => c.noteSent([[0, 1]]), /interval of noteSent/);
  assert.throws(() => c.noteSent([[limit + 1, 1]]), /interval of noteSent/);
  assert.throws(() => c.noteSent([[1, 2]]), /bit of noteSent/);
  assert.throws(() => c.noteSent([[1, 0], [1, 1]]), /one bit per interval/);
  c.noteSent([[limit, 1]]);
  const again = DeviceClient.fromState(BUNDLE, c.toState());
  assert.deepEqual(again.toState().ahead, [[limit, 1]]);
  const bad = { ...c.toState(), ahead: [[0, 1]] };
  assert.throws(() => DeviceClient.fromState(BUNDLE, bad), /ahead of the state/);
});

test("the uploader says it waits, for how long and why (enrolment rate limit)", async () => {
  const limit = JSON.stringify({ error: "rate limit: at most 1 enrolments per study and client address per second, in bursts of at most 20; retry in 7 s." });
  const srv = fakeServer([{ status: 429, headers: { "retry-after": "7" }, body: limit }, "throw"]);
  const waits = [];
  const dev = await Device.open(BUNDLE, memoryStore(), { ...options(srv, []), onWait: (w) => waits.push(w) });
  assert.equal(await dev.enrol(), 42);
  assert.equal(waits.length, 2);
  assert.deepEqual({ ...waits[0], seconds: waits[0].seconds >= 7 },
    { path: "/v1/studies/s1/devices", attempt: 1, seconds: true, status: 429, error: JSON.parse(limit).error });
  assert.equal(waits[1].status, null);
  assert.equal(waits[1].attempt, 2);
});

test("retries: 429 with Retry-After, 503, network error; then success", async () => {
  const srv = fakeServer([{ status: 429, headers: { "retry-after": "7" } }, { status: 503 }, "throw"]);
  const sleeps = [];
  const dev = await Device.open(BUNDLE, memoryStore(), options(srv, sleeps));
  assert.equal(await dev.enrol(), 42);
  assert.equal(sleeps.length, 3);
  assert.ok(sleeps[0] >= 7, "Retry-After honoured");
  assert.ok(sleeps[1] < 0.5 && sleeps[2] < 1.0, "full-jitter exponential backoff");
});

test("an unreachable server keeps the queue; refused batches are kept aside, not resent", async () => {
  let up = true;
  const srv = fakeServer();
  const flaky = { ...srv, fetch: async (u, i) => { if (!up) throw new TypeError("down"); return srv.fetch(u, i); } };
  const dev = await Device.open(BUNDLE, memoryStore(), { ...options(flaky, []), retries: 2 });
  await dev.enrol();
  for (let t = 1; t <= 30; t++) await dev.observe(t, 0);
  const queued = dev.pending;
  up = false;
  assert.deepEqual(await dev.flush(), { sent: 0, refused: 0, pending: queued, unreachable: true });
  up = true;
  assert.equal((await dev.flush()).sent, queued);

  const script = [];
  const bad = fakeServer(script);
  const dev2 = await Device.open(BUNDLE, memoryStore(), options(bad, []));
  await dev2.enrol();
  assert.deepEqual(await dev2.sync(), { stored: 0, refused: 0 });
  script.push({ status: 400 });
  for (let t = 1; t <= 30; t++) await dev2.observe(t, 0);
  const total = dev2.pending;
  const res = await dev2.flush();
  assert.equal(res.refused, Math.min(3, total));
  assert.equal(res.sent, total - res.refused);
  assert.equal(dev2.refused.length, res.refused);
  assert.equal(dev2.refused[0].status, 400);
  assert.equal((await dev2.flush()).sent, 0); // nothing resent
});

test("Retry-After: seconds and HTTP dates", () => {
  assert.equal(retryAfterSeconds("12"), 12);
  assert.equal(retryAfterSeconds(null), null);
  assert.equal(retryAfterSeconds("Wed, 21 Oct 2015 07:28:10 GMT", Date.parse("Wed, 21 Oct 2015 07:28:00 GMT")), 10);
  assert.equal(retryAfterSeconds("soon"), null);
});

test("file store: 0600, survives reopen", async () => {
  const path = join(mkdtempSync(join(tmpdir(), "dpfreq-js-")), "device.json");
  const srv = fakeServer();
  const a = await Device.open(BUNDLE, fileStore(path), options(srv, []));
  await a.enrol();
  await a.observe(1, 1);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  const b = await Device.open(BUNDLE, fileStore(path), options(srv, []));
  assert.equal(b.deviceId, 42);
  assert.equal(b.client.t, 1);
});

test("HMAC-SHA256 and SHA-256 equal WebCrypto's on every length 0..300", async () => {
  const { subtle } = globalThis.crypto;
  const key = Uint8Array.from({ length: 32 }, (_, i) => (i * 37 + 11) & 255);
  const ck = await subtle.importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Hmac(key);
  for (let n = 0; n <= 300; n++) {
    const msg = Uint8Array.from({ length: n }, (_, i) => (i * 7 + n) & 255);
    assert.deepEqual(mac.digest(msg), new Uint8Array(await subtle.sign("HMAC", ck, msg)), `hmac ${n}`);
    assert.deepEqual(sha256(msg), new Uint8Array(await subtle.digest("SHA-256", msg)), `sha ${n}`);
  }
  const long = new Uint8Array(100).fill(3); // keys longer than a block are hashed first
  const cl = await subtle.importKey("raw", long, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  assert.deepEqual(new Hmac(long).digest(key), new Uint8Array(await subtle.sign("HMAC", cl, key)));
});
