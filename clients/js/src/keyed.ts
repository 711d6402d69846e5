// Keyed randomness of the protocol (docs/protocol.md §3): key derivation, the 64-bit word stream
// and the exact integer samplers on it. Numbers are used while every value is a safe integer
// (below 2^53); BigInt beyond.

import { Hmac } from "./sha256.js";

/** A part of a key derivation: a string, an integer (number or bigint) or bytes. */
export type Part = string | number | bigint | Uint8Array;

const UTF8 = new TextEncoder();
const TAGS = { s: 0x73, i: 0x69, b: 0x62 };

/** ``tag ‖ 8-byte big-endian length ‖ body`` of one part (the injective encoding). */
export function encodePart(part: Part): Uint8Array {
  let tag: number, body: Uint8Array;
  if (typeof part === "string") {
    tag = TAGS.s; body = UTF8.encode(part);
  } else if (typeof part === "bigint" || typeof part === "number") {
    if (typeof part === "number" && !Number.isSafeInteger(part)) {
      throw new RangeError(`part of derive must be a safe integer; got ${part}.`);
    }
    tag = TAGS.i; body = UTF8.encode(part.toString());
  } else {
    tag = TAGS.b; body = part;
  }
  const out = new Uint8Array(9 + body.length);
  out[0] = tag;
  const n = body.length;
  for (let i = 0; i < 4; i++) out[8 - i] = (n >>> (8 * i)) & 0xff;
  out.set(body, 9);
  return out;
}

/** Concatenation of byte strings. */
export function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((a, c) => a + c.length, 0));
  let off = 0;
  for (const c of chunks) { out.set(c, off); off += c.length; }
  return out;
}

const LABEL = UTF8.encode("dpfreq-kdf-1");

/** The message ``"dpfreq-kdf-1" ‖ enc(p1) ‖ …`` that derive() authenticates. */
export function deriveMessage(parts: Part[]): Uint8Array {
  return concat([LABEL, ...parts.map(encodePart)]);
}

/** ``HMAC-SHA256(key, "dpfreq-kdf-1" ‖ enc(p1) ‖ … ‖ enc(pm))``. */
export function derive(key: Uint8Array | Hmac, ...parts: Part[]): Uint8Array {
  const mac = key instanceof Hmac ? key : new Hmac(key);
  return mac.digest(deriveMessage(parts));
}

const BLOCK_PREFIX = deriveMessage(["block"]);
// the messages of the first blocks, which nearly every stream reads
const BLOCKS = Array.from({ length: 8 }, (_, b) => concat([BLOCK_PREFIX, encodePart(b)]));
const TWO32 = 2 ** 32;

/** Bit length of a safe non-negative integer. */
function bitLength(x: number): number {
  return x < TWO32 ? 32 - Math.clz32(x) : 64 - Math.clz32(Math.floor(x / TWO32));
}

/** The 64-bit words of one stream key and the exact samplers on them. */
export class KeyedStream {
  private readonly mac: Hmac;
  private block = 0;
  private buf: Uint8Array = new Uint8Array(0);
  private pos = 32;
  /** High and low 32 bits of the last word read. */
  hi = 0;
  lo = 0;
  wordsRead = 0;

  constructor(key: Uint8Array) {
    this.mac = new Hmac(key);
  }

  /** Read the next word into ``hi``/``lo`` (8 bytes big-endian of ``B_0 ‖ B_1 ‖ …``). */
  next(): void {
    if (this.pos === 32) {
      this.buf = this.mac.digest(this.block < BLOCKS.length ? BLOCKS[this.block]
        : concat([BLOCK_PREFIX, encodePart(this.block)]));
      this.block += 1;
      this.pos = 0;
    }
    const b = this.buf, p = this.pos;
    this.hi = ((b[p] << 24) | (b[p + 1] << 16) | (b[p + 2] << 8) | b[p + 3]) >>> 0;
    this.lo = ((b[p + 4] << 24) | (b[p + 5] << 16) | (b[p + 6] << 8) | b[p + 7]) >>> 0;
    this.pos += 8;
    this.wordsRead += 1;
  }

  /** The next word as a BigInt. */
  word(): bigint {
    this.next();
    return (BigInt(this.hi) << 32n) | BigInt(this.lo);
  }

