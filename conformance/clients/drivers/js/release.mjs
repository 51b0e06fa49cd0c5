// What the installed @nats-io packages declare, read from their own type declarations (lib/*.d.ts). An option is a
// key of a plain object, so a release that does not know it drops it without a word: the driver asks the release's
// declarations first and answers kind not_in_release when the option is not there (PROTOCOL.md), rather than pass
// it and have a check judge a call the release never offered. Decided from the API the release has, not a list of
// versions.

import { readFileSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);
const texts = new Map();

// Every .d.ts of the package's lib/ folder, comments removed (they mention options by name).
function declarations(pkg) {
  if (!texts.has(pkg)) {
    let lib = dirname(require.resolve(pkg));
    while (!lib.endsWith("lib") && dirname(lib) !== lib) lib = dirname(lib);
    const files = readdirSync(lib).filter((name) => name.endsWith(".d.ts"));
    const text = files.map((name) => readFileSync(join(lib, name), "utf8")).join("\n");
    texts.set(pkg, text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/[^\n]*/g, ""));
  }
  return texts.get(pkg);
}

// The text of `type`'s declaration: an interface or class to its closing brace, a type alias to its semicolon.
function declaration(text, type) {
  const start = new RegExp(`\\b(interface|type|class)\\s+${type}\\b`).exec(text);
  if (!start) return "";
  const alias = start[1] === "type";
  let depth = 0;
  for (let i = start.index + start[0].length; i < text.length; i++) {
    const c = text[i];
    if (c === "{" || c === "(") depth++;
    else if (c === "}" || c === ")") {
      depth--;
      if (!alias && depth === 0) return text.slice(start.index, i + 1);
    } else if (alias && c === ";" && depth === 0) return text.slice(start.index, i);
  }
  return text.slice(start.index);
}

// Whether `type` of `pkg` (or a type it is made of: A & B, A | B, Partial<A>, extends A) declares `member`, a
// property or method name or a pattern for it.
export function declares(pkg, type, member, seen = new Set()) {
  if (seen.has(type)) return false;
  seen.add(type);
  const text = declaration(declarations(pkg), type);
  const pattern = member instanceof RegExp ? member : new RegExp(`[\\s;{,]${member}\\??\\s*[:(]`);
  if (pattern.test(text)) return true;
  const parts = new Set(text.slice(type.length).match(/\b[A-Z]\w*/g) ?? []);
  return [...parts].some((part) => declares(pkg, part, member, seen));
}

// The answer for an option the installed release does not declare (kind not_in_release).
export class NotInRelease extends Error {
  constructor(message) {
    super(message);
    this.kind = "not_in_release";
  }
}

// The exact version of `pkg` installed, from the package's own package.json (found by module resolution, as the
// driver's imports are).
export function packageVersion(pkg) {
  let dir = dirname(require.resolve(pkg));
  for (; dirname(dir) !== dir; dir = dirname(dir)) {
    try {
      const found = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
      if (found.name === pkg) return found.version;
    } catch {
      // no package.json at this level: keep walking up
    }
  }
  return "unknown";
}

// Throws NotInRelease ("not in @nats-io/kv 3.0.0: KvOptions.markerTTL") unless `type` of `pkg` declares `member`.
export function requireDeclared(pkg, type, member, name = member) {
  if (!declares(pkg, type, member)) throw new NotInRelease(`not in ${pkg} ${packageVersion(pkg)}: ${type}.${name}`);
}
