/**
 * The New job form, built from the job schema `GET /config` serves: its fields, labels, hints,
 * sections, defaults, choices, and which fields show for the chosen mode and this backend.
 * Inline validation with the spec's own messages, a totals line, and the server's 422 `field`
 * error on its field.  No field is named here: a field added to the job model's table appears
 * in the form with the next server.
 *
 * On a backend that checks quota (`backend.quota_check`: Kubernetes) a valid form asks the
 * server's dry run, a moment after the last edit, what the namespace's ResourceQuota and the
 * job's ClusterQueue have free (when and what to ask: ../logic/quota), and shows its sentence
 * under the totals: a warning when the job will wait, an error (Submit disabled) when it can
 * never run.
 */
import { ApiError, PaddleApi } from '../api/client';
import { clear, h } from './dom';
import { __ } from '../i18n';
import { IFormPrefill } from '../logic/prefill';
import { suggestQuantity } from '../logic/quantity';
import { QUOTA_LEVELS, QuotaCheck, STALE, checksQuota } from '../logic/quota';
import { IBackendInfo, IFieldSchema, IJobSchema, IJobStatus, IServerConfig } from '../api/types';
import {
  FormErrors,
  FormValues,
  asText,
  choices,
  defaultFor,
  defaultValues,
  formFields,
  inMode,
  isShown,
  toPayload,
  totalsLine,
  validateForm
} from '../logic/validate';

type Input = HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement;

interface IFieldUi {
  field: IFieldSchema;
  row: HTMLElement;
  input: Input;
  hint: HTMLElement | null;
  error: HTMLElement;
}

/** The GPUs the backend really has, when it says (`capacity.gpus` of the local backend). */
export function gpuCapacity(backend: IBackendInfo | null | undefined): number | null {
  const capacity = backend?.capacity as { gpus?: unknown } | undefined;
  return Array.isArray(capacity?.gpus) ? capacity.gpus.length : null;
}

/**
 * Fields most jobs leave alone (the Run section: env, snapshot, restarts, time limit), shown
 * collapsed under "Advanced".
 */
export function isAdvancedGroup(group: string): boolean {
  return group === 'Run';
}

/**
 * What the server's Paddle can run, in its own sentence (`backend.paddle.summary` of the local
 * backend), and whether a mode is out of reach there; null when the backend does not say.
 */
export function paddleNote(
  backend: IBackendInfo | null | undefined
): { text: string; limited: boolean } | null {
  const paddle = backend?.paddle as
    { summary?: unknown; modes?: unknown; error?: unknown } | null | undefined;
  if (!paddle || typeof paddle.summary !== 'string' || !paddle.summary) {
    return null;
  }
  const modes = Array.isArray(paddle.modes) ? paddle.modes : [];
  return { text: paddle.summary, limited: Boolean(paddle.error) || !modes.includes('ps') };
}

