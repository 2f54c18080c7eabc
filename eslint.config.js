// Lint: typescript-eslint's recommended type-checked rules; `any` and non-null assertions are errors.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', '.build-tmp/**', 'node_modules/**', 'data/**', 'coverage/**', 'bench/.tmp/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: { allowDefaultProject: ['eslint.config.js', 'scripts/build.mjs'] }, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-non-null-assertion': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
    },
  },
  {
    // Every error detail comes from the catalog: call sites pass the template's values (README "Errors").
    files: ['src/**/*.ts', 'workers/**/*.ts'],
    ignores: ['src/errors/**'],
    rules: {
      'no-restricted-syntax': ['error', { selector: "NewExpression[callee.name='BrokerError']", message: 'Use brokerError(code, values) from src/errors/catalog.ts: the detail is the catalog template.' }],
    },
  },
  { files: ['eslint.config.js', 'scripts/build.mjs'], ...tseslint.configs.disableTypeChecked },
);
