/**
 * The preview tab, as editors have it: a job opened with a single click takes the one preview
 * tab (its title in italics), replacing the job previewed before; a double-click, "Open in New
 * Tab" or a double-click on the tab itself keeps it.  Browsing ten jobs so leaves one tab, not
 * ten, while the jobs a user keeps stay.
 */
import { Widget } from '@lumino/widgets';

/** A tab whose content can say it is the preview (its title's class and caption). */
export interface IPreviewable extends Widget {
  readonly content: { setPreview(preview: boolean): void };
}

export class PreviewTab {
  private _widget: IPreviewable | null = null;

  /** The view in the preview tab, if any. */
  get widget(): IPreviewable | null {
    return this._widget;
  }

  /** Make `widget` the preview; the view previewed before closes. */
  show(widget: IPreviewable): void {
    if (this._widget === widget) {
      return;
    }
    const former = this._widget;
    this._widget = widget;
    widget.content.setPreview(true);
    widget.disposed.connect(() => {
      if (this._widget === widget) {
        this._widget = null;
      }
    });
    if (former && !former.isDisposed) {
      former.dispose();
    }
  }

  /** Keep `widget` open (no longer the preview); nothing for a view that is not it. */
  keep(widget: Widget): void {
    if (this._widget !== widget) {
      return;
    }
    this._widget = null;
    (widget as IPreviewable).content.setPreview(false);
  }
}
