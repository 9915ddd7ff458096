/// <reference types="node" />
/**
 * The panel's folders by what they are, and which may use which (docs/architecture.md, "The
 * panel"): generated/ imports nothing of the panel; api/ only generated/; logic/ the API (and the
 * generated noise patterns); state/ the API and logic/; views/ all of them; no folder imports
 * index.ts or tokens.ts.  The generated API types are read only through api/types.ts, which
 * names them.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = join(__dirname, '..');

/** Folder -> the folders (or top-level modules) its modules may import from. */
const MAY_IMPORT: { [folder: string]: string[] } = {
  generated: ['generated'],
  api: ['generated', 'api'],
  logic: ['generated', 'api', 'logic', 'i18n'],
  state: ['api', 'logic', 'state'],
  views: ['api', 'logic', 'state', 'views', 'i18n']
};

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap(name => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) {
      return name === '__tests__' ? [] : sources(path);
    }
    return name.endsWith('.ts') ? [relative(SRC, path).split(sep).join('/')] : [];
  });
}

/** Each relative import of a module, as a path from src/ without extension. */
function imports(module: string): string[] {
  const text = readFileSync(join(SRC, module), 'utf-8');
  return [...text.matchAll(/from '(\.{1,2}\/[^']+)'/g)].map(match =>
    relative(SRC, join(SRC, dirname(module), match[1]))
      .split(sep)
      .join('/')
  );
}

const MODULES = sources(SRC);

describe('the layout of labextension/src', () => {
  it('keeps only the plugin, its token and the translator at the top', () => {
    expect(MODULES.filter(module => !module.includes('/')).sort()).toEqual([
      'i18n.ts',
      'index.ts',
      'tokens.ts'
    ]);
    const folders = new Set(MODULES.filter(m => m.includes('/')).map(m => m.split('/')[0]));
    expect([...folders].sort()).toEqual(Object.keys(MAY_IMPORT).sort());
  });

  it.each(MODULES.filter(module => module.includes('/')))(
    '%s imports only what its folder may',
    module => {
      const folder = module.split('/')[0];
      const outside = imports(module).filter(
        target => !MAY_IMPORT[folder].includes(target.split('/')[0])
      );
      expect(outside).toEqual([]);
    }
  );

  it('reads the generated API types only through api/types.ts', () => {
    const readers = MODULES.filter(module => imports(module).includes('generated/api_types'));
    expect(readers).toEqual(['api/types.ts']);
  });
});
