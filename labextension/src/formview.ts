/**
 * The New job form: fields, defaults and limits from `GET /config`, inline validation with
 * the spec's own messages, a totals line, and the server's 422 `field` error on its field.
 */
import { ApiError, PaddleApi } from './api';
import { h } from './dom';
import { IServerConfig, DEFAULT_LIMITS, IJobStatus, ILimits } from './types';
import {
  FieldName,
  FormErrors,
  IFormValues,
  defaultValues,
  toPayload,
  totalsLine,
  validateForm
} from './validate';

interface IFieldDef {
  name: FieldName;
  label: string;
  kind: 'text' | 'number' | 'select' | 'textarea' | 'checkbox';
  hint?: (limits: ILimits) => string;
  placeholder?: string;
  psOnly?: boolean;
}

const FIELDS: IFieldDef[] = [
  {
    name: 'job_name',
    label: 'Name',
    kind: 'text',
    placeholder: 'generated when empty',
    hint: () => "lower-case letters, digits, '-'; at most 40"
  },
  {
    name: 'entry_point',
    label: 'Entry point',
    kind: 'text',
    placeholder: 'python train.py --epochs 3'
  },
  {
    name: 'trainer_package',
    label: 'Package directory',
    kind: 'text',
    placeholder: 'a directory in your home, e.g. work/mnist',
    hint: () => 'the code to run; copied at submit when snapshot is on'
  },
  { name: 'mode', label: 'Mode', kind: 'select' },
  {
    name: 'pservers',
    label: 'Parameter servers',
    kind: 'number',
    psOnly: true,
    hint: l => `at most ${l.max_pservers}`
  },
  {
    name: 'pserver_cpu',
    label: 'CPU per pserver',
    kind: 'text',
    psOnly: true,
    hint: l => (l.max_cpu_per_replica ? `at most ${l.max_cpu_per_replica}` : 'e.g. 500m, 2')
  },
  {
    name: 'pserver_mem',
    label: 'Memory per pserver',
    kind: 'text',
    psOnly: true,
    hint: l => (l.max_mem_per_replica ? `at most ${l.max_mem_per_replica}` : 'e.g. 512Mi, 4Gi')
  },
  { name: 'trainers', label: 'Trainers', kind: 'number', hint: l => `at most ${l.max_trainers}` },
  {
    name: 'trainer_cpu',
    label: 'CPU per trainer',
    kind: 'text',
    hint: l => (l.max_cpu_per_replica ? `at most ${l.max_cpu_per_replica}` : 'e.g. 500m, 2')
  },
  {
    name: 'trainer_mem',
    label: 'Memory per trainer',
    kind: 'text',
    hint: l => (l.max_mem_per_replica ? `at most ${l.max_mem_per_replica}` : 'e.g. 512Mi, 4Gi')
  },
  {
    name: 'trainer_gpu',
    label: 'GPUs per trainer',
    kind: 'number',
    hint: l =>
      `at most ${l.max_gpu_per_replica}${l.max_gpu_per_job !== null ? `, ${l.max_gpu_per_job} per job` : ''}`
  },
  {
    name: 'image',
    label: 'Image',
    kind: 'text',
    hint: l =>
      l.allowed_images
        ? `allowed: ${l.allowed_images.join(', ')}`
        : 'Kubernetes only; empty: the server default'
  },
  {
    name: 'max_restarts',
    label: 'Restarts per replica',
    kind: 'number',
    hint: l => `at most ${l.max_restarts}`
  },
  {
    name: 'timeout',
    label: 'Time limit',
    kind: 'text',
    placeholder: 'none',
    hint: l => `seconds or 30m, 2h${l.max_timeout !== null ? `; at most ${l.max_timeout}s` : ''}`
  },
  { name: 'env', label: 'Environment', kind: 'textarea', placeholder: 'KEY=value, one per line' },
  { name: 'snapshot', label: 'Snapshot the package at submit', kind: 'checkbox' }
];

interface IFieldUi {
  def: IFieldDef;
  row: HTMLElement;
  input: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;
  error: HTMLElement;
  hint: HTMLElement;
}

