/**
 * The Notifications settings view (the panel toolbar's bell): which events, a webhook URL and its
 * format, an e-mail address, saved once for all the user's jobs (`PUT /notifications`).  Under
 * each channel it says in words how the last delivery went (`logic/notifywords.ts`), refreshed
 * while the view is shown, so a failing webhook is seen without reading a log.  A setting the
 * server refuses marks its field and shows the server's sentence.
 */
import { MainAreaWidget } from '@jupyterlab/apputils';
import { LabIcon } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { ApiError, PaddleApi } from '../api/client';
import type { INotificationSettings, INotifications } from '../api/types';
import { __ } from '../i18n';
import { channelWords } from '../logic/notifywords';
import { clear, h } from './dom';

/** Seconds between two reads of the channels' delivery state while the view is shown. */
const REFRESH_SECONDS = 5;
const CHANNELS = ['webhook', 'email'] as const;
type Channel = (typeof CHANNELS)[number];
type EventName = NonNullable<INotificationSettings['events']>[number];

/** A bell: the toolbar's "Notifications". */
export const bellIcon = new LabIcon({
  name: 'paddle-nbext:notifications',
  svgstr:
    '<svg xmlns="http://www.w3.org/2000/svg" width="16" viewBox="0 0 24 24">' +
    '<g class="jp-icon3" fill="#616161"><path d="M12 22a2.5 2.5 0 0 0 2.45-2h-4.9A2.5 2.5 0 0 0 12 22z"/>' +
    '<path d="M19 17v-6a7 7 0 0 0-5-6.7V3.5a2 2 0 0 0-4 0v.8A7 7 0 0 0 5 11v6l-2 2v.5h18V19z"/></g></svg>'
});

export class NotificationsView extends Widget {
  private readonly _api: PaddleApi;
  private readonly _off: HTMLElement;
  private readonly _events: HTMLElement;
  private readonly _webhook: HTMLInputElement;
  private readonly _format: HTMLSelectElement;
  private readonly _email: HTMLInputElement;
  private readonly _status: Record<Channel, HTMLElement>;
  private readonly _error: HTMLElement;
  private readonly _saved: HTMLElement;
  private readonly _save: HTMLButtonElement;
  private _answer: INotifications | null = null;
  private _timer = 0;

  constructor(api: PaddleApi) {
    super();
    this._api = api;
    this.addClass('pn-notify');
    this.id = 'paddle-nbext-notifications';
    this.title.label = __('Notifications');
    this.node.setAttribute('data-testid', 'paddle-notifications');
    this._off = h('p', { className: 'pn-notify-off', role: 'status', hidden: true });
    this._events = h('div', { className: 'pn-notify-events' });
    this._webhook = h('input', {
      type: 'url',
      id: 'pn-notify-webhook',
      placeholder: 'https://hooks.slack.com/services/…',
      'data-testid': 'paddle-notify-webhook',
      spellcheck: 'false'
    });
    this._format = h(
      'select',
      { id: 'pn-notify-format', 'data-testid': 'paddle-notify-format' },
      h('option', { value: 'json' }, __('JSON: the event as an object')),
      h('option', { value: 'slack' }, __('Slack / Mattermost: {"text": …}'))
    );
    this._email = h('input', {
      type: 'email',
      id: 'pn-notify-email',
      placeholder: 'ada@example.org',
      'data-testid': 'paddle-notify-email'
    });
    this._status = {
      webhook: h('p', {
        className: 'pn-notify-status',
        'data-testid': 'paddle-notify-webhook-status'
      }),
      email: h('p', { className: 'pn-notify-status', 'data-testid': 'paddle-notify-email-status' })
    };
    this._error = h('p', {
      id: 'pn-notify-error',
      className: 'pn-notify-error',
      role: 'alert',
      'data-testid': 'paddle-notify-error'
    });
    this._saved = h('span', {
      className: 'pn-notify-saved',
      role: 'status',
      'data-testid': 'paddle-notify-saved'
    });
    this._save = h(
      'button',
      {
        type: 'button',
        className: 'jp-mod-styled jp-mod-accept',
        'data-testid': 'paddle-notify-save'
      },
      __('Save')
    );
    this._save.addEventListener('click', () => void this.save());
    this.node.appendChild(this._form());
  }