  /** Uniform on ``0..n−1`` for a safe integer ``n ≥ 1`` (rejection on the top bits). */
  uniformBelow(n: number): number {
    if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`n must be a safe integer >= 1; got ${n}.`);
    const b = bitLength(n - 1);
    if (b === 0) return 0;
    for (;;) {
      this.next();
      const v = b <= 32 ? this.hi >>> (32 - b)
        : this.hi * 2 ** (b - 32) + Math.floor(this.lo / 2 ** (64 - b));
      if (v < n) return v;
    }
  }

  /** Uniform on ``0..n−1`` for any integer ``n ≥ 1`` (``⌈b/64⌉`` words per attempt). */
  uniformBelowBig(n: bigint): bigint {
    if (n < 1n) throw new RangeError(`n must be >= 1; got ${n}.`);
    if (n <= BigInt(Number.MAX_SAFE_INTEGER)) return BigInt(this.uniformBelow(Number(n)));
    const b = (n - 1n).toString(2).length;
    const w = Math.ceil(b / 64);
    const shift = BigInt(64 * w - b);
    for (;;) {
      let v = 0n;
      for (let i = 0; i < w; i++) v = (v << 64n) | this.word();
      v >>= shift;
      if (v < n) return v;
    }
  }

  /** A fair ±1 coin: +1 iff ``uniform_below(2) = 1``. */
  coin(): number {
    return this.uniformBelow(2) === 1 ? 1 : -1;
  }

  /** ``Bernoulli(e^{−a/m})`` for ``0 ≤ a ≤ m`` (Canonne, Kamath and Steinke, Algorithm 1). */
  bernoulliExp(a: number, m: number): boolean {
    let k = 1;
    for (;;) {
      const n = m * k;
      const u = Number.isSafeInteger(n) ? this.uniformBelow(n) < a
        : this.uniformBelowBig(BigInt(m) * BigInt(k)) < BigInt(a);
      if (!u) break;
      k += 1;
    }
    return k % 2 === 1;
  }

  /** ``G ~ Geometric(e^{−s/t})`` on ``{0, 1, …}`` in integers only. */
  geometric(s: number, t: number): number {
    let u: number;
    do { u = this.uniformBelow(t); } while (!this.bernoulliExp(u, t));
    let v = 0;
    while (this.bernoulliExp(1, 1)) v += 1;
    return Math.floor((u + t * v) / s);
  }

  /** Randomized response's keep bit: true with probability ``1/(1 + e^{−s/t})``. */
  keep(s: number, t: number): boolean {
    return this.geometric(s, t) % 2 === 0;
  }

  /** ``v ∈ {±1}^k`` of a distance law given its cumulative masses ``c_0..c_k``. */
  distanceVector(cumulative: bigint[], k: number): Int8Array {
    const u = this.uniformBelowBig(cumulative[k]);
    let lo = 0, hi = cumulative.length; // ell = #{i : c_i <= u}
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid] <= u) lo = mid + 1; else hi = mid;
    }
    const choices: number[] = [];
    for (let i = 0; i < lo; i++) choices.push(this.uniformBelow(k - i));
    return subsetFromChoices(k, choices);
  }
}

/** −1 at the positions a partial Fisher–Yates shuffle of ``0..k−1`` picks, +1 elsewhere. */
export function subsetFromChoices(k: number, choices: number[]): Int8Array {
  const a = Array.from({ length: k }, (_, i) => i);
  choices.forEach((c, i) => { const x = a[i]; a[i] = a[i + c]; a[i + c] = x; });
  const v = new Int8Array(k).fill(1);
  for (let i = 0; i < choices.length; i++) v[a[i]] = -1;
  return v;
}

/** ``c_ℓ = Σ_{i≤ℓ} C(k, i)·w(i)`` for ``ℓ = 0..k`` (exact). */
export function cumulativeMasses(weights: bigint[]): bigint[] {
  const k = weights.length - 1;
  const out: bigint[] = [];
  let binom = 1n, acc = 0n;
  for (let i = 0; i <= k; i++) {
    acc += binom * weights[i];
    out.push(acc);
    binom = (binom * BigInt(k - i)) / BigInt(i + 1);
  }
  return out;
}
