/** The form's totals line: what the whole job asks for, as the server's summary says it. */
import { Fraction, formatBytes, formatCpu } from '../quantity';
import { IJobSchema } from '../../api/types';
import { formBody } from './form';
import { checkSpec } from './spec';
import { FormValues } from './types';

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

/**
 * The totals line, as `JobSpec.summary()` writes it:
 * "2 pservers × 1 CPU + 4 trainers × 2 CPU = 10 CPU, 18Gi".  Null while a figure it needs is
 * invalid (the field's own message says why).
 */
export function totalsLine(values: FormValues, schema: IJobSchema, backend = ''): string | null {
  const { errors, values: parsed } = checkSpec(formBody(values, schema, backend), schema);
  const needed = ['pservers', 'trainers', 'trainer_cpu', 'trainer_mem', 'trainer_gpu'];
  const pservers = parsed.pservers as number | undefined;
  if (pservers) {
    needed.push('pserver_cpu', 'pserver_mem');
  }
  if (needed.some(name => name in errors || !(name in parsed))) {
    return null;
  }
  const trainers = parsed.trainers as number;
  const trainerGpu = parsed.trainer_gpu as number;
  const trainerCpu = parsed.trainer_cpu as Fraction;
  const parts: string[] = [];
  let cpu = trainerCpu.mul(trainers);
  let mem = (parsed.trainer_mem as Fraction).mul(trainers);
  if (pservers) {
    const pserverCpu = parsed.pserver_cpu as Fraction;
    parts.push(`${plural(pservers, 'pserver')} × ${formatCpu(pserverCpu)} CPU`);
    cpu = cpu.add(pserverCpu.mul(pservers));
    mem = mem.add((parsed.pserver_mem as Fraction).mul(pservers));
  }
  const gpu = trainerGpu ? ` + ${trainerGpu} GPU` : '';
  parts.push(`${plural(trainers, 'trainer')} × ${formatCpu(trainerCpu)} CPU${gpu}`);
  let total = `${formatCpu(cpu)} CPU, ${formatBytes(mem)}`;
  if (trainerGpu * trainers) {
    total += `, ${trainerGpu * trainers} GPU`;
  }
  return `${parts.join(' + ')} = ${total}`;
}