  private _form(): HTMLElement {
    const field = (label: string, input: HTMLElement, forId: string): HTMLElement =>
      h('div', { className: 'pn-notify-field' }, h('label', { for: forId }, label), input);
    return h(
      'div',
      { className: 'pn-notify-body' },
      h('h2', { tabindex: '-1' }, __('Notifications')),
      h(
        'p',
        {},
        __(
          'Be told by webhook or e-mail when one of your jobs needs you, even with no browser tab open. ' +
            'These settings hold for all your jobs.'
        )
      ),
      this._off,
      h('fieldset', {}, h('legend', {}, __('Tell me when')), this._events),
      h(
        'fieldset',
        {},
        h('legend', {}, __('Webhook')),
        field(__('URL'), this._webhook, 'pn-notify-webhook'),
        field(__('Format'), this._format, 'pn-notify-format'),
        this._status.webhook
      ),
      h(
        'fieldset',
        {},
        h('legend', {}, __('E-mail')),
        field(__('Address'), this._email, 'pn-notify-email'),
        this._status.email
      ),
      this._error,
      h('div', { className: 'pn-notify-actions' }, this._save, this._saved)
    );
  }

  /** Read the settings and the channels' state from the server. */
  async load(fill = true): Promise<void> {
    try {
      const answer = await this._api.notifications();
      this._show(answer, fill);
    } catch (error) {
      this._error.textContent = (error as Error).message;
    }
  }

  /** Send the form; on a refusal mark the field the server named. */
  async save(): Promise<void> {
    this._error.textContent = '';
    this._saved.textContent = '';
    for (const input of [this._webhook, this._format, this._email]) {
      input.removeAttribute('aria-invalid');
    }
    const settings: Partial<INotificationSettings> = {
      events: [...this._events.querySelectorAll<HTMLInputElement>('input:checked')].map(
        box => box.value as EventName
      ),
      webhook_url: this._webhook.value.trim() || null,
      webhook_format: this._format.value as INotificationSettings['webhook_format'],
      email: this._email.value.trim() || null
    };
    this._save.disabled = true;
    try {
      this._show(await this._api.setNotifications(settings), true);
      this._saved.textContent = __('Saved.');
    } catch (error) {
      this._error.textContent = (error as Error).message;
      const field = error instanceof ApiError ? error.field : null;
      const input = {
        webhook_url: this._webhook,
        webhook_format: this._format,
        email: this._email
      }[field ?? ''];
      if (input) {
        input.setAttribute('aria-invalid', 'true');
        input.setAttribute('aria-describedby', 'pn-notify-error');
        input.focus();
      }
    } finally {
      this._save.disabled = false;
    }
  }

  private _show(answer: INotifications, fill: boolean): void {
    this._answer = answer;
    this._off.hidden = answer.enabled && !answer.error;
    this._off.textContent = answer.error ?? '';
    if (fill) {
      this._fill(answer);
    }
    for (const name of CHANNELS) {
      const words = channelWords(answer.channels[name]);
      this._status[name].textContent = words.text;
      this._status[name].setAttribute('data-state', words.state);
    }
  }

  private _fill(answer: INotifications): void {
    clear(this._events);
    const chosen = new Set<string>(answer.settings.events ?? []);
    for (const [name, meaning] of Object.entries(answer.events)) {
      const box = h('input', {
        type: 'checkbox',
        value: name,
        id: `pn-notify-event-${name}`,
        checked: chosen.has(name)
      });
      box.checked = chosen.has(name);
      this._events.appendChild(
        h(
          'div',
          { className: 'pn-notify-event' },
          box,
          h('label', { for: `pn-notify-event-${name}` }, `${name}: ${meaning}`)
        )
      );
    }
    this._webhook.value = answer.settings.webhook_url ?? '';
    this._format.value = answer.settings.webhook_format ?? 'json';
    this._email.value = answer.settings.email ?? '';
    this._webhook.disabled = !answer.channels.webhook.available;
    this._format.disabled = !answer.channels.webhook.available;
    this._email.disabled = !answer.channels.email.available;
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    void this.load(this._answer === null);
    this._timer = window.setInterval(() => void this.load(false), REFRESH_SECONDS * 1000);
  }

  protected onBeforeDetach(msg: Message): void {
    window.clearInterval(this._timer);
    super.onBeforeDetach(msg);
  }
}

export class NotificationsWidget extends MainAreaWidget<NotificationsView> {
  constructor(api: PaddleApi) {
    super({ content: new NotificationsView(api) });
    this.id = 'paddle-nbext-notifications-tab';
    this.title.icon = bellIcon;
    this.title.label = __('Notifications');
    this.title.closable = true;
  }
}
