/**
 * The `cpu` and `memory` field kinds: a Kubernetes quantity, positive, within this server's
 * per-replica bound, in whole millicores or whole bytes (rules.py `_quantity`).
 */
import { IFieldSchema } from '../../api/types';
import { Fraction, QuantityError, parseQuantity } from '../quantity';
import { blank, pyStr, pyType } from './python';
import { FieldError, IContext } from './types';

export function parseQuantityField(name: string, field: IFieldSchema, ctx: IContext): unknown {
  let raw = ctx.body[name];
  if (blank(raw) || raw === '') {
    raw = field.default;
  }
  let amount: Fraction;
  try {
    if (typeof raw === 'boolean') {
      throw new QuantityError("expected a quantity such as '500m', '2', '4Gi'; got a boolean");
    }
    if (typeof raw !== 'string' && typeof raw !== 'number') {
      throw new QuantityError(
        `expected a quantity string such as '500m' or '4Gi', got ${pyType(raw)}`
      );
    }
    amount = parseQuantity(raw);
  } catch (error) {
    if (error instanceof QuantityError) {
      throw new FieldError(name, error.message);
    }
    throw error;
  }
  const shown = pyStr(raw);
  if (amount.compare(Fraction.of(0)) <= 0) {
    throw new FieldError(name, `must be positive, got '${shown}'`);
  }
  const most = field['x-maximum-quantity'];
  if (most && amount.compare(parseQuantity(most)) > 0) {
    throw new FieldError(name, `'${shown}' is more than this server allows per replica (${most})`);
  }
  if (field['x-kind'] === 'cpu' && !amount.mul(1000).isInteger()) {
    throw new FieldError(name, `'${shown}' is finer than a millicore; use e.g. '500m' or '1.5'`);
  }
  if (field['x-kind'] === 'memory' && !amount.isInteger()) {
    throw new FieldError(
      name,
      `'${shown}' is not a whole number of bytes; use e.g. '512Mi' or '4Gi'`
    );
  }
  return amount;
}
