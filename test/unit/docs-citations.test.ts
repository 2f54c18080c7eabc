import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Keeps the repository standing alone and its documentation citations true. Code, tests, scripts and
 * docs must not point at anything outside the repository (tracker issue numbers, the input documents the
 * broker was built from), and every `docs/<topic>.md` they cite — with a section as `#<anchor>`,
 * `"<Heading>"` or `§<number>` — must exist as a file and as a heading of it, so a renamed section shows
 * up here instead of as a dead reference. README.md and docs/*.md are also checked for relative links
 * whose file or `#anchor` does not exist. Every failure names `file:line`.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SELF = 'test/unit/docs-citations.test.ts';

/**
 * Tracked files scanned: code, tests, scripts and benchmarks by extension; the docs (README.md,
 * docs/**, bench/README.md, CHANGELOG.md); and the configuration and build files beside them, which
 * cite docs sections too.
 */
function scannedFiles(): string[] {
  const listed = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' }).split('\0');
  const code = /^(src|workers|test|ui\/src|scripts|bench)\/.*\.(ts|lua|mjs)$/;
  const docs = /^(docs\/.*\.md|README\.md|bench\/README\.md|CHANGELOG\.md)$/;
  const config = /^(config\/.*\.(json|ya?ml|conf|cfg)|ui\/static\/.*\.(html|css)|[^/]*\.(js|ts|json|ya?ml)|Dockerfile|\.ci\/run)$/;
  // A file deleted in the work tree but still tracked is not there to read; package-lock.json is no prose.
  return listed.filter((file) => (code.test(file) || docs.test(file) || config.test(file)) && file !== 'package-lock.json' && existsSync(join(ROOT, file)));
}

// The forbidden patterns are assembled from parts so that this file does not match itself.
const ISSUE_NUMBER = new RegExp('\\b' + 'issues?' + '\\s+#?\\d+', 'i');
const OUTSIDE_FOLDER = new RegExp('\\.\\./' + 'shared');
const INPUT_DOCUMENTS = new RegExp('\\b(' + ['WIRE', 'DESIGN', 'STYLE'].join('|') + ')\\.md\\b|event-broker-' + 'spec');

/**
 * GitHub's anchor of a heading: inline links reduced to their text, lowercased, every character that is
 * not a letter, digit, mark, connector (`_`), space or hyphen removed, each space turned into a hyphen;
 * a repeated anchor gets `-1`, `-2`, … in document order.
 */
