// Writes the vendored schemas beside this file from upstream sources (run by hand when a pin
// moves; the sources are not needed at test time). Each output is
//   { "source": ..., "kinds": { "<apiVersion>/<kind>": <schema> }, "definitions": { ... } }
// with descriptions dropped and every object that lists its properties closed
// (additionalProperties: false), so validate.mjs rejects unknown fields as the API server's
// strict field validation (kubectl's default since 1.27) does.
// usage:
//   node extract.mjs k8s SWAGGER.json SOURCE > k8s-1.28.json
//       (Kubernetes' OpenAPI v2 with enums: tommy351/kubernetes-openapi-spec openapi/1.28.0.json)
//   node extract.mjs crd CRD.yaml VERSION SOURCE > NAME.json
//   node extract.mjs gatekeeper MATCHCRD_CONSTANT.go SOURCE TEMPLATE.yaml... > gatekeeper.json
import fs from "node:fs";
import { parseAllDocuments } from "yaml";

// The groups whose kinds the manifests may use; every definition they reach is kept.
const K8S_GROUPS = new Set([
  "", "apps", "rbac.authorization.k8s.io", "policy", "scheduling.k8s.io", "networking.k8s.io",
  "admissionregistration.k8s.io", "apiextensions.k8s.io", "coordination.k8s.io",
]);

// A schema node: keywords; `properties`, `definitions` and `patternProperties` map field names
// (which may be "description" or "enum") to schemas.
function close(schema) {
  if (Array.isArray(schema)) return schema.map(close);
  if (schema === null || typeof schema !== "object") return schema;
  const out = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === "description" || key === "example") continue;
    if (key === "properties" || key === "definitions" || key === "patternProperties") {
      out[key] = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, close(v)]));
    } else if (key === "enum") {
      out[key] = [...new Set(value)];  // 1.28 lists some values twice
    } else {
      out[key] = key === "required" ? value : close(value);
    }
  }
  if (out.properties && out.additionalProperties === undefined &&
      !out["x-kubernetes-preserve-unknown-fields"]) {
    out.additionalProperties = false;
  }
  // CRD schemas mark optional nulls as nullable (OpenAPI v3); JSON Schema spells it as a type.
  if (out.nullable === true && typeof out.type === "string") out.type = [out.type, "null"];
  delete out.nullable;
  return out;
}

function k8s(file, source) {
  const spec = JSON.parse(fs.readFileSync(file, "utf8"));
  const all = spec.definitions;
  // The wire forms the API server accepts for these two (the spec says only "string").
  all["io.k8s.apimachinery.pkg.util.intstr.IntOrString"] = { type: ["string", "integer"] };
  all["io.k8s.apimachinery.pkg.api.resource.Quantity"] = { type: ["string", "number"] };
  const kinds = {};
  const keep = new Set();
  const visit = (name) => {
    if (keep.has(name)) return;
    keep.add(name);
    JSON.stringify(all[name]).replace(/"#\/definitions\/([^"]+)"/g, (_, ref) => visit(ref));
  };
  for (const [name, definition] of Object.entries(all)) {
    for (const gvk of definition["x-kubernetes-group-version-kind"] ?? []) {
      if (!K8S_GROUPS.has(gvk.group) || name.endsWith("List")) continue;
      const apiVersion = gvk.group ? `${gvk.group}/${gvk.version}` : gvk.version;
      if (!definition.properties?.metadata) continue;  // not a stored object (e.g. Status)
      kinds[`${apiVersion}/${gvk.kind}`] = { $ref: `#/definitions/${name}` };
      visit(name);
    }
  }
  const definitions = {};
  for (const name of [...keep].sort()) {
    const { "x-kubernetes-group-version-kind": _, ...rest } = all[name];
    definitions[name] = close(rest);
  }
  return { source: `${source} (Kubernetes ${spec.info.version})`, kinds, definitions };
}

function crdVersionSchema(crd, version) {
  const entry = crd.spec.versions.find((v) => v.name === version);
  if (!entry) throw new Error(`${crd.metadata.name}: no version ${version}`);
  const schema = close(entry.schema.openAPIV3Schema);
  schema.properties.metadata = { type: "object" };  // checked by the API server's ObjectMeta
  return schema;
}

function crd(file, version, source) {
  const docs = parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => d.toJS());
  const crd = docs.find((d) => d?.kind === "CustomResourceDefinition");
  const apiVersion = `${crd.spec.group}/${version}`;
  return {
    source,
    kinds: { [`${apiVersion}/${crd.spec.names.kind}`]: crdVersionSchema(crd, version) },
    definitions: {},
  };
}

// A Gatekeeper constraint's schema, as Gatekeeper builds its CRD: spec.match from its match CRD,
// spec.parameters from the ConstraintTemplate, spec.enforcementAction a string.
function gatekeeper(matchFile, source, templates) {
  const go = fs.readFileSync(matchFile, "utf8");
  const matchCrd = parseAllDocuments(go.slice(go.indexOf("`") + 1, go.lastIndexOf("`")))
    .map((d) => d.toJS()).find((d) => d?.kind === "CustomResourceDefinition");
  const match = close(matchCrd.spec.versions[0].schema.openAPIV3Schema.properties.embeddedMatch);
  const kinds = {};
  for (const file of templates) {
    const template = parseAllDocuments(fs.readFileSync(file, "utf8"))[0].toJS();
    const parameters = close(template.spec.crd.spec.validation?.openAPIV3Schema ?? { type: "object" });
    const version = template.metadata.annotations?.["metadata.gatekeeper.sh/version"] ?? "?";
    kinds[`constraints.gatekeeper.sh/v1beta1/${template.spec.crd.spec.names.kind}`] = {
      type: "object",
      required: ["apiVersion", "kind", "metadata", "spec"],
      additionalProperties: false,
      properties: {
        apiVersion: { type: "string" },
        kind: { type: "string" },
        metadata: { type: "object" },
        spec: {
          type: "object",
          additionalProperties: false,
          properties: {
            match,
            parameters,
            enforcementAction: { type: "string" },
            scopedEnforcementActions: { type: "array" },
          },
        },
        status: { type: "object" },
      },
      "x-template": `${template.metadata.name} ${version}`,
    };
  }
  return { source, kinds, definitions: {} };
}

const [mode, ...args] = process.argv.slice(2);
let out;
if (mode === "k8s") out = k8s(args[0], args[1]);
else if (mode === "crd") out = crd(args[0], args[1], args[2]);
else if (mode === "gatekeeper") out = gatekeeper(args[0], args[1], args.slice(2));
else {
  console.error("usage: extract.mjs k8s|crd|gatekeeper ...");
  process.exit(2);
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
