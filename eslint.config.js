// Lint: typescript-eslint's recommended type-checked rules; `any` and non-null assertions are errors.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** `no-restricted-imports` blocks forbidding each layer to import the layers above it. */
function layerRules(layers) {
  return layers.map(({ files, ignores, above }) => ({
    files,
    ...(ignores ? { ignores } : {}),
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: above.map((layer) => ({
            regex: layer === 'workers' ? '(^|/)workers/' : layer === 'app' ? '(^|/)src/app(\\.js)?$|^\\.\\./app\\.js$' : `(^|/)(src/)?${layer}/`,
            message: `imports run down the layers: this layer must not import ${layer}/ (docs/architecture.md "Layers")`,
          })),
        },
      ],
    },
  }));
}

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
    // Every error detail comes from the catalog: call sites pass the template's values (docs/errors.md).
    files: ['src/**/*.ts', 'workers/**/*.ts'],
    ignores: ['src/errors/**'],
    rules: {
      'no-restricted-syntax': ['error', { selector: "NewExpression[callee.name='BrokerError']", message: 'Use brokerError(code, values) from src/errors/catalog.ts: the detail is the catalog template.' }],
    },
  },
  // Imports run down the layers only, so no layer depends on one above it (docs/architecture.md "Layers"):
  // one block per layer, naming the layers above it. Known exceptions are listed in docs/architecture.md and allowed file by file.
  ...layerRules([
    { files: ['src/util/**/*.ts'], above: ['domain', 'services', 'http', 'storage', 'workers', 'app', 'areas', 'cli', 'client', 'config', 'auth', 'errors', 'observability'] },
    { files: ['src/domain/**/*.ts'], above: ['services', 'http', 'storage', 'workers', 'app', 'areas', 'cli', 'client'] },
    { files: ['src/storage/**/*.ts'], above: ['services', 'http', 'workers', 'app', 'areas', 'cli', 'client'] },
    { files: ['src/services/**/*.ts'], above: ['http', 'app', 'areas', 'cli', 'client'] },
    { files: ['workers/**/*.ts'], above: ['services', 'http', 'storage', 'app', 'areas', 'cli', 'client'] },
    // The HTTP layer reaches storage only through the services (one listed exception: the storage probe).
    { files: ['src/http/**/*.ts'], ignores: ['src/http/routes/storages.ts'], above: ['storage', 'workers', 'app', 'areas', 'cli', 'client'] },
    { files: ['src/http/routes/storages.ts'], above: ['workers', 'app', 'areas', 'cli', 'client'] },
    // The command line talks to a broker over HTTP: it uses the stream client and nothing of the server.
    { files: ['src/cli/**/*.ts'], above: ['areas', 'domain', 'services', 'http', 'storage', 'workers', 'app', 'config', 'auth', 'errors', 'observability'] },
    // The stream client is a library for any program: it imports nothing of the broker.
    { files: ['src/client/**/*.ts'], above: ['areas', 'domain', 'services', 'http', 'storage', 'workers', 'app', 'cli', 'config', 'auth', 'errors', 'observability'] },
  ]),
  { files: ['eslint.config.js', 'scripts/build.mjs'], ...tseslint.configs.disableTypeChecked },
);
