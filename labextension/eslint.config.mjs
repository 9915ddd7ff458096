/**
 * ESLint flat config for the panel.
 *
 * TypeScript gets typescript-eslint's type-aware recommended rules: the panel is mostly
 * async code (REST calls, the event stream, followed logs), and a promise nobody awaits or
 * catches fails silently in the browser, which only the type-aware rules can see. Layout is
 * Prettier's job (.prettierrc), so nothing here is about formatting.
 */
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: ['lib/', 'node_modules/', '../paddle_nbext/labextension/', 'tsconfig.tsbuildinfo']
  },
  js.configs.recommended,
  {
    files: ['**/*.ts'],
    extends: [tseslint.configs.recommendedTypeChecked],
    languageOptions: {
      parserOptions: {
        // The test config covers sources, tests and vitest.config.ts in one program.
        project: ['./tsconfig.test.json'],
        tsconfigRootDir: import.meta.dirname
      }
    },
    rules: {
      eqeqeq: ['error', 'always'],
      curly: ['error', 'all'],
      'no-console': ['error', { allow: ['warn', 'error'] }],
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      // JupyterLab's convention, which the panel follows: interfaces are named I<Something>.
      '@typescript-eslint/naming-convention': [
        'error',
        { selector: 'interface', format: ['PascalCase'], custom: { regex: '^I[A-Z]', match: true } }
      ]
    }
  },
  {
    // Plain ES modules: this file and the style entry point that JupyterLab loads.
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { sourceType: 'module' }
  }
);
