// @vitest-environment happy-dom
import { describe, expect, it } from 'vitest';
import type { JupyterFrontEnd } from '@jupyterlab/application';
import { TabPanel, Widget } from '@lumino/widgets';

import { shellPlacement, treePlacement } from '../logic/placement';

function named(id: string): Widget {
  const widget = new Widget();
  widget.id = id;
  return widget;
}

describe('treePlacement (Notebook 7 /tree)', () => {
  it('adds the panel as a "Paddle jobs" tab and opens views as closable tabs in front', () => {
    const tree = new TabPanel();
    const files = named('files');
    files.title.label = 'Files';
    tree.addWidget(files);
    const placement = treePlacement(tree);
    const panel = named('paddle-nbext-panel');
    placement.addPanel(panel);
    expect(tree.tabBar.titles.map(title => title.label)).toEqual(['Files', 'Paddle jobs']);
    expect(tree.currentWidget).toBe(files);

    placement.activate(panel);
    expect(tree.currentWidget).toBe(panel);

    const view = named('paddle-nbext-job-a');
    placement.addView(view);
    expect(tree.currentWidget).toBe(view);
    expect(view.title.closable).toBe(true);
    expect(panel.title.closable).toBe(false);
  });
});

describe('shellPlacement', () => {
  function shell(mainTaken: boolean): {
    areas: Map<Widget, string>;
    shell: JupyterFrontEnd.IShell;
  } {
    const areas = new Map<Widget, string>();
    const host = new Widget();
    const fake = {
      add(widget: Widget, area?: string): void {
        if (area === 'main' && mainTaken) {
          return; // Notebook 7 keeps its one main-area widget
        }
        areas.set(widget, area ?? 'main');
        widget.parent = host;
      },
      activateById(): void {}
    };
    return { areas, shell: fake as unknown as JupyterFrontEnd.IShell };
  }

  it('puts views in the main area when it takes them', () => {
    const { areas, shell: lab } = shell(false);
    const view = named('v');
    shellPlacement(lab).addView(view);
    expect(areas.get(view)).toBe('main');
  });

  it('falls back to the right area when the main area is taken (a Notebook 7 notebook page)', () => {
    const { areas, shell: notebook } = shell(true);
    const panel = named('p');
    const placement = shellPlacement(notebook);
    placement.addPanel(panel);
    const view = named('v');
    placement.addView(view);
    expect(areas.get(panel)).toBe('left');
    expect(areas.get(view)).toBe('right');
  });
});
