// Offline validation of rendered Kubernetes manifests (no API server needed):
//  1. schema: every document against the kubernetes-models / prometheus-operator JSON schemas
//     (the newest Kubernetes: kubernetes-models 5.1.0 carries 1.36.0; types, required fields,
//     enums; these schemas allow unknown fields); custom resources without such a package
//     (OpenShift's SCC, Kyverno, Gatekeeper) against the CRD schemas vendored in schemas/;
//  2. strict: every document as a typed TypeScript literal, so `tsc` rejects unknown or
//     misspelled fields (excess-property check) and wrong types;
//  3. oldest: every built-in object against Kubernetes 1.28's schemas (schemas/k8s-1.28.json),
//     closed to unknown fields as the API server's strict field validation is, so a field newer
//     than 1.28 (e.g. securityContext.appArmorProfile, 1.30) fails here.
// usage: node validate.mjs --work-dir DIR rendered.yaml...   (exit 0 ok, 1 findings, 2 usage)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import Ajv from "ajv";

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

// Vendored schemas (schemas/*.json, written by schemas/extract.mjs), compiled on first use.
// Formats (int32, date-time, …) are not checked: the types are, and kubernetes-models does the rest.
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
const vendored = new Map();  // "<file>:<apiVersion>/<kind>" -> the schema to compile
const compiled = new Map();
const oldest = JSON.parse(fs.readFileSync(path.join(here, "schemas/k8s-1.28.json"), "utf8"));
for (const file of fs.readdirSync(path.join(here, "schemas")).filter((f) => f.endsWith(".json"))) {
  const bundle = JSON.parse(fs.readFileSync(path.join(here, "schemas", file), "utf8"));
  for (const [key, schema] of Object.entries(bundle.kinds)) {
    vendored.set(`${file}:${key}`, { ...schema, definitions: bundle.definitions });
  }
}
function vendoredValidator(file, key) {
  const id = `${file}:${key}`;
  if (!compiled.has(id)) compiled.set(id, ajv.compile(vendored.get(id)));
  return compiled.get(id);
}
function crdSchemaFile(key) {
  for (const name of vendored.keys()) {
    const [file, ...rest] = name.split(":");
    if (file !== "k8s-1.28.json" && rest.join(":") === key) return file;
  }
  return undefined;
}
function describeErrors(errors) {
  return errors.slice(0, 6).map((e) => {
    const extra = e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : "";
    return `${e.instancePath || "/"} ${e.message}${extra}`;
  }).join("; ");
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
  const crdFile = crdSchemaFile(`${apiVersion}/${kind}`);
  if (crdFile) {
    const validate = vendoredValidator(crdFile, `${apiVersion}/${kind}`);
    if (!validate(doc.object)) fail(doc.where, `schema (${crdFile}): ${describeErrors(validate.errors)}`);
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

// 3. Kubernetes 1.28: every built-in object (the groups kubernetes-models carries).
for (const doc of documents.filter((d) => d.module?.startsWith("kubernetes-models/"))) {
  const key = `${doc.object.apiVersion}/${doc.object.kind}`;
  if (!oldest.kinds[key]) {
    fail(doc.where, `Kubernetes 1.28 does not serve ${key}`);
    continue;
  }
  const validate = vendoredValidator("k8s-1.28.json", key);
  if (!validate(doc.object)) fail(doc.where, `Kubernetes 1.28: ${describeErrors(validate.errors)}`);
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
