/**
 * Exact Kubernetes quantities for the New job form, mirroring `paddle_nbext/model/quantity.py`.
 *
 * Totals ("4 trainers × 2 CPU = 8 CPU, 16Gi") and limit checks must match what the server
 * computes, so amounts are exact fractions of BigInts, never floats.  The grammar and messages
 * are checked against the server's by the shared vectors (tests/vectors,
 * __tests__/vectors.test.ts): ASCII digits only, as `QUANTITY_PATTERN` in Python.
 */

export class QuantityError extends Error {}

function gcd(a: bigint, b: bigint): bigint {
  a = a < BigInt(0) ? -a : a;
  b = b < BigInt(0) ? -b : b;
  while (b !== BigInt(0)) {
    const t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/** An exact rational number n/d with d > 0, always in lowest terms. */
export class Fraction {
  readonly n: bigint;
  readonly d: bigint;

  constructor(n: bigint, d: bigint = BigInt(1)) {
    if (d === BigInt(0)) {
      throw new RangeError('zero denominator');
    }
    if (d < BigInt(0)) {
      n = -n;
      d = -d;
    }
    const g = gcd(n, d) || BigInt(1);
    this.n = n / g;
    this.d = d / g;
  }

  static of(value: number | bigint): Fraction {
    return new Fraction(BigInt(value));
  }

  add(other: Fraction): Fraction {
    return new Fraction(this.n * other.d + other.n * this.d, this.d * other.d);
  }

  mul(other: Fraction | number): Fraction {
    const o = other instanceof Fraction ? other : Fraction.of(other);
    return new Fraction(this.n * o.n, this.d * o.d);
  }

  div(other: Fraction): Fraction {
    return new Fraction(this.n * other.d, this.d * other.n);
  }

  compare(other: Fraction): number {
    const left = this.n * other.d;
    const right = other.n * this.d;
    return left < right ? -1 : left > right ? 1 : 0;
  }

  isInteger(): boolean {
    return this.d === BigInt(1);
  }

  toNumber(): number {
    return Number(this.n) / Number(this.d);
  }
}

const BINARY: Array<[string, bigint]> = [
  ['Ei', BigInt(2) ** BigInt(60)],
  ['Pi', BigInt(2) ** BigInt(50)],
  ['Ti', BigInt(2) ** BigInt(40)],
  ['Gi', BigInt(2) ** BigInt(30)],
  ['Mi', BigInt(2) ** BigInt(20)],
  ['Ki', BigInt(2) ** BigInt(10)]
];

function pow10(exp: number): Fraction {
  const base = BigInt(10) ** BigInt(Math.abs(exp));
  return exp >= 0 ? new Fraction(base) : new Fraction(BigInt(1), base);
}

const DECIMAL: { [suffix: string]: Fraction } = {
  n: pow10(-9),
  u: pow10(-6),
  m: pow10(-3),
  '': pow10(0),
  k: pow10(3),
  K: pow10(3),
  M: pow10(6),
  G: pow10(9),
  T: pow10(12),
  P: pow10(15),
  E: pow10(18)
};

const PATTERN =
  /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei)|([eE][+-]?\d+)|([numkKMGTPE]?))$/;
const MAX_EXPONENT = 30;

function decimalFraction(text: string): Fraction {
  const trimmed = text.endsWith('.') ? text.slice(0, -1) : text;
  const [whole, frac = ''] = trimmed.split('.');
  const digits = BigInt((whole || '0') + frac);
  return new Fraction(digits, BigInt(10) ** BigInt(frac.length));
}

/** Parse `500m`, `2`, `1.5`, `4Gi`, `1G`, `1e3` into base units (cores or bytes). */
export function parseQuantity(raw: string | number): Fraction {
  if (typeof raw === 'number') {
    if (!Number.isFinite(raw)) {
      throw new QuantityError('expected a finite number');
    }
    raw = String(raw);
  }
  const text = raw.trim();
  const match = PATTERN.exec(text);
  if (!match) {
    throw new QuantityError(
      `'${raw}' is not a quantity: use a number with an optional suffix ` +
        "(m, k, M, G, T, P, E or Ki, Mi, Gi, Ti, Pi, Ei), e.g. '500m', '2', '1.5', '4Gi', '1G'"
    );
  }
  const [, sign, number, binary, exp, decimal] = match;
  let factor: Fraction;
  if (binary) {
    factor = new Fraction(BINARY.find(([s]) => s === binary)![1]);
  } else if (exp) {
    const exponent = parseInt(exp.slice(1), 10);
    if (Math.abs(exponent) > MAX_EXPONENT) {
      throw new QuantityError(
        `'${raw}': exponent ${exponent} is out of range (|e| <= ${MAX_EXPONENT})`
      );
    }
    factor = pow10(exponent);
  } else {
    factor = DECIMAL[decimal ?? ''];
  }
  const value = decimalFraction(number).mul(factor);
  return sign === '-' ? value.mul(-1) : value;
}

function trimDecimals(value: number, places: number): string {
  return value.toFixed(places).replace(/0+$/, '').replace(/\.$/, '');
}

/** Cores for people: `8`, `1.5`, `250m` (as `format_cpu` in Python). */
export function formatCpu(amount: Fraction): string {
  if (amount.isInteger()) {
    return amount.n.toString();
  }
  const millis = amount.mul(1000);
  if (amount.compare(Fraction.of(1)) < 0 && millis.isInteger()) {
    return `${millis.n.toString()}m`;
  }
  return trimDecimals(amount.toNumber(), 3);
}

/** Bytes for people: the largest binary unit with at most two decimals (`16Gi`, `1.5Gi`). */
export function formatBytes(amount: Fraction): string {
  for (const [suffix, factor] of BINARY) {
    const f = new Fraction(factor);
    if (amount.compare(f) >= 0) {
      const scaled = amount.div(f);
      if (scaled.isInteger()) {
        return `${scaled.n.toString()}${suffix}`;
      }
      return trimDecimals(scaled.toNumber(), 2) + suffix;
    }
  }
  if (amount.isInteger()) {
    return amount.n.toString();
  }
  return amount.toNumber().toFixed(2);
}

const UNIT_TYPO = /^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtTpPeE])(?:i?[bB]|iB)\s*$/;
const CORE_WORDS = /^\s*(\d+(?:\.\d+)?)\s*(?:cpus?|cores?|vcpus?)\s*$/i;

/**
 * The quantity someone probably meant when they typed a spelling from elsewhere: `4GB`,
 * `4 GiB` and `512mb` are memory as other tools write it (`4Gi`, `512Mi`), `2 cores` is `2`.
 * Null when the text parses as it is or no fix is obvious.
 */
export function suggestQuantity(text: string, kind: 'cpu' | 'memory'): string | null {
  try {
    parseQuantity(text);
    return null;
  } catch {
    // not a quantity as typed: look for an obvious fix below
  }
  if (kind === 'memory') {
    const match = UNIT_TYPO.exec(text);
    if (match) {
      const unit = match[2].toUpperCase();
      return `${match[1]}${unit}i`;
    }
  }
  const cores = CORE_WORDS.exec(text);
  return kind === 'cpu' && cores ? cores[1] : null;
}