/** The hint under a field: its help, plus this server's bound when it has one. */
export function hintFor(
  field: IFieldSchema,
  schema: IJobSchema,
  gpus: number | null = null
): string {
  const bounds: string[] = [];
  if (field['x-rule'] === 'gpus_per_job' && gpus === 0) {
    return [field.description, __('this server has no GPUs')].join('; ');
  }
  if (field.maximum !== undefined) {
    const maximum =
      field['x-rule'] === 'gpus_per_job' && gpus !== null
        ? Math.min(field.maximum, gpus)
        : field.maximum;
    bounds.push(`at most ${maximum}`);
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
  private readonly _quotaLine: HTMLElement;
  private readonly _quota = new QuotaCheck();
  private readonly _formError: HTMLElement;
  private readonly _submit: HTMLButtonElement;
  private readonly _imageList: HTMLDataListElement;
  private _schema: IJobSchema | null = null;
  private _backend = '';
  private readonly _paddleNote: HTMLElement;
  private _serverErrors: FormErrors = {};
  private _busy = false;
  private _gpus: number | null = null;
  /** Fields left once (blur) or after a submit attempt: their "required" errors show. */
  private readonly _touched = new Set<string>();
  private _submitTried = false;

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
    this._paddleNote = h('div', { className: 'pn-form-note', 'data-testid': 'paddle-form-paddle' });
    this._paddleNote.hidden = true;
    this._fieldsNode = h('div', { className: 'pn-form-fields' });
    this._totals = h('div', { className: 'pn-totals', 'data-testid': 'paddle-form-totals' });
    this._quotaLine = h('div', {
      className: 'pn-quota',
      'data-testid': 'paddle-form-quota',
      role: 'status',
      'aria-live': 'polite'
    });
    this._quotaLine.hidden = true;
    this._formError = h('div', {
      className: 'pn-form-error',
      'data-testid': 'paddle-form-error',
      role: 'alert'
    });
    this._formError.hidden = true;
    this._submit = h(
      'button',
      { className: 'pn-button pn-primary', type: 'submit', 'data-testid': 'paddle-submit' },
      __('Submit')
    );
    const cancel = h(
      'button',
      { className: 'pn-button', type: 'button', 'data-testid': 'paddle-form-cancel' },
      __('Cancel')
    );
    cancel.addEventListener('click', () => this._close());
    form.appendChild(this._paddleNote);
    form.appendChild(this._fieldsNode);
    form.appendChild(this._totals);
    form.appendChild(this._quotaLine);
    form.appendChild(this._formError);
    form.appendChild(h('div', { className: 'pn-actions' }, this._submit, cancel));
    form.appendChild(this._imageList);
    form.addEventListener('submit', event => {
      event.preventDefault();
      void this._send();
    });
    form.addEventListener('input', event => this._edited(event.target as Element));
    form.addEventListener('change', event => this._edited(event.target as Element));
    form.addEventListener('focusout', event => {
      const name = (event.target as Element).getAttribute('data-field');
      if (name && !this._touched.has(name)) {
        this._touched.add(name);
        this._validate();
      }
    });
    form.addEventListener('keydown', event => {
      if (event.key === 'Escape') {
        event.preventDefault();
        this._close();
      }
    });
    form.addEventListener('click', event => {
      const fix = (event.target as Element).closest('[data-suggestion]');
      if (fix) {
        const ui = this._fields.get(fix.getAttribute('data-for') ?? '');
        if (ui) {
          ui.input.value = fix.getAttribute('data-suggestion') ?? '';
          ui.input.focus();
          this._edited(ui.input);
        }
      }
    });
    this._heading = h('h2', { className: 'pn-detail-name', tabindex: -1 }, __('New job'));
    this.node = h(
      'div',
      { className: 'pn-form-view' },
      h('div', { className: 'pn-detail-head' }, this._heading),
      form
    );
  }

  private readonly _heading: HTMLElement;

  /** Keyboard focus to the form's first field (opening the form). */
  focusFirst(): void {
    const first = [...this._fields.values()].find(ui => !ui.row.hidden);
    (first?.input ?? this._heading).focus();
  }

  /** Rebuild the form from the server's job schema, with its defaults (or `prefill`) filled in. */
  reset(config: IServerConfig | null, prefill: IFormPrefill = {}): void {
    this._schema = config?.job_schema ?? null;
    this._backend = this._schema?.['x-backend'] ?? config?.backend?.name ?? '';
    this._gpus = gpuCapacity(config?.backend);
    const note = paddleNote(config?.backend);
    this._paddleNote.textContent = note?.text ?? '';
    this._paddleNote.hidden = note === null;
    this._paddleNote.classList.toggle('pn-form-note-warning', note?.limited ?? false);
    this._quota.enabled = checksQuota(config?.backend);
    this._clearQuota();
    this._serverErrors = {};
    this._touched.clear();
    this._submitTried = false;
    this._formError.textContent = '';
    this._formError.hidden = true;
    this._fields.clear();
    clear(this._fieldsNode);
    clear(this._imageList);
    if (!this._schema) {
      this._formError.textContent = __(
        'The New job form needs the server settings (GET /config), which could not be loaded.'
      );
      this._formError.hidden = false;
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
      if (isAdvancedGroup(group)) {
        this._fieldsNode.appendChild(
          h(
            'details',
            { className: 'pn-advanced', 'data-testid': 'paddle-form-advanced' },
            h('summary', {}, __('Advanced: image, environment, restarts, time limit, snapshot')),
            section
          )
        );
      } else {
        this._fieldsNode.appendChild(section);
      }
    }
    const values = { ...defaultValues(schema), ...prefill };
    for (const [name, ui] of this._fields) {
      this._setValue(ui, values[name]);
    }
    for (const image of schema.properties.image?.examples ?? []) {
      this._imageList.appendChild(h('option', { value: image }));
    }
    if (this._validate()) {
      this._scheduleQuotaCheck();
    }
  }

  /**
   * Ask the server's dry run what the quota says about the form's values and show its sentence
   * (nothing when the values are invalid, the backend checks no quota, or the dry run fails:
   * field errors show inline, the rest on Submit).
   */
  async checkResources(): Promise<void> {
    this._quota.cancelTimer();
    const schema = this._schema;
    if (!schema || !this._quota.enabled || !this._validate()) {
      return;
    }
    const note = await this._quota.ask(() =>
      this._api.dryRun(toPayload(this.values(), schema, this._backend))
    );
    if (note === STALE) {
      return;
    }
    this._quotaLine.textContent = note?.text ?? '';
    this._quotaLine.hidden = note === null;
    this._quotaLine.setAttribute('data-verdict', note?.level ?? '');
    for (const level of QUOTA_LEVELS) {
      this._quotaLine.classList.toggle(`pn-quota-${level}`, note?.level === level);
    }
    this._validate();
  }

  /** The last sentence was about other values: hide it, and drop any answer still on its way. */
  private _clearQuota(): void {
    this._quota.clear();
    this._quotaLine.textContent = '';
    this._quotaLine.hidden = true;
  }

  private _scheduleQuotaCheck(): void {
    this._quota.schedule(() => void this.checkResources());
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
    // Errors are read out through aria-describedby when the field is focused; the hint goes
    // while an error takes its place.
    const error = h('div', {
      className: 'pn-field-error',
      id: `${id}-error`,
      'data-testid': `paddle-error-${name}`
    });
    const hint =
      kind === 'switch'
        ? null
        : h('div', { className: 'pn-hint', id: `${id}-hint` }, hintFor(field, schema, this._gpus));
    input.setAttribute('aria-describedby', hint ? `${id}-hint` : `${id}-error`);
    if (field.description === input.title) {
      input.removeAttribute('title');
    }
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
            hint,
            error
          );
    this._fields.set(name, { field, row, input, hint, error });
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
        if (!inMode(ui.field, mode)) {
          ui.input.value = '0';
        } else if (ui.input.value === '0' || ui.input.value === '') {
          ui.input.value = asText(defaultFor(ui.field, mode));
        }
      }
    }
    this._formError.textContent = '';
    this._formError.hidden = true;
    this._clearQuota();
    if (this._validate()) {
      this._scheduleQuotaCheck();
    }
  }

  /**
   * An error shows once it can help: a value that does not parse shows while typing, but an
   * empty required field only after it was left or a submit was tried (not on open).
   */
  private _shows(name: string, ui: IFieldUi): boolean {
    if (this._submitTried || this._touched.has(name) || this._serverErrors[name]) {
      return true;
    }
    return ui.input instanceof HTMLInputElement && ui.input.type === 'checkbox'
      ? false
      : ui.input.value.trim() !== '';
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
    let shownErrors = 0;
    for (const [name, ui] of this._fields) {
      ui.row.hidden = !isShown(ui.field, mode, this._backend);
      const message = errors[name] && this._shows(name, ui) ? errors[name] : '';
      if (message && !ui.row.hidden) {
        shownErrors++;
      }
      this._showError(name, ui, message);
    }
    for (const section of this._fieldsNode.querySelectorAll('fieldset')) {
      section.hidden = [...section.querySelectorAll<HTMLElement>('.pn-field')].every(
        row => row.hidden
      );
      const advanced = section.closest('details');
      if (advanced) {
        advanced.hidden = section.hidden;
      }
    }
    const totals = totalsLine(values, schema, this._backend);
    this._totals.textContent = totals
      ? __('Total: %1', totals)
      : shownErrors
        ? __('Total: fix the fields marked above')
        : __('Total: fill in the fields above');
    const ok = Object.keys(errors).length === 0;
    // Submit stays available while the only problems are fields not visited yet: pressing it
    // shows them (and moves focus to the first).
    // A job the quota can never fit is refused by the server: no Submit until the values change.
    this._submit.disabled = shownErrors > 0 || this._busy || this._quota.blocksSubmit;
    return ok;
  }

  private _showError(name: string, ui: IFieldUi, message: string): void {
    const kind = ui.field['x-kind'];
    const suggestion =
      message && (kind === 'memory' || kind === 'cpu')
        ? suggestQuantity(ui.input.value, kind)
        : null;
    // Leave the same message in place: re-rendering on blur would remove the suggestion
    // button between the press and the click on it.
    const shown = `${message}|${suggestion ?? ''}`;
    if (ui.error.getAttribute('data-shown') !== shown) {
      ui.error.setAttribute('data-shown', shown);
      ui.error.textContent = message;
      if (suggestion) {
        ui.error.textContent = '';
        ui.error.appendChild(document.createTextNode(`${message} `));
        ui.error.appendChild(
          h(
            'button',
            {
              type: 'button',
              className: 'pn-link',
              'data-suggestion': suggestion,
              'data-for': name,
              'data-testid': `paddle-suggest-${name}`
            },
            __('Did you mean %1?', suggestion)
          )
        );
      }
    }
    if (ui.hint) {
      ui.hint.hidden = Boolean(message);
    }
    ui.row.classList.toggle('pn-invalid', Boolean(message));
    ui.input.setAttribute('aria-invalid', message ? 'true' : 'false');
    const described = message || !ui.hint ? ui.error.id : ui.hint.id;
    ui.input.setAttribute('aria-describedby', described);
  }

  private async _send(): Promise<void> {
    this._submitTried = true;
    if (!this._schema || this._busy) {
      return;
    }
    if (!this._validate()) {
      const first = [...this._fields.values()].find(ui => !ui.row.hidden && ui.error.textContent);
      if (first) {
        first.row.closest('details')?.setAttribute('open', '');
        first.input.focus();
      }
      return;
    }
    if (this._quota.blocksSubmit) {
      return;
    }
    this._quota.cancelTimer();
    this._busy = true;
    this._submit.disabled = true;
    this._submit.textContent = __('Submitting…');
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
        this._formError.hidden = false;
      }
    } finally {
      this._busy = false;
      this._submit.textContent = __('Submit');
      this._validate();
    }
  }
}
