/**
 * Python's spelling of values (`repr`, `str`, type names, `None`), so the panel's messages read
 * exactly as the server's `paddle_nbext/model/rules.py` writes them.
 */
import { Body } from './types';

function quote(text: string): string {
  const q = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = '';
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (ch === '\\' || ch === q) {
      out += `\\${ch}`;
    } else if (ch === '\n') {
      out += '\\n';
    } else if (ch === '\r') {
      out += '\\r';
    } else if (ch === '\t') {
      out += '\\t';
    } else if (code < 0x20 || code === 0x7f) {
      out += `\\x${code.toString(16).padStart(2, '0')}`;
    } else {
      out += ch;
    }
  }
  return `${q}${out}${q}`;
}

/** `repr()` of a JSON value as Python writes it: `'two'`, `2.5`, `True`, `None`, `[1]`. */
export function pyRepr(value: unknown): string {
  if (value === null || value === undefined) {
    return 'None';
  }
  if (typeof value === 'string') {
    return quote(value);
  }
  if (typeof value === 'boolean') {
    return value ? 'True' : 'False';
  }
  if (typeof value === 'number') {
    return String(value);
  }
  if (Array.isArray(value)) {
    return `[${value.map(pyRepr).join(', ')}]`;
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value as Body).map(([k, v]) => `${quote(k)}: ${pyRepr(v)}`);
    return `{${entries.join(', ')}}`;
  }
  return typeof value === 'bigint' ? value.toString() : '';
}

/** `str()` of a JSON value as Python writes it (strings as they are). */
export function pyStr(value: unknown): string {
  return typeof value === 'string' ? value : pyRepr(value);
}

/** `type(value).__name__` of a JSON value in Python. */
export function pyType(value: unknown): string {
  if (typeof value === 'boolean') {
    return 'bool';
  }
  if (typeof value === 'number') {
    return Number.isInteger(value) ? 'int' : 'float';
  }
  if (typeof value === 'string') {
    return 'str';
  }
  if (Array.isArray(value)) {
    return 'list';
  }
  return value === null || value === undefined ? 'NoneType' : 'dict';
}

export const blank = (value: unknown): boolean => value === null || value === undefined;
