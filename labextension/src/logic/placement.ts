/**
 * Where the sidebar list, the job views and the log tabs go.  JupyterLab has a left area and a
 * dock of tabs; Notebook 7's `/tree` page has one main widget, a tab panel (Files, Running),
 * and its notebook pages keep the main area for the notebook.  Keeping that choice here lets
 * the plugin open jobs the same way everywhere.
 */
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { TabPanel, Widget } from '@lumino/widgets';

import { __ } from '../i18n';

export interface IPlacement {
  /** Put the job list panel where it is found. */
  addPanel(panel: Widget): void;
  /** Open a job view or a log tab; `besideLog` asks for a split below the current tab. */
  addView(widget: Widget, besideLog?: boolean): void;
  /** Bring a widget added through this placement to the front. */
  activate(widget: Widget): void;
}

/**
 * JupyterLab (and Notebook 7's notebook pages): the panel in the left area, views in the
 * main area.  Notebook 7's shell silently ignores a second main-area widget, so a view that
 * was not taken goes to the right area, beside the notebook.
 */
export function shellPlacement(shell: JupyterFrontEnd.IShell): IPlacement {
  return {
    addPanel(panel: Widget): void {
      shell.add(panel, 'left', { rank: 600 });
    },
    addView(widget: Widget, besideLog = false): void {
      shell.add(widget, 'main', besideLog ? { mode: 'split-bottom' } : {});
      if (!widget.parent) {
        shell.add(widget, 'right', { rank: 600 });
      }
      shell.activateById(widget.id);
    },
    activate(widget: Widget): void {
      shell.activateById(widget.id);
    }
  };
}

/**
 * Notebook 7's `/tree` page: the panel is a "Paddle jobs" tab beside Files and Running, and a
 * job view opens as one more closable tab there (as the settings editor does).
 */
export function treePlacement(tree: TabPanel): IPlacement {
  const activate = (widget: Widget): void => {
    tree.currentWidget = widget;
    widget.activate();
  };
  return {
    addPanel(panel: Widget): void {
      panel.title.label = __('Paddle jobs');
      tree.addWidget(panel);
    },
    addView(widget: Widget): void {
      widget.title.closable = true;
      tree.addWidget(widget);
      activate(widget);
    },
    activate
  };
}
