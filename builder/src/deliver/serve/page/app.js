// The installer page. The form's state is the spec's values as JSON; the YAML shown (and
// sent) is written from it. Every change is checked by the server (POST /installer/check,
// which answers as POST /installer does); an error naming `installer.yaml:LINE` is shown under
// the control that wrote that line. Nothing is judged here: the page only writes YAML.
'use strict';

const SPEC_NAME = 'installer.yaml';
const MAX_SPEC_BYTES = 512 * 1024;

const state = {
  catalogue: null,
  name: '',
  // Spec key -> { version, values: Map(field -> JSON value), loaded: Map(field -> value) }.
  addons: new Map(),
  // Settings section key -> { values, loaded }.
  settings: new Map(),
  yaml: { text: '', lines: new Map() },
  // The last spec the server passed, and its answer.
  passed: null,
  sequence: 0,
  inFlight: null,
  timer: null,
};

// A raw YAML value typed into a mapping's box: written into the spec as it is.
class RawYaml {
  constructor(text) { this.text = text; }
}

const byId = (id) => document.getElementById(id);

// An element with attributes and children (strings become text: nothing is parsed as HTML).
function element(tag, attributes = {}, children = []) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value !== undefined && value !== null && value !== false) node.setAttribute(name, value === true ? '' : value);
  }
  for (const child of [].concat(children)) {
    node.append(child);
  }
  return node;
}

// ---- YAML, written ----

const SPECIAL_WORDS = /^(true|false|null|yes|no|on|off|y|n|~)$/i;

function key(name) {
  return /^[A-Za-z][A-Za-z0-9_-]*$/.test(name) && !SPECIAL_WORDS.test(name) ? name : JSON.stringify(name);
}

// A scalar as YAML: plain where YAML reads it back as the same string, else double-quoted
// (JSON's escapes are YAML's too).
function scalar(value) {
  if (typeof value === 'string') {
    const plain = /^[A-Za-z_/][A-Za-z0-9_./-]*$/.test(value) && !SPECIAL_WORDS.test(value);
    return plain ? value : JSON.stringify(value);
  }
  return JSON.stringify(value);
}

// A multi-line string as a literal block (`|`, `|-`, `|+`), where its text allows one.
function literalBlock(text) {
  if (!text.includes('\n') || /[\u0000-\u0008\u000b-\u001f\u007f\u0085\u2028\u2029\ufeff]/.test(text)) {
    return null;
  }
  const body = text.replace(/\n+$/, '');
  const trailing = text.length - body.length;
  const lines = body.split('\n');
  if (body === '' || /^[ \t]/.test(lines[0]) || lines.some((line) => /^[ \t]+$/.test(line))) {
    return null;
  }
  const chomp = trailing === 0 ? '-' : trailing === 1 ? '' : '+';
  return { header: '|' + chomp, lines: lines.concat(Array(Math.max(trailing - 1, 0)).fill('')) };
}

// Writes `name: value` at `indent`, noting each line it takes for `control`.
function writeField(out, lines, indent, name, value, control) {
  const note = () => lines.set(out.length, control);
  if (value instanceof RawYaml) {
    out.push(`${indent}${key(name)}:`); note();
    for (const line of value.text.replace(/\s+$/, '').split('\n')) {
      out.push(line.trim() === '' ? '' : `${indent}  ${line}`); note();
    }
    return;
  }
  const block = typeof value === 'string' ? literalBlock(value) : null;
  if (block) {
    out.push(`${indent}${key(name)}: ${block.header}`); note();
    for (const line of block.lines) {
      out.push(line === '' ? '' : `${indent}  ${line}`); note();
    }
  } else if (Array.isArray(value) && value.length > 0) {
    out.push(`${indent}${key(name)}:`); note();
    for (const item of value) {
      out.push(`${indent}  - ${typeof item === 'string' ? scalar(item) : JSON.stringify(item)}`); note();
    }
  } else {
    out.push(`${indent}${key(name)}: ${scalar(value)}`); note();
  }
}

