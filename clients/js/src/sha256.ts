// SHA-256 and HMAC-SHA256 (FIPS 180-4, RFC 2104), synchronous.
//
// Why not WebCrypto's crypto.subtle here: it is asynchronous only, so every keyed draw (two
// HMACs per report) would cost an importKey and two promise round trips, about ten times the
// hashing itself, and observe() could not be synchronous. The tests check this implementation
// against crypto.subtle's HMAC-SHA256 on every length from 0 to 300 bytes.

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = new Uint32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);
const W = new Uint32Array(64);

function compress(h: Uint32Array, b: Uint8Array, off: number): void {
  for (let i = 0; i < 16; i++) {
    const o = off + 4 * i;
    W[i] = (b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3];
  }
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15], y = W[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = h[0], c1 = h[1], c2 = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (hh + S1 + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (S0 + ((a & c1) ^ (a & c2) ^ (c1 & c2))) | 0;
    hh = g; g = f; f = e; e = (d + t1) | 0; d = c2; c2 = c1; c1 = a; a = (t1 + t2) | 0;
  }
  h[0] += a; h[1] += c1; h[2] += c2; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

/** Continue a hash whose state ``h`` has absorbed ``prefix`` bytes (a multiple of 64). */
function finish(h: Uint32Array, msg: Uint8Array, prefix: number): Uint8Array {
  const n = msg.length;
  let off = 0;
  for (; off + 64 <= n; off += 64) compress(h, msg, off);
  const rest = n - off;
  const tail = new Uint8Array(rest + 9 <= 64 ? 64 : 128);
  tail.set(msg.subarray(off));
  tail[rest] = 0x80;
  const bits = (prefix + n) * 8;
  const end = tail.length;
  const high = Math.floor(bits / 2 ** 32);
  for (let i = 0; i < 4; i++) {
    tail[end - 1 - i] = (bits >>> (8 * i)) & 0xff;
    tail[end - 5 - i] = (high >>> (8 * i)) & 0xff;
  }
  compress(h, tail, 0);
  if (tail.length === 128) compress(h, tail, 64);
  const out = new Uint8Array(32);
  for (let i = 0; i < 8; i++) {
    out[4 * i] = h[i] >>> 24; out[4 * i + 1] = h[i] >>> 16;
    out[4 * i + 2] = h[i] >>> 8; out[4 * i + 3] = h[i];
  }
  return out;
}

/** SHA-256 of ``msg``. */
export function sha256(msg: Uint8Array): Uint8Array {
  return finish(IV.slice(), msg, 0);
}

/** HMAC-SHA256 with a fixed key (the padded-key states are computed once). */
export class Hmac {
  private readonly inner: Uint32Array;
  private readonly outer: Uint32Array;

  constructor(key: Uint8Array) {
    const k = new Uint8Array(64);
    k.set(key.length > 64 ? sha256(key) : key);
    const pad = new Uint8Array(64);
    this.inner = IV.slice();
    for (let i = 0; i < 64; i++) pad[i] = k[i] ^ 0x36;
    compress(this.inner, pad, 0);
    this.outer = IV.slice();
    for (let i = 0; i < 64; i++) pad[i] = k[i] ^ 0x5c;
    compress(this.outer, pad, 0);
  }

  /** The 32-byte tag of ``msg``. */
  digest(msg: Uint8Array): Uint8Array {
    return finish(this.outer.slice(), finish(this.inner.slice(), msg, 64), 64);
  }

  /** The inner state after the first ``64·m`` bytes of ``head`` (for many messages that
   * start with ``head``) and the bytes of ``head`` left over. */
  absorb(head: Uint8Array): [Uint32Array, Uint8Array] {
    const h = this.inner.slice();
    const whole = head.length - (head.length % 64);
    for (let off = 0; off < whole; off += 64) compress(h, head, off);
    return [h, head.subarray(whole)];
  }

  /** The tag of ``head ‖ rest`` given ``absorb(head)`` (``state`` is not modified). */
  digestAfter(absorbed: [Uint32Array, Uint8Array], headLength: number, rest: Uint8Array): Uint8Array {
    const [state, left] = absorbed;
    const msg = new Uint8Array(left.length + rest.length);
    msg.set(left);
    msg.set(rest, left.length);
    const inner = finish(state.slice(), msg, 64 + headLength - left.length);
    return finish(this.outer.slice(), inner, 64);
  }
}