export class JobFormView {
  readonly node: HTMLElement;
  private readonly _fields = new Map<FieldName, IFieldUi>();
  private readonly _totals: HTMLElement;
  private readonly _formError: HTMLElement;
  private readonly _submit: HTMLButtonElement;
  private readonly _imageList: HTMLDataListElement;
  private _limits: ILimits = DEFAULT_LIMITS;
  private _serverErrors: FormErrors = {};
  /** Fields that mean nothing on this server (the image on the local backend). */
  private _unused = new Set<FieldName>();
  private _busy = false;

  constructor(
    private readonly _api: PaddleApi,
    private readonly _close: () => void,
    private readonly _submitted: (job: IJobStatus) => void
  ) {
    this._imageList = h('datalist', { id: `pn-images-${Math.random().toString(36).slice(2)}` });
    const form = h('form', {
      className: 'pn-form',
      'data-testid': 'paddle-form',
      novalidate: true
    });
    for (const def of FIELDS) {
      form.appendChild(this._createField(def));
    }
    this._totals = h('div', { className: 'pn-totals', 'data-testid': 'paddle-form-totals' });
    this._formError = h('div', {
      className: 'pn-form-error',
      'data-testid': 'paddle-form-error',
      role: 'alert'
    });
    this._submit = h(
      'button',
      { className: 'pn-button pn-primary', type: 'submit', 'data-testid': 'paddle-submit' },
      'Submit'
    );
    const cancel = h(
      'button',
      { className: 'pn-button', type: 'button', 'data-testid': 'paddle-form-cancel' },
      'Cancel'
    );
    cancel.addEventListener('click', () => this._close());
    form.appendChild(this._totals);
    form.appendChild(this._formError);
    form.appendChild(h('div', { className: 'pn-actions' }, this._submit, cancel));
    form.appendChild(this._imageList);
    form.addEventListener('submit', event => {
      event.preventDefault();
      void this._send();
    });
    form.addEventListener('input', event => this._edited(event.target as Element));
    form.addEventListener('change', event => this._edited(event.target as Element));
    this.node = h(
      'div',
      { className: 'pn-form-view' },
      h(
        'div',
        { className: 'pn-detail-head' },
        h('span', { className: 'pn-detail-name' }, 'New job')
      ),
      form
    );
  }

  /** Reset the form to the server's defaults and limits. */
  reset(config: IServerConfig | null): void {
    this._limits = { ...DEFAULT_LIMITS, ...(config?.limits ?? {}) };
    this._unused = new Set(config?.backend?.name === 'local' ? ['image'] : []);
    this._serverErrors = {};
    this._formError.textContent = '';
    const values = defaultValues(config?.defaults ?? {}, config?.default_image ?? null);
    if (this._unused.has('image')) {
      values.image = '';
    }
    for (const [name, ui] of this._fields) {
      if (ui.input instanceof HTMLInputElement && ui.input.type === 'checkbox') {
        ui.input.checked = values.snapshot;
      } else {
        ui.input.value = String(values[name]);
      }
      ui.hint.textContent = ui.def.hint ? ui.def.hint(this._limits) : '';
    }
    this._imageList.textContent = '';
    for (const image of config?.images ?? []) {
      this._imageList.appendChild(h('option', { value: image }));
    }
    this._validate();
  }

  values(): IFormValues {
    const get = (name: FieldName): string => this._fields.get(name)!.input.value;
    return {
      job_name: get('job_name'),
      entry_point: get('entry_point'),
      trainer_package: get('trainer_package'),
      image: get('image'),
      mode: get('mode'),
      pservers: get('pservers'),
      trainers: get('trainers'),
      pserver_cpu: get('pserver_cpu'),
      pserver_mem: get('pserver_mem'),
      trainer_cpu: get('trainer_cpu'),
      trainer_mem: get('trainer_mem'),
      trainer_gpu: get('trainer_gpu'),
      env: get('env'),
      snapshot: (this._fields.get('snapshot')!.input as HTMLInputElement).checked,
      max_restarts: get('max_restarts'),
      timeout: get('timeout')
    };
  }