function writeYaml() {
  const out = [];
  const lines = new Map();
  out.push(`apiVersion: ${state.catalogue.apiVersion}`, `kind: ${state.catalogue.kind}`);
  if (state.name.trim() !== '') {
    out.push('metadata:', `  name: ${scalar(state.name.trim())}`);
    lines.set(out.length, 'installer-name');
  }
  out.push('spec:');
  for (const addon of state.catalogue.addons) {
    const chosen = state.addons.get(addon.key);
    if (!chosen) continue;
    out.push(`  ${key(addon.key)}:`);
    lines.set(out.length, `version-${addon.key}`);
    writeField(out, lines, '    ', 'version', chosen.version, `version-${addon.key}`);
    for (const [name, value] of chosen.values) {
      writeField(out, lines, '    ', name, value, `field-${addon.key}-${name}`);
    }
  }
  for (const section of state.catalogue.settings) {
    const chosen = state.settings.get(section.key);
    if (!chosen || chosen.values.size === 0) continue;
    out.push(`  ${key(section.key)}:`);
    for (const [name, value] of chosen.values) {
      writeField(out, lines, '    ', name, value, `field-settings-${section.key}-${name}`);
    }
  }
  return { text: out.join('\n') + '\n', lines };
}

// ---- values typed, and shown ----

function shown(value, type) {
  if (value === undefined) return '';
  if (value instanceof RawYaml) return value.text;
  if (type === 'list' && Array.isArray(value) && value.every((item) => typeof item === 'string')) {
    return value.join('\n');
  }
  if (type === 'mapping' || type === 'commands' || typeof value === 'object') {
    return JSON.stringify(value, null, 2);
  }
  return String(value);
}

// What a control's text stands for: unset when empty; the value loaded from a file while
// its text is unchanged (so a file comes back as the same spec, and the same id).
function typed(text, type, loaded) {
  if (loaded !== undefined && shown(loaded, type) === text) return loaded;
  if (text.trim() === '') return undefined;
  switch (type) {
    case 'boolean': return text === 'true';
    case 'integer': {
      const number = /^[+-]?[0-9]+$/.test(text.trim()) ? Number(text.trim()) : NaN;
      // Anything else goes as typed, for the server to refuse in its own words.
      return Number.isSafeInteger(number) ? number : text;
    }
    case 'list': return text.split('\n').map((item) => item.trim()).filter((item) => item !== '');
    case 'mapping':
    case 'commands': return new RawYaml(text);
    default: return text;
  }
}

const TYPE_WORDS = {
  string: 'text', boolean: 'true or false', integer: 'a whole number',
  list: 'a list, one item a line', mapping: 'YAML', commands: 'YAML: a list of command lines',
};

