/**
 * The New job form, built from the job schema `GET /config` serves: its fields, labels, hints,
 * sections, defaults, choices, and which fields show for the chosen mode and this backend.
 * Inline validation with the spec's own messages, a totals line, and the server's 422 `field`
 * error on its field.  No field is named here: a field added to the job model's table appears
 * in the form with the next server.
 */
import { ApiError, PaddleApi } from './api';
import { clear, h } from './dom';
import { IFieldSchema, IJobSchema, IJobStatus, IServerConfig } from './types';
import {
  FormErrors,
  FormValues,
  asText,
  choices,
  defaultFor,
  defaultValues,
  formFields,
  isShown,
  toPayload,
  totalsLine,
  validateForm
} from './validate';

type Input = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

interface IFieldUi {
  field: IFieldSchema;
  row: HTMLElement;
  input: Input;
  error: HTMLElement;
}

/** The hint under a field: its help, plus this server's bound when it has one. */
export function hintFor(field: IFieldSchema, schema: IJobSchema): string {
  const bounds: string[] = [];
  if (field.maximum !== undefined) {
    bounds.push(`at most ${field.maximum}`);
  }
  if (field['x-maximum-quantity']) {
    bounds.push(`at most ${field['x-maximum-quantity']}`);
  }
  if (field['x-maximum-seconds'] !== undefined) {
    bounds.push(`at most ${field['x-maximum-seconds']}s`);
  }
  if (field['x-kind'] === 'image' && field.enum) {
    bounds.push(`allowed: ${field.enum.filter(item => typeof item === 'string').join(', ')}`);
  }
  const perJob = schema['x-limits'].max_gpu_per_job;
  if (field['x-rule'] === 'gpus_per_job' && perJob !== null) {
    bounds.push(`${perJob} per job`);
  }
  return [field.description, ...bounds].join('; ');
}

export class JobFormView {
  readonly node: HTMLElement;
  private readonly _fieldsNode: HTMLElement;
  private readonly _fields = new Map<string, IFieldUi>();
  private readonly _totals: HTMLElement;
  private readonly _formError: HTMLElement;
  private readonly _submit: HTMLButtonElement;
  private readonly _imageList: HTMLDataListElement;
  private _schema: IJobSchema | null = null;
  private _backend = '';
  private _serverErrors: FormErrors = {};
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
    this._fieldsNode = h('div', { className: 'pn-form-fields' });
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
    form.appendChild(this._fieldsNode);
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

  /** Rebuild the form from the server's job schema, with its defaults filled in. */
  reset(config: IServerConfig | null): void {
    this._schema = config?.job_schema ?? null;
    this._backend = this._schema?.['x-backend'] ?? config?.backend?.name ?? '';
    this._serverErrors = {};
    this._formError.textContent = '';
    this._fields.clear();
    clear(this._fieldsNode);
    clear(this._imageList);
    if (!this._schema) {
      this._formError.textContent =
        'The New job form needs the server settings (GET /config), which could not be loaded.';
      this._totals.textContent = '';
      this._submit.disabled = true;
      return;
    }
    const schema = this._schema;
    for (const group of schema['x-groups']) {
      const members = formFields(schema).filter(([, field]) => field['x-group'] === group);
      if (!members.length) {
        continue;
      }
      const section = h(
        'fieldset',
        { className: 'pn-form-group', 'data-group': group },
        h('legend', {}, group)
      );
      for (const [name, field] of members) {
        section.appendChild(this._createField(name, field, schema));
      }
      this._fieldsNode.appendChild(section);
    }
    const values = defaultValues(schema);
    for (const [name, ui] of this._fields) {
      this._setValue(ui, values[name]);
    }
    for (const image of schema.properties.image?.examples ?? []) {
      this._imageList.appendChild(h('option', { value: image }));
    }
    this._validate();
  }

  values(): FormValues {
    const values: FormValues = {};
    for (const [name, ui] of this._fields) {
      values[name] =
        ui.input instanceof HTMLInputElement && ui.input.type === 'checkbox'
          ? ui.input.checked
          : ui.input.value;
    }
    return values;
  }

  private _setValue(ui: IFieldUi, value: string | boolean | undefined): void {
    if (ui.input instanceof HTMLInputElement && ui.input.type === 'checkbox') {
      ui.input.checked = Boolean(value);
    } else {
      ui.input.value = String(value ?? '');
    }
  }

