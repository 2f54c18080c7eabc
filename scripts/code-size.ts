// The size of the code a reader meets: the longest functions and the fullest folders of src/.
// `node dist/scripts/code-size.js` prints the longest ten of each; test/unit/code-size.test.ts keeps them
// under FUNCTION_MAX_LINES and FOLDER_MAX_FILES.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/** A function longer than this (in lines, first to last) is a sign it does several things. */
export const FUNCTION_MAX_LINES = 100;
/** A folder holding more files than this (directly, not counting subfolders) has no concept left. */
export const FOLDER_MAX_FILES = 20;

/** One function, method, arrow function or function expression: where it is and how long. */
export interface FunctionSize {
  /** Path relative to the repository root, e.g. `src/app.ts`. */
  file: string;
  /** The name it is declared under, or `<anonymous>` with its line. */
  name: string;
  /** 1-based line of its first line. */
  line: number;
  /** Lines from its first to its last. */
  lines: number;
}

/** One folder and the number of source files directly in it (`.ts` and `.lua`). */
export interface FolderSize {
  folder: string;
  files: number;
}

/** The repository root (this file is `scripts/code-size.ts`, built to `dist/scripts/code-size.js`). */
export function repositoryRoot(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  return path.basename(path.dirname(here)) === 'dist' ? path.resolve(here, '../..') : path.resolve(here, '..');
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sourceFiles(full));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(full);
  }
  return out;
}

function functionName(node: ts.Node, source: ts.SourceFile): string {
  const named = node as ts.Node & { name?: ts.Node };
  if (named.name !== undefined) return named.name.getText(source);
  const parent = node.parent;
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) return parent.name.getText(source);
  const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
  return `<anonymous:${line + 1}>`;
}

/** Every function-like node of the `.ts` files under `dir` (relative to `root`), with its length in lines. */
export function functionSizes(root: string, dir = 'src'): FunctionSize[] {
  const sizes: FunctionSize[] = [];
  for (const file of sourceFiles(path.join(root, dir))) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
        const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        sizes.push({ file: path.relative(root, file), name: functionName(node, source), line: first + 1, lines: last - first + 1 });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return sizes.sort((a, b) => b.lines - a.lines);
}

/** Every folder under `dir` (relative to `root`) with the number of `.ts` and `.lua` files directly in it. */
export function folderSizes(root: string, dir = 'src'): FolderSize[] {
  const sizes: FolderSize[] = [];
  const walk = (rel: string): void => {
    const entries = readdirSync(path.join(root, rel), { withFileTypes: true });
    sizes.push({ folder: rel, files: entries.filter((e) => e.isFile() && /\.(ts|lua)$/.test(e.name)).length });
    for (const e of entries) if (e.isDirectory()) walk(path.join(rel, e.name));
  };
  walk(dir);
  return sizes.sort((a, b) => b.files - a.files);
}

if (process.argv[1] !== undefined && import.meta.url === `file://${path.resolve(process.argv[1])}`) {
  const root = repositoryRoot();
  console.log('longest functions of src/ (lines):');
  for (const f of functionSizes(root).slice(0, 10)) console.log(`  ${String(f.lines).padStart(4)}  ${f.file}:${f.line} ${f.name}`);
  console.log('fullest folders of src/ (.ts and .lua files directly inside):');
  for (const f of folderSizes(root).slice(0, 10)) console.log(`  ${String(f.files).padStart(4)}  ${f.folder}/`);
}