function fieldControl(scope, field, holder) {
  const id = `field-${scope}-${field.name}`;
  const current = holder.values.get(field.name);
  const loaded = holder.loaded.get(field.name);
  let control;
  if (field.type === 'string' && Array.isArray(field.values)) {
    const unset = field.default === undefined || field.default === null ? 'unset' : `default: ${field.default}`;
    const offered = field.values.concat(typeof current === 'string' && !field.values.includes(current) ? [current] : []);
    control = element('select', { id }, [element('option', { value: '' }, unset)]
      .concat(offered.map((value) => element('option', { value }, value))));
    control.value = typeof current === 'string' ? current : '';
  } else if (field.type === 'boolean') {
    const unset = field.default === undefined || field.default === null ? 'unset' : `default: ${field.default}`;
    control = element('select', { id }, [
      element('option', { value: '' }, unset),
      element('option', { value: 'true' }, 'true'),
      element('option', { value: 'false' }, 'false'),
    ]);
    control.value = current === true ? 'true' : current === false ? 'false' : '';
  } else if (field.type === 'integer') {
    control = element('input', { id, type: 'text', inputmode: 'numeric', autocomplete: 'off' });
    control.value = shown(current, field.type);
  } else {
    const text = shown(current, field.type);
    const rows = field.type === 'string' ? Math.max(1, text.split('\n').length) : Math.max(3, text.split('\n').length);
    control = element('textarea', { id, rows: Math.min(rows, 12), spellcheck: 'false' });
    control.value = text;
  }
  if (field.default !== undefined && field.default !== null && field.type !== 'boolean') {
    control.setAttribute('placeholder', shown(field.default, field.type));
  }
  control.setAttribute('aria-describedby', `${id}-help ${id}-error`);
  const update = () => {
    const value = typed(control.value, field.type, loaded);
    if (value === undefined) holder.values.delete(field.name); else holder.values.set(field.name, value);
    if (control.tagName === 'TEXTAREA' && field.type === 'string') {
      control.rows = Math.min(Math.max(1, control.value.split('\n').length), 12);
    }
    changed();
  };
  control.addEventListener(control.tagName === 'SELECT' ? 'change' : 'input', update);
  const defaultWords = field.default === undefined || field.default === null ? '' : `; default ${JSON.stringify(field.default)}`;
  const has = (bound) => typeof bound === 'number';
  const range = has(field.minimum) && has(field.maximum) ? ` from ${field.minimum} to ${field.maximum}`
    : has(field.minimum) ? ` of at least ${field.minimum}` : has(field.maximum) ? ` of at most ${field.maximum}` : '';
  return element('div', { class: 'field' }, [
    element('label', { for: id }, field.name),
    control,
    element('span', { class: 'help', id: `${id}-help` }, `${field.help} (${TYPE_WORDS[field.type] || field.type}${range}${defaultWords})`),
    element('span', { class: 'error', id: `${id}-error` }),
  ]);
}

// Fields in a box of their own, folded unless `open` or one of them is set (kURL's add-ons
// have dozens).
function fieldBox(scope, fields, holder, title, open) {
  const box = element('details', { class: 'fields' }, [element('summary', {}, `${title} (${fields.length})`)]);
  box.open = open || fields.some((field) => holder.values.has(field.name));
  for (const field of fields) box.append(fieldControl(scope, field, holder));
  return box;
}

// ---- the form ----

function versionEntry(addon, request) {
  const alias = addon.aliases.find((candidate) => candidate.request === request);
  const exact = alias ? alias.version : request;
  return addon.versions.find((entry) => entry.version === exact) || addon.versions[0];
}

function renderAddon(addon) {
  const chosen = state.addons.get(addon.key);
  const use = element('input', { type: 'checkbox', id: `use-${addon.key}` });
  use.checked = Boolean(chosen);
  const select = element('select', { id: `version-${addon.key}`, 'aria-describedby': `version-${addon.key}-error` });
  for (const alias of addon.aliases) {
    select.append(element('option', { value: alias.request }, `${alias.request} (now ${alias.version})`));
  }
  for (const entry of addon.versions) {
    select.append(element('option', { value: entry.version }, entry.version));
  }
  if (chosen && ![...select.options].some((option) => option.value === chosen.version)) {
    select.append(element('option', { value: chosen.version }, chosen.version));
  }
  select.value = chosen ? chosen.version : 'latest';
  select.disabled = !chosen;
  const box = element('fieldset', { class: 'addon', id: `addon-${addon.key}` }, [
    element('legend', {}, [use, element('label', { for: use.id }, addon.name)]),
    element('div', { class: 'field' }, [
      element('label', { for: select.id }, 'Version'),
      select,
      element('span', { class: 'error', id: `version-${addon.key}-error` }),
    ]),
  ]);
  if (chosen) {
    const fields = versionEntry(addon, chosen.version).fields;
    if (fields.length > 0) box.append(fieldBox(addon.key, fields, chosen, 'Settings', fields.length <= 6));
  }
  use.addEventListener('change', () => {
    if (use.checked) {
      state.addons.set(addon.key, { version: select.value, values: new Map(), loaded: new Map() });
    } else {
      state.addons.delete(addon.key);
    }
    rerender(addon, use.id);
  });
  select.addEventListener('change', () => {
    const holder = state.addons.get(addon.key);
    holder.version = select.value;
    // A value for a field the new version does not take goes; the others stay.
    const taken = new Set(versionEntry(addon, select.value).fields.map((field) => field.name));
    for (const name of [...holder.values.keys()]) {
      if (!taken.has(name)) holder.values.delete(name);
    }
    rerender(addon, select.id);
  });
  return box;
}