  private _createField(name: string, field: IFieldSchema, schema: IJobSchema): HTMLElement {
    const id = `pn-field-${name}-${Math.random().toString(36).slice(2, 8)}`;
    const common = {
      id,
      name,
      'data-field': name,
      'data-testid': `paddle-field-${name}`,
      className: 'pn-input',
      title: field.description
    };
    const kind = field['x-kind'];
    const placeholder = field['x-placeholder'] ?? null;
    let input: Input;
    if (kind === 'choice') {
      input = h(
        'select',
        common,
        ...choices(field).map(([value, meaning]) =>
          h('option', { value }, meaning ? `${value}: ${meaning}` : value)
        )
      );
    } else if (kind === 'env') {
      input = h('textarea', { ...common, rows: 2, placeholder });
    } else if (kind === 'switch') {
      input = h('input', { ...common, type: 'checkbox', className: '' });
    } else {
      input = h('input', {
        ...common,
        type: 'text',
        inputmode: kind === 'count' ? 'numeric' : null,
        placeholder,
        list: kind === 'image' ? this._imageList.id : null,
        autocomplete: 'off',
        spellcheck: 'false'
      });
    }
    const error = h('div', {
      className: 'pn-field-error',
      'data-testid': `paddle-error-${name}`,
      role: 'alert'
    });
    const row =
      kind === 'switch'
        ? h(
            'div',
            { className: 'pn-field pn-check' },
            h('label', { for: id }, input, ` ${field.title}`),
            error
          )
        : h(
            'div',
            { className: 'pn-field' },
            h('label', { for: id }, field.title),
            input,
            h('div', { className: 'pn-hint' }, hintFor(field, schema)),
            error
          );
    this._fields.set(name, { field, row, input, error });
    return row;
  }

  private _edited(target: Element): void {
    const name = target.getAttribute('data-field');
    if (name && this._serverErrors[name]) {
      delete this._serverErrors[name];
    }
    if (name === 'mode' && this._schema) {
      // A replica count of a role the new mode lacks becomes 0; one it has gets its default back.
      const mode = (target as HTMLSelectElement).value;
      for (const ui of this._fields.values()) {
        if (
          ui.field['x-kind'] !== 'count' ||
          ui.field['x-modes'].length === choices(this._schema.properties.mode).length
        ) {
          continue;
        }
        if (!ui.field['x-modes'].includes(mode)) {
          ui.input.value = '0';
        } else if (ui.input.value === '0' || ui.input.value === '') {
          ui.input.value = asText(defaultFor(ui.field, mode));
        }
      }
    }
    this._formError.textContent = '';
    this._validate();
  }

  /** Show every field's message and the totals; returns true when the form may be sent. */
  private _validate(): boolean {
    const schema = this._schema;
    if (!schema) {
      return false;
    }
    const values = this.values();
    const errors = { ...validateForm(values, schema, this._backend), ...this._serverErrors };
    const mode = String(values.mode ?? '');
    for (const [name, ui] of this._fields) {
      const message = errors[name] ?? '';
      ui.error.textContent = message;
      ui.row.classList.toggle('pn-invalid', Boolean(message));
      ui.input.setAttribute('aria-invalid', message ? 'true' : 'false');
      ui.row.hidden = !isShown(ui.field, mode, this._backend);
    }
    for (const section of this._fieldsNode.querySelectorAll('fieldset')) {
      section.hidden = [...section.querySelectorAll<HTMLElement>('.pn-field')].every(
        row => row.hidden
      );
    }
    const totals = totalsLine(values, schema, this._backend);
    this._totals.textContent = totals ? `Total: ${totals}` : 'Total: fix the fields marked above';
    const ok = Object.keys(errors).length === 0;
    this._submit.disabled = !ok || this._busy;
    return ok;
  }

  private async _send(): Promise<void> {
    if (!this._schema || !this._validate() || this._busy) {
      return;
    }
    this._busy = true;
    this._submit.disabled = true;
    this._submit.textContent = 'Submitting…';
    try {
      const job = await this._api.submit(toPayload(this.values(), this._schema, this._backend));
      this._submitted(job);
    } catch (error) {
      const apiError = error as ApiError;
      const field = apiError.field ?? (apiError.code === 'name_taken' ? 'job_name' : null);
      const ui = field ? this._fields.get(field) : undefined;
      if (field && ui) {
        this._serverErrors[field] = apiError.message;
        ui.input.focus();
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