function headingAnchor(text: string): string {
  return text
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

interface Headings {
  /** Heading texts as written, with backticks removed and whitespace collapsed. */
  texts: Set<string>;
  /** GitHub anchors, with the suffixes of repeated ones. */
  anchors: Set<string>;
}

/** ATX headings of a markdown text, outside fenced code blocks. */
function markdownHeadings(markdown: string): Headings {
  const texts = new Set<string>();
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fence: string | undefined;
  for (const line of markdown.split('\n')) {
    const opener = /^ {0,3}(`{3,}|~{3,})/.exec(line);
    if (opener) {
      const marker = opener[1] ?? '';
      if (fence === undefined) fence = marker;
      else if (marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      continue;
    }
    if (fence !== undefined) continue;
    const heading = /^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/.exec(line);
    if (!heading) continue;
    const text = (heading[1] ?? '').trim();
    texts.add(headingText(text));
    const base = headingAnchor(text);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return { texts, anchors };
}

/** A heading's or a citation's text compared: no backticks, whitespace collapsed. */
function headingText(text: string): string {
  return text.replace(/`/g, '').replace(/\s+/g, ' ').trim();
}

/** Whether `cited` names a heading, with or without the heading's leading section number ("4.3 "). */
function namesHeading(headings: Headings, cited: string): boolean {
  const wanted = headingText(cited);
  for (const text of headings.texts) {
    if (text === wanted || text.replace(/^\d+(\.\d+)*\.?\s+/, '') === wanted) return true;
  }
  return false;
}

/** Whether a numbered heading `§<number>` exists ("4.1" matches "### 4.1 The batch loop"). */
function hasNumberedSection(headings: Headings, number: string): boolean {
  const wanted = number.replace(/\.$/, '');
  for (const text of headings.texts) {
    const own = /^(\d+(?:\.\d+)*)\.?\s/.exec(text);
    if (own && own[1] === wanted) return true;
  }
  return false;
}

const headingCache = new Map<string, Headings | undefined>();

/** The headings of a repository file, or undefined when it does not exist. */
function headingsOf(file: string): Headings | undefined {
  if (!headingCache.has(file)) {
    const path = join(ROOT, file);
    headingCache.set(file, existsSync(path) && statSync(path).isFile() ? markdownHeadings(readFileSync(path, 'utf8')) : undefined);
  }
  return headingCache.get(file);
}

/** 1-based line of character `index` in `text`. */
function lineAt(text: string, index: number): number {
  let line = 1;
  for (let i = 0; i < index; i++) if (text.charCodeAt(i) === 10) line++;
  return line;
}

/** A line break followed by a comment continuation (` * `, `// `, `-- `, `# `) or indentation. */
const CONTINUATION = /^[ \t]*\r?\n[ \t]*(?:\*(?!\/)|\/\/|--|#)?[ \t]*/;

/**
 * The quoted headings that follow a citation at `from`: `"A"`, optionally `, "B"` and more, each
 * possibly broken over comment lines. Returns the headings and whether any were found.
 */
function quotedHeadings(text: string, from: number): string[] {
  const headings: string[] = [];
  let at = from;
  for (;;) {
    let rest = text.slice(at);
    const gap = headings.length === 0 ? /^[ \t]*/.exec(rest) : /^,[ \t]*/.exec(rest);
    if (!gap) break;
    at += gap[0].length;
    rest = text.slice(at);
    const wrap = CONTINUATION.exec(rest);
    const wrapped = rest[0] !== '"' && wrap !== null && rest[wrap[0].length] === '"';
    if (wrapped) at += wrap[0].length;
    if (text[at] !== '"') break;
    // A quote right after the file name ends a string holding it ("docs/x.md", …); it opens no heading.
    if (headings.length === 0 && gap[0].length === 0 && !wrapped) break;
    let heading = '';
    let i = at + 1;
    let closed = false;
    while (i < text.length) {
      const c = text[i];
      if (c === '"') {
        closed = true;
        break;
      }
      if (c === '\n' || c === '\r') {
        const more = CONTINUATION.exec(text.slice(i));
        if (!more) break;
        heading += ' ';
        i += more[0].length;
        continue;
      }
      heading += c;
      i++;
    }
    // An unclosed quote or one spanning many lines is not a heading citation.
    if (!closed || heading.length > 120) break;
    headings.push(heading);
    at = i + 1;
  }
  return headings;
}

/** The failures of rules (d) and (e) in one file: cited docs files and their sections, and README sections. */
function citationFailures(file: string, text: string): string[] {
  const failures: string[] = [];
  const citation = /(?<![\w./-])(docs\/[\w./-]*?\.md)(#[\w\p{L}\p{N}-]*)?/gu;
  for (const match of text.matchAll(citation)) {
    const cited = match[1] ?? '';
    const where = `${file}:${lineAt(text, match.index)}`;
    const headings = headingsOf(cited);
    if (!headings) {
      failures.push(`${where}: cites ${cited}, which does not exist`);
      continue;
    }
    const anchor = match[2];
    if (anchor !== undefined && anchor.length > 1 && !headings.anchors.has(anchor.slice(1))) {
      failures.push(`${where}: cites ${cited}${anchor}, which is not an anchor of a heading of ${cited}`);
    }
    const after = match.index + match[0].length;
    for (const heading of quotedHeadings(text, after)) {
      if (!namesHeading(headings, heading)) failures.push(`${where}: cites ${cited} "${heading}", which is not a heading of ${cited}`);
    }
    const numbered = /^[ \t]*(?:\r?\n[ \t]*(?:\*(?!\/)|\/\/|--|#)?[ \t]*)?§\s?(\d+(?:\.\d+)*)/.exec(text.slice(after));
    if (numbered && !hasNumberedSection(headings, numbered[1] ?? '')) {
      failures.push(`${where}: cites ${cited} §${numbered[1] ?? ''}, which is not a numbered heading of ${cited}`);
    }
  }
  // A README cited by section ("README \"Configuration\"", bench/README.md "…") names one of its headings.
  const readme = /(?<![\w./-])((?:[\w.-]+\/)*README)(\.md)?(?![\w.-])/g;
  for (const match of text.matchAll(readme)) {
    const cited = `${match[1] ?? ''}.md`;
    const headings = headingsOf(cited);
    const where = `${file}:${lineAt(text, match.index)}`;
    for (const heading of quotedHeadings(text, match.index + match[0].length)) {
      if (!headings) failures.push(`${where}: cites ${cited}, which does not exist`);
      else if (!namesHeading(headings, heading)) failures.push(`${where}: cites ${cited} "${heading}", which is not a heading of ${cited}`);
    }
  }
  return failures;
}

/** The failures of rule (f) in one markdown file: relative links whose file or anchor does not exist. */
function linkFailures(file: string, text: string): string[] {
  const failures: string[] = [];
  // Links inside code spans and fenced blocks are examples, not links.
  const lines = text.split('\n');
  let fence: string | undefined;
  lines.forEach((raw, index) => {
    const opener = /^ {0,3}(`{3,}|~{3,})/.exec(raw);
    if (opener) {
      const marker = opener[1] ?? '';
      if (fence === undefined) fence = marker;
      else if (marker[0] === fence[0] && marker.length >= fence.length) fence = undefined;
      return;
    }
    if (fence !== undefined) return;
    const line = raw.replace(/`[^`]*`/g, '');
    for (const match of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = match[1] ?? '';
      if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//')) continue;
      const where = `${file}:${index + 1}`;
      const hash = target.indexOf('#');
      const pathPart = decodeURI(hash === -1 ? target : target.slice(0, hash));
      const anchor = hash === -1 ? undefined : target.slice(hash + 1);
      const resolved = pathPart === '' ? file : normalize(join(dirname(file), pathPart)).replace(/\\/g, '/');
      if (resolved.startsWith('..') || !existsSync(join(ROOT, resolved))) {
        failures.push(`${where}: links to ${target}, and ${resolved} does not exist`);
        continue;
      }
      if (anchor === undefined || anchor === '' || !resolved.endsWith('.md')) continue;
      const headings = headingsOf(resolved);
      if (headings && !headings.anchors.has(decodeURIComponent(anchor))) {
        failures.push(`${where}: links to ${target}, and #${anchor} is not an anchor of a heading of ${relative('.', resolved)}`);
      }
    }
  });
  return failures;
}

describe('anchors and headings', () => {
  it('computes GitHub-style anchors', () => {
    expect(headingAnchor('Timelines and storages')).toBe('timelines-and-storages');
    expect(headingAnchor('4.3 Subscription sessions')).toBe('43-subscription-sessions');
    expect(headingAnchor('3.4 The write: `publishBatch`, dense offsets, notices')).toBe('34-the-write-publishbatch-dense-offsets-notices');
    expect(headingAnchor('Authentication: who is asking')).toBe('authentication-who-is-asking');
    expect(headingAnchor('3.5 Replicas (`publish.minReplicas` ≥ 1)')).toBe('35-replicas-publishminreplicas--1');
    expect(headingAnchor('Command line: `broker`')).toBe('command-line-broker');
    expect(headingAnchor('See [the API](http-api.md)')).toBe('see-the-api');
  });

  it('reads headings outside fenced code blocks only, numbering repeated anchors', () => {
    const headings = markdownHeadings(['# Title', '```', '# not a heading', '```', '## Errors', '### Errors', '## Errors ##'].join('\n'));
    expect([...headings.anchors]).toEqual(['title', 'errors', 'errors-1', 'errors-2']);
    expect(headings.texts.has('not a heading')).toBe(false);
  });

  it('finds quoted headings broken over comment lines', () => {
    const text = 'cites docs/operations.md "Redis stalls and\n * graceful stops", "Durability" and more';
    const at = text.indexOf('.md') + 3;
    expect(quotedHeadings(text, at)).toEqual(['Redis stalls and graceful stops', 'Durability']);
    const json = '["docs/concepts.md", "docs/consuming.md"]';
    expect(quotedHeadings(json, json.indexOf('.md') + 3)).toEqual([]);
  });

  it('reports a cited heading, anchor or file that does not exist', () => {
    const failures = citationFailures('x.ts', [
      '// docs/concepts.md "No such heading"',
      '// docs/concepts.md#no-such-anchor',
      '// docs/no-such-topic.md',
      '// docs/architecture.md §99.9',
      '// README "No such heading"',
    ].join('\n'));
    expect(failures).toHaveLength(5);
    expect(failures[0]).toMatch(/^x\.ts:1: /);
    expect(failures[3]).toMatch(/^x\.ts:4: /);
  });

  it('reports relative markdown links whose anchor or file does not exist', () => {
    const failures = linkFailures('docs/x.md', ['[a](concepts.md#no-such-anchor)', '[b](missing.md)', '[c](concepts.md)', '`[d](missing.md)`'].join('\n'));
    expect(failures).toHaveLength(2);
  });
});

describe('the repository stands alone and its docs citations are true', () => {
  const files = scannedFiles();

  it('scans the code, tests and docs', () => {
    expect(files).toContain('README.md');
    expect(files.some((file) => file.startsWith('src/'))).toBe(true);
    expect(files.some((file) => file.startsWith('docs/'))).toBe(true);
  });

  it('has no issue numbers and no reference to documents outside the repository', () => {
    const failures: string[] = [];
    for (const file of files) {
      if (file === SELF) continue;
      readFileSync(join(ROOT, file), 'utf8').split('\n').forEach((line, index) => {
        const where = `${file}:${index + 1}`;
        const issue = ISSUE_NUMBER.exec(line);
        if (issue) failures.push(`${where}: issue number "${issue[0]}"`);
        const outside = OUTSIDE_FOLDER.exec(line);
        if (outside) failures.push(`${where}: path outside the repository "${outside[0]}"`);
        const input = INPUT_DOCUMENTS.exec(line);
        if (input) failures.push(`${where}: reference to an outside document "${input[0]}"`);
      });
    }
    expect(failures).toEqual([]);
  });

  it('cites docs files and sections that exist', () => {
    const failures: string[] = [];
    for (const file of files) {
      if (file === SELF) continue;
      failures.push(...citationFailures(file, readFileSync(join(ROOT, file), 'utf8')));
    }
    expect(failures).toEqual([]);
  });

  it('links README.md and docs/*.md to files and anchors that exist', () => {
    const failures: string[] = [];
    for (const file of files.filter((name) => name.endsWith('.md'))) {
      failures.push(...linkFailures(file, readFileSync(join(ROOT, file), 'utf8')));
    }
    expect(failures).toEqual([]);
  });
});