// Draws an add-on again (its fields follow its version), keeping the focus where it was.
function rerender(addon, focused) {
  byId(`addon-${addon.key}`).replaceWith(renderAddon(addon));
  byId(focused).focus();
  changed();
}

function renderForm() {
  byId('installer-name').value = state.name;
  const addons = byId('addons');
  addons.replaceChildren(...state.catalogue.addons.map(renderAddon));
  const settings = byId('settings');
  settings.replaceChildren();
  for (const section of state.catalogue.settings) {
    if (!state.settings.has(section.key)) state.settings.set(section.key, { values: new Map(), loaded: new Map() });
    settings.append(fieldBox(`settings-${section.key}`, section.fields, state.settings.get(section.key), `spec.${section.key}`, false));
  }
  changed();
}

// Fills the form from a spec the server parsed (its `spec` as JSON).
function fillFrom(document) {
  state.name = (document.metadata && document.metadata.name) || '';
  state.addons.clear();
  state.settings.clear();
  for (const [specKey, fields] of Object.entries(document.spec || {})) {
    const values = new Map(Object.entries(fields).filter(([name]) => name !== 'version'));
    const holder = { values, loaded: new Map(values) };
    if (state.catalogue.addons.some((addon) => addon.key === specKey)) {
      state.addons.set(specKey, { version: String(fields.version), ...holder });
    } else {
      state.settings.set(specKey, holder);
    }
  }
  renderForm();
}

// ---- the server's check ----

function changed() {
  state.yaml = writeYaml();
  byId('yaml').textContent = state.yaml.text;
  byId('create').disabled = true;
  clearTimeout(state.timer);
  // An answer to an earlier spec, still on its way, is not this one's.
  state.sequence += 1;
  if (state.addons.size === 0) {
    showStatus('Pick an add-on to start.', false);
    clearErrors();
    return;
  }
  showStatus('Checking…', false);
  state.timer = setTimeout(check, 250);
}

async function post(path, text, signal) {
  const response = await fetch(path, {
    method: 'POST',
    body: text,
    headers: { 'Content-Type': 'application/yaml', Accept: 'application/json' },
    signal,
  });
  let body;
  try {
    body = await response.json();
  } catch {
    body = { error: `the server answered ${response.status} with no reason` };
  }
  return { ok: response.ok, status: response.status, body };
}

async function check() {
  if (state.inFlight) state.inFlight.abort();
  state.inFlight = new AbortController();
  const sequence = ++state.sequence;
  const yaml = state.yaml;
  let answer;
  try {
    answer = await post('/installer/check', yaml.text, state.inFlight.signal);
  } catch (error) {
    if (error.name === 'AbortError') return;
    showStatus(`The server did not answer the check: ${error.message}`, true);
    return;
  }
  if (sequence !== state.sequence) return;
  clearErrors();
  if (!answer.ok) {
    showRefusal(answer.body.error, yaml.lines);
    return;
  }
  state.passed = { yaml: yaml.text, answer: answer.body };
  const resolved = answer.body.addons.map((addon) => (addon.requested === addon.version
    ? `${addon.name} ${addon.version}` : `${addon.name} ${addon.requested} → ${addon.version}`));
  showStatus(`The server checked the spec: installer ${answer.body.id}; ${resolved.join(', ')}.`, false);
  byId('create').disabled = false;
}

function clearErrors() {
  for (const error of document.querySelectorAll('.error')) error.textContent = '';
  for (const control of document.querySelectorAll('[aria-invalid]')) control.removeAttribute('aria-invalid');
}

// The server's refusal, under the control that wrote the line it names (and in the status).
function showRefusal(message, lines) {
  const line = new RegExp(`^${SPEC_NAME.replace('.', '\\.')}:([0-9]+):`).exec(message);
  const controlId = line ? lines.get(Number(line[1])) : undefined;
  const control = controlId ? byId(controlId) : null;
  if (control) {
    control.setAttribute('aria-invalid', 'true');
    const error = byId(`${controlId}-error`);
    if (error) error.textContent = message;
  }
  showStatus(`The server refused the spec: ${message}`, true);
}