  private _createField(def: IFieldDef): HTMLElement {
    const id = `pn-field-${def.name}-${Math.random().toString(36).slice(2, 8)}`;
    const common = {
      id,
      name: def.name,
      'data-field': def.name,
      'data-testid': `paddle-field-${def.name}`,
      className: 'pn-input'
    };
    let input: IFieldUi['input'];
    if (def.kind === 'select') {
      input = h(
        'select',
        common,
        h('option', { value: 'ps' }, 'ps: parameter servers + trainers'),
        h('option', { value: 'collective' }, 'collective')
      );
    } else if (def.kind === 'textarea') {
      input = h('textarea', { ...common, rows: 2, placeholder: def.placeholder });
    } else if (def.kind === 'checkbox') {
      input = h('input', { ...common, type: 'checkbox', className: '' });
    } else {
      input = h('input', {
        ...common,
        type: 'text',
        inputmode: def.kind === 'number' ? 'numeric' : null,
        placeholder: def.placeholder,
        list: def.name === 'image' ? this._imageList.id : null,
        autocomplete: 'off',
        spellcheck: 'false'
      });
    }
    const error = h('div', {
      className: 'pn-field-error',
      'data-testid': `paddle-error-${def.name}`,
      role: 'alert'
    });
    const hint = h('div', { className: 'pn-hint' });
    const row =
      def.kind === 'checkbox'
        ? h(
            'div',
            { className: 'pn-field pn-check' },
            h('label', { for: id }, input, ` ${def.label}`),
            error
          )
        : h(
            'div',
            { className: 'pn-field' },
            h('label', { for: id }, def.label),
            input,
            hint,
            error
          );
    this._fields.set(def.name, { def, row, input, error, hint });
    return row;
  }

  private _edited(target: Element): void {
    const field = target.getAttribute('data-field');
    if (field && this._serverErrors[field]) {
      delete this._serverErrors[field];
    }
    if (field === 'mode') {
      const pservers = this._fields.get('pservers')!.input;
      if (target instanceof HTMLSelectElement && target.value === 'collective') {
        pservers.value = '0';
      } else if (pservers.value === '0' || pservers.value === '') {
        pservers.value = '1';
      }
    }
    this._formError.textContent = '';
    this._validate();
  }

  /** Show every field's message and the totals; returns true when the form may be sent. */
  private _validate(): boolean {
    const values = this.values();
    const errors = { ...validateForm(values, this._limits), ...this._serverErrors };
    const collective = values.mode === 'collective';
    for (const [name, ui] of this._fields) {
      const message = errors[name] ?? '';
      ui.error.textContent = message;
      ui.row.classList.toggle('pn-invalid', Boolean(message));
      ui.input.setAttribute('aria-invalid', message ? 'true' : 'false');
      ui.row.hidden = Boolean(ui.def.psOnly && collective) || this._unused.has(name);
    }
    const totals = totalsLine(values, this._limits);
    this._totals.textContent = totals ? `Total: ${totals}` : 'Total: fix the fields marked above';
    const ok = Object.keys(errors).length === 0;
    this._submit.disabled = !ok || this._busy;
    return ok;
  }

  private async _send(): Promise<void> {
    if (!this._validate() || this._busy) {
      return;
    }
    this._busy = true;
    this._submit.disabled = true;
    this._submit.textContent = 'Submitting…';
    try {
      const job = await this._api.submit(toPayload(this.values()));
      this._submitted(job);
    } catch (error) {
      const apiError = error as ApiError;
      const field = apiError.field ?? (apiError.code === 'name_taken' ? 'job_name' : null);
      if (field && this._fields.has(field as FieldName)) {
        this._serverErrors[field] = apiError.message;
        this._fields.get(field as FieldName)!.input.focus();
      } else {
        this._formError.textContent = apiError.message ?? String(error);
      }
    } finally {
      this._busy = false;
      this._submit.textContent = 'Submit';
      this._validate();
    }
  }
}
