/**
 * How a notification channel is doing, in one sentence for the Notifications settings view:
 * "Delivered 12:02:05", "Failing since 03:14:00: the receiver answered 500 ... (attempt 3; next
 * in 20 s)", "Given up: ...", "Not set up", "Not offered on this server".  Pure, so the words are
 * tested without a browser.
 */
import type { INotificationChannel } from '../api/types';
import { __ } from '../i18n';

export type ChannelState = 'off' | 'unset' | 'idle' | 'ok' | 'failing' | 'gave-up';

export interface IChannelWords {
  state: ChannelState;
  text: string;
}

/** A time of the API (`2026-12-07T03:14:00.000Z`) as the browser's local clock time. */
function clock(iso: string | null | undefined): string {
  if (!iso) {
    return '';
  }
  const when = new Date(iso);
  return Number.isNaN(when.getTime()) ? iso : when.toLocaleTimeString();
}

export function channelWords(channel: INotificationChannel): IChannelWords {
  if (!channel.available) {
    return { state: 'off', text: __('Not offered on this server (ask your admin).') };
  }
  if (!channel.set) {
    return { state: 'unset', text: __('Not set up.') };
  }
  const waiting = channel.pending ? __(' %1 waiting.', channel.pending) : '';
  if (channel.ok === false && channel.last_error) {
    if (channel.gave_up) {
      return { state: 'gave-up', text: __('Given up: %1', channel.last_error) + waiting };
    }
    const since = channel.failing_since
      ? __('Failing since %1: ', clock(channel.failing_since))
      : '';
    return { state: 'failing', text: since + channel.last_error + waiting };
  }
  if (channel.ok && channel.last_delivered) {
    return { state: 'ok', text: __('Delivered %1.', clock(channel.last_delivered)) + waiting };
  }
  return { state: 'idle', text: __('Nothing sent yet.') + waiting };
}
