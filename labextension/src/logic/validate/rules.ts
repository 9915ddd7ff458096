/**
 * The named cross-field rules (`x-rule`; rules.py `RULES`), each run once the fields it reads
 * parsed, with the server's messages.
 */
import { ILimits } from '../../api/types';
import { launchEntry } from './launch';
import { FieldError, Values } from './types';

/** Characters of `requirements` (rules.py `REQUIREMENTS_MAX_LENGTH`). */
const REQUIREMENTS_MAX_LENGTH = 255;
const REQUIREMENTS_ADVICE = 'give a path relative to the package directory, e.g. requirements.txt';

export const RULES: {
  [rule: string]: { reads: string[]; check: (values: Values, limits: ILimits) => void };
} = {
  pservers_fit_mode: {
    reads: ['mode', 'pservers'],
    check: values => {
      if (values.mode === 'ps' && (values.pservers as number) < 1) {
        throw new FieldError('pservers', 'ps mode needs at least 1 parameter server');
      }
      if (values.mode === 'collective' && values.pservers !== 0) {
        throw new FieldError(
          'pservers',
          "collective mode has no parameter servers; set pservers to 0 or use mode 'ps'"
        );
      }
    }
  },
  gpus_per_job: {
    reads: ['trainers', 'trainer_gpu'],
    check: (values, limits) => {
      const trainers = values.trainers as number;
      const gpus = values.trainer_gpu as number;
      if (limits.max_gpu_per_job !== null && trainers * gpus > limits.max_gpu_per_job) {
        throw new FieldError(
          'trainer_gpu',
          `${trainers} trainers x ${gpus} GPU = ${trainers * gpus} GPUs; ` +
            `this server allows ${limits.max_gpu_per_job} per job`
        );
      }
    }
  },
  ranks_fit: {
    reads: ['mode', 'entry_point', 'trainer_gpu', 'procs_per_trainer'],
    check: (values, limits) => {
      const procs = values.procs_per_trainer as number;
      const gpus = values.trainer_gpu as number;
      const launch = launchEntry(values.entry_point as string);
      if (launch && values.mode === 'ps') {
        throw new FieldError(
          'entry_point',
          "paddle.distributed.launch runs collective jobs here; use mode 'collective', or run the script itself " +
            '(python train.py) in ps mode, where every replica already gets its role'
        );
      }
      if (launch && procs > 1) {
        throw new FieldError(
          'procs_per_trainer',
          'must be 1 when the entry point runs paddle.distributed.launch, which starts the ranks itself; ' +
            `set --nproc_per_node in the entry point instead of procs_per_trainer ${procs}, ` +
            'or run the script itself (python train.py) with procs_per_trainer'
        );
      }
      if (gpus && procs !== 1 && procs !== gpus) {
        throw new FieldError(
          'procs_per_trainer',
          `a trainer with GPUs runs one process per GPU (${gpus}); set procs_per_trainer to 1 or ${gpus}, ` +
            `or trainer_gpu to ${procs}`
        );
      }
      const most = limits.max_procs_per_trainer;
      if (most !== undefined && gpus > most) {
        throw new FieldError(
          'trainer_gpu',
          `${gpus} GPUs mean ${gpus} processes per trainer; this server allows ${most}`
        );
      }
    }
  },
  requirements_in_package: {
    reads: ['requirements'],
    check: values => {
      const path = values.requirements as string;
      if (!path) {
        return; // requirements.txt when the package has one
      }
      const length = [...path].length;
      if (length > REQUIREMENTS_MAX_LENGTH) {
        throw new FieldError(
          'requirements',
          `is ${length} characters long; at most ${REQUIREMENTS_MAX_LENGTH} are allowed for a path ` +
            'relative to the package directory, e.g. requirements.txt'
        );
      }
      if (path.startsWith('/')) {
        throw new FieldError(
          'requirements',
          `'${path}' is an absolute path; ${REQUIREMENTS_ADVICE}`
        );
      }
      if (path.split('/').includes('..')) {
        throw new FieldError(
          'requirements',
          `'${path}' leaves the package directory ('..'); ${REQUIREMENTS_ADVICE}`
        );
      }
    }
  }
};
