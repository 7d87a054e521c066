// Offline validation of rendered Kubernetes manifests (no API server needed):
//  1. schema: every document against the kubernetes-models / prometheus-operator JSON schemas
//     (types, required fields, enums; these schemas allow unknown fields);
//  2. strict: every document as a typed TypeScript literal, so `tsc` rejects unknown or
//     misspelled fields (excess-property check) and wrong types.
// usage: node validate.mjs --work-dir DIR rendered.yaml...   (exit 0 ok, 1 findings, 2 usage)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const here = path.dirname(fileURLToPath(import.meta.url));

function usage(message) {
  console.error(`validate.mjs: ${message}\nusage: node validate.mjs --work-dir DIR FILE...`);
  process.exit(2);
}

const args = process.argv.slice(2);
let workDir = "";
const files = [];
for (let i = 0; i < args.length; ++i) {
  if (args[i] === "--work-dir") workDir = args[++i] ?? "";
  else files.push(args[i]);
}
if (!workDir || files.length === 0) usage("need --work-dir and at least one file");

// apiVersion -> the module that exports its kinds (classes for the schema check, I<Kind> types).
function modulePath(apiVersion) {
  if (apiVersion.startsWith("monitoring.coreos.com/")) {
    return `@kubernetes-models/prometheus-operator/${apiVersion}`;
  }
  return `kubernetes-models/${apiVersion}`;  // "v1" is the core group
}

const documents = [];
let failures = 0;
function fail(where, message) {
  console.log(`FAIL ${where}: ${message}`);
  ++failures;
}

for (const file of files) {
  const parsed = parseAllDocuments(fs.readFileSync(file, "utf8"));
  parsed.forEach((doc, index) => {
    const where = `${path.basename(file)} document ${index + 1}`;
    if (doc.errors.length > 0) {
      fail(where, `YAML error: ${doc.errors[0].message}`);
      return;
    }
    const object = doc.toJS();
    if (object === null || object === undefined) return;
    documents.push({ where: `${where} (${object.kind}/${object.metadata?.name})`, object });
  });
}

// 1. Schema check.
for (const doc of documents) {
  const { apiVersion, kind } = doc.object;
  if (typeof apiVersion !== "string" || typeof kind !== "string") {
    fail(doc.where, "no apiVersion/kind");
    continue;
  }
  let module;
  try {
    module = await import(modulePath(apiVersion));
  } catch (error) {
    fail(doc.where, `no schema for apiVersion ${apiVersion}`);
    continue;
  }
  const Model = module[kind];
  if (typeof Model !== "function") {
    fail(doc.where, `no schema for ${apiVersion} ${kind}`);
    continue;
  }
  doc.module = modulePath(apiVersion);
  try {
    new Model(doc.object).validate();
  } catch (error) {
    fail(doc.where, `schema: ${String(error.message ?? error).split("\n").slice(0, 6).join("; ")}`);
  }
}

// 2. Strict unknown-field check through TypeScript's excess-property check.
fs.mkdirSync(workDir, { recursive: true });
const linkedModules = path.join(workDir, "node_modules");
if (!fs.existsSync(linkedModules)) fs.symlinkSync(path.join(here, "node_modules"), linkedModules);
const typed = documents.filter((doc) => doc.module);
const lines = [];
const lineOwner = [];
typed.forEach((doc, index) => {
  const { kind } = doc.object;
  const header = `import type { I${kind} as T${index} } from "${doc.module}/${kind}";`;
  const body = `export const doc${index}: T${index} = ${JSON.stringify(doc.object, null, 2)};`;
  for (const line of [header, ...body.split("\n")]) {
    lines.push(line);
    lineOwner.push(doc.where);
  }
});
fs.writeFileSync(path.join(workDir, "manifests.ts"), lines.join("\n") + "\n");
fs.writeFileSync(
  path.join(workDir, "tsconfig.json"),
  JSON.stringify({
    compilerOptions: {
      strict: true,
      noEmit: true,
      module: "nodenext",
      moduleResolution: "nodenext",
      target: "es2022",
      skipLibCheck: true,
      types: [],
    },
    files: ["manifests.ts"],
  }),
);
if (typed.length > 0) {
  try {
    execFileSync(process.execPath, [path.join(here, "node_modules/typescript/bin/tsc"), "-p", workDir], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
  } catch (error) {
    const output = `${error.stdout ?? ""}${error.stderr ?? ""}`;
    const pattern = /manifests\.ts\((\d+),\d+\): (error TS\d+: .*)/g;
    let found = false;
    for (const match of output.matchAll(pattern)) {
      found = true;
      fail(lineOwner[Number(match[1]) - 1] ?? "manifests.ts", `strict: ${match[2]}`);
    }
    if (!found) fail("tsc", output.trim() || String(error));
  }
}

console.log(`${documents.length} documents, ${failures} finding(s)`);
process.exit(failures === 0 ? 0 : 1);