function showStatus(message, failed) {
  const status = byId('check-status');
  status.textContent = message;
  status.classList.toggle('failed', failed);
}

// ---- create, load ----

async function create() {
  const button = byId('create');
  if (!state.passed || state.passed.yaml !== state.yaml.text) return;
  button.disabled = true;
  let answer;
  try {
    answer = await post('/installer', state.yaml.text);
  } catch (error) {
    showStatus(`The server did not answer: ${error.message}`, true);
    button.disabled = false;
    return;
  }
  if (!answer.ok) {
    showStatus(`The server did not create the installer: ${answer.body.error}`, true);
    button.disabled = false;
    return;
  }
  showResult(answer.body);
}

function showResult(body) {
  byId('result-id').textContent = body.id;
  byId('online-command').textContent = `curl -fsSL ${body.url} | sudo bash`;
  for (const [format, id] of [['gzip', 'bundle-gzip'], ['zstd', 'bundle-zstd']]) {
    const link = byId(id);
    link.href = body.bundles[format];
    link.textContent = body.bundles[format].split('/').pop();
  }
  const file = body.bundles.gzip.split('/').pop();
  byId('airgap-command').textContent = [
    `# where the server is reachable, then carry the file to the node:`,
    `curl -fsSLO ${body.bundles.gzip}`,
    `tar xzf ${file} --no-same-owner --no-same-permissions && sudo bash install.sh airgap`,
  ].join('\n');
  const spec = byId('spec-url');
  spec.href = body.spec;
  spec.textContent = body.spec;
  const signing = byId('signing');
  signing.hidden = !body.signingKey;
  if (body.signingKey) {
    byId('key-fingerprint').textContent = body.signingKey.fingerprint;
    byId('key-url').href = body.signingKey.url;
    byId('key-command').textContent = `sudo mkdir -p /etc/berth/trusted-keys && curl -fsSL ${body.signingKey.url} | sudo tee /etc/berth/trusted-keys/vendor.pub >/dev/null`;
  }
  const result = byId('result');
  result.hidden = false;
  byId('result-title').focus();
  showStatus(`Installer ${body.id} is kept on the server.`, false);
}

async function load() {
  const status = byId('load-status');
  const text = byId('paste').value;
  if (text.trim() === '') {
    status.textContent = 'Paste a spec, or read one from a file, first.';
    return;
  }
  status.textContent = 'Reading it…';
  let answer;
  try {
    answer = await post('/installer/check', text);
  } catch (error) {
    status.textContent = `The server did not answer: ${error.message}`;
    return;
  }
  if (!answer.ok) {
    status.textContent = `The server refused the spec: ${answer.body.error}`;
    return;
  }
  fillFrom(answer.body.spec);
  status.textContent = `The form holds the spec now (installer ${answer.body.id}).`;
}

async function readFile() {
  const file = byId('spec-file').files[0];
  if (!file) return;
  if (file.size > MAX_SPEC_BYTES) {
    byId('load-status').textContent = `${file.name} is ${file.size} bytes, more than the ${MAX_SPEC_BYTES} the server reads.`;
    return;
  }
  byId('paste').value = await file.text();
  await load();
}

async function start() {
  byId('installer-name').addEventListener('input', (event) => { state.name = event.target.value; changed(); });
  byId('create').addEventListener('click', create);
  byId('load').addEventListener('click', load);
  byId('spec-file').addEventListener('change', readFile);
  byId('create').disabled = true;
  let response;
  try {
    response = await fetch('/addons.json', { headers: { Accept: 'application/json' } });
  } catch (error) {
    byId('catalogue-status').textContent = `The server did not answer: ${error.message}`;
    return;
  }
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    byId('catalogue-status').textContent = `The server could not list its add-ons: ${body.error || response.status}`;
    return;
  }
  state.catalogue = await response.json();
  renderForm();
}

document.addEventListener('DOMContentLoaded', start);
