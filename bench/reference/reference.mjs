#!/usr/bin/env node
// The benchmark's reference peer: the published TypeScript `todo_write`
// (@deepseek-ai/dsh-tool-todo), booted from a composition file through the
// published cordis Loader and its `include` builtin, with one stand-in agent
// that owns an in-memory Session. run.sh installs the pinned tree and calls this.
//
//   node reference.mjs --config FILE --modules DIR --bench N
//       Prints one JSON line:
//         boot_ms      new Context -> Loader plugged in -> include the file -> loader.await()
//         import_ms    parsing FILE and importing the plugin packages it names
//                      (done before the boot clock starts, so boot_ms is wiring only)
//         calls        N
//         calls_ms     wall time of N sequential todo_write calls (5 todos each,
//                      all on the same agent)
//         calls_per_s  N / calls_ms, per second
//       A composition that does not boot is an error: message on stderr, exit 1.
//
//   node reference.mjs --config FILE --modules DIR < calls.jsonl
//       Reads {"args": <any>, "agent": true|false} per line (other keys ignored;
//       agent defaults to true and all agent calls share one agent) and prints:
//         {"boot_error": "..."}                      the composition did not boot (then stops)
//         {"tools": [{name, description, parameters}]}
//         {"isError", "text", "events", "structured"} one per call; events are the
//                                                     data of the todo/write events it appended
//         {"input_error": "..."}                     a line that is not a JSON object
//
// DIR is a node_modules folder holding the @deepseek-ai packages.
import { createRequire } from 'node:module'
import { existsSync } from 'node:fs'
import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { createInterface } from 'node:readline'

const USAGE = 'usage: node reference.mjs --config FILE --modules DIR [--bench N] [< calls.jsonl]'

function die(message, code = 2) {
  process.stderr.write(`reference: ${message}\n`)
  process.exit(code)
}

function readOptions(argv) {
  const options = { config: null, modules: null, bench: null }
  const rest = [...argv]
  while (rest.length > 0) {
    let flag = rest.shift()
    let value
    const eq = flag.indexOf('=')
    if (flag.startsWith('--') && eq > 0) {
      value = flag.slice(eq + 1)
      flag = flag.slice(0, eq)
    }
    const take = () => {
      if (value !== undefined) return value
      if (rest.length === 0) die(`${flag} needs a value\n${USAGE}`)
      return rest.shift()
    }
    switch (flag) {
      case '--config': options.config = take(); break
      case '--modules': options.modules = take(); break
      case '--bench': options.bench = take(); break
      case '-h':
      case '--help':
        process.stdout.write(USAGE + '\n')
        process.exit(0)
      default: die(`unknown argument ${flag}\n${USAGE}`)
    }
  }
  if (options.config === null) die(`--config is required\n${USAGE}`)
  if (options.modules === null) die(`--modules is required\n${USAGE}`)
  if (options.bench !== null) {
    const n = Number(options.bench)
    if (!Number.isSafeInteger(n) || n < 1) die(`--bench wants a positive whole number, got ${options.bench}`)
    options.bench = n
  }
  options.config = resolve(options.config)
  options.modules = resolve(options.modules)
  if (!existsSync(options.config)) die(`no such composition file: ${options.config}`)
  if (!existsSync(join(options.modules, '@deepseek-ai', 'cordis', 'package.json'))) {
    die(`${options.modules} holds no @deepseek-ai/cordis (run setup.sh first)`)
  }
  return options
}

// ESM import() does not search a given node_modules folder, so each package's
// entry file is found with a require-style resolver rooted in that folder and
// imported by URL. The packages then import one another from the same files,
// so there is a single instance of each (one cordis, one dsh-tools, ...).
function packageImporter(modulesDir) {
  const resolver = createRequire(join(modulesDir, 'package.json'))
  const pending = new Map()
  return specifier => {
    let promise = pending.get(specifier)
    if (promise === undefined) {
      promise = Promise.resolve().then(() => import(pathToFileURL(resolver.resolve(specifier)).href))
      pending.set(specifier, promise)
    }
    return promise
  }
}

const describe = error => (error instanceof Error ? error.message : String(error))
const twoPlaces = x => Math.round(x * 100) / 100
const emit = value => process.stdout.write(JSON.stringify(value) + '\n')

// Package names a composition refers to, at any depth of nested `config:` lists;
// builtins (`cordis:...`) and relative paths are left to the Loader.
function namedPackages(tree) {
  const found = []
  const visit = node => {
    if (Array.isArray(node)) return node.forEach(visit)
    if (node === null || typeof node !== 'object') return
    const name = node.name
    if (typeof name === 'string' && !name.startsWith('cordis:') && !name.startsWith('.') && !found.includes(name)) {
      found.push(name)
    }
    if (Array.isArray(node.config)) visit(node.config)
  }
  visit(tree)
  return found
}

async function bootComposition(pkg, configFile) {
  const { Context } = await pkg('@deepseek-ai/cordis')
  const { default: LoaderPlugin } = await pkg('@deepseek-ai/cordis-plugin-loader')
  const { default: IncludePlugin } = await pkg('@deepseek-ai/cordis-plugin-include')

  // Import phase: evaluate every plugin package the file names, so that the
  // boot figure below measures the Loader's work and not module evaluation.
  const importStart = performance.now()
  const yaml = await pkg('js-yaml').catch(() => null)
  const source = await readFile(configFile, 'utf8')
  let tree = null
  if (yaml !== null) {
    try { tree = (yaml.default ?? yaml).load(source) } catch { tree = null } // the Loader reports syntax errors
  }
  for (const name of namedPackages(tree)) await pkg(name).catch(() => {})
  const importMs = performance.now() - importStart

  // The Include plugin may write its file back, so it gets a private copy.
  const workDir = await mkdtemp(join(tmpdir(), 'cordis-reference-'))
  const bootFile = join(workDir, 'cordis.yml')
  await copyFile(configFile, bootFile)

  const bootStart = performance.now()
  const ctx = new Context()
  ctx.baseUrl = pathToFileURL(workDir).href + '/'
  await ctx.plugin(LoaderPlugin)
  ctx.loader.builtins.include = IncludePlugin
  ctx.loader.internal = {
    version: 'v2',
    import: async specifier => {
      if (!specifier.startsWith('@deepseek-ai/')) throw new Error(`composition asks for a package outside the pinned tree: ${specifier}`)
      return pkg(specifier)
    },
  }
  const teardown = async () => {
    await Promise.resolve().then(() => ctx.fiber.dispose()).catch(() => {})
    await rm(workDir, { recursive: true, force: true })
  }

  let thrown = null
  try {
    await ctx.loader.create({ name: 'cordis:include', config: { path: pathToFileURL(bootFile).href } })
    await ctx.loader.await()
  } catch (error) {
    thrown = error
  }
  const bootMs = performance.now() - bootStart

  // This Loader resolves loader.await() even when a plugin failed: a bad config
  // or a failed apply stays on that entry's fiber, and import failures only
  // reach the logger. Gather both, fiber errors first, without repeats.
  const problems = []
  const note = message => { if (!problems.includes(message)) problems.push(message) }
  if (thrown !== null) note(describe(thrown))
  for (const entry of ctx.loader.entries()) {
    if (entry.fiber) await entry.fiber.await().catch(error => note(describe(error)))
  }
  for (const record of ctx.logger.buffer ?? []) {
    if (record.type !== 'error') continue
    const args = record.args ?? []
    note(args[0] instanceof Error ? describe(args[0]) : args.map(String).join(' '))
  }
  if (problems.length === 0) {
    if (ctx.tools === undefined) problems.push('ctx.tools is not available')
    else if (!ctx.tools.schemas().some(schema => schema.name === 'todo_write')) problems.push('todo_write is not registered')
  }
  if (problems.length > 0) {
    await teardown()
    return { error: problems.join('\n') }
  }
  return { ctx, bootMs, importMs, teardown }
}

// A minimal Agent: just enough for the tool to find its session and append
// todo/write events; it never runs a turn.
async function standInAgent(pkg, ctx, serial) {
  const { Session, SessionId } = await pkg('@deepseek-ai/dsh-session')
  const id = SessionId(`cordis-reference-${serial}`)
  const child = ctx.plugin(() => {})
  const nothing = () => {}
  const agent = {
    id,
    options: {},
    session: new Session(id),
    status: 'idle',
    acceptsNextStep: false,
    ctx: child.ctx,
    send: nothing,
    followup: nothing,
    steer: nothing,
    inject: nothing,
    cancel: nothing,
    whenIdle: async () => {},
  }
  ctx.agents.register(agent)
  return agent
}

function makeCaller(ctx, CallId) {
  let serial = 0
  return async (args, agent) => {
    const mark = agent ? agent.session.events.length : 0
    const request = {
      signal: new AbortController().signal,
      callId: CallId(`reference-call-${serial++}`),
      name: 'todo_write',
      arguments: args,
    }
    if (agent) request.agent = agent
    const result = await ctx.tools.execute(request)
    const events = []
    if (agent) {
      for (const event of agent.session.events.slice(mark)) if (event.type === 'todo/write') events.push(event.data)
    }
    return { result, events }
  }
}

const textOf = result => result.content.filter(block => block.type === 'text').map(block => block.text).join('')

const BENCH_TODOS = [
  { content: 'read the spec', status: 'completed' },
  { content: 'write the parser', status: 'completed' },
  { content: 'wire the tool', status: 'in_progress' },
  { content: 'add tests', status: 'pending' },
  { content: 'update docs', status: 'pending' },
]

async function bench(pkg, booted, calls) {
  const { CallId } = await pkg('@deepseek-ai/dsh-llm')
  const agent = await standInAgent(pkg, booted.ctx, 0)
  const call = makeCaller(booted.ctx, CallId)
  const args = { todos: BENCH_TODOS }
  const start = performance.now()
  for (let i = 0; i < calls; i++) {
    const { result } = await call(args, agent)
    if (result.isError) throw new Error(`call ${i} was refused: ${textOf(result)}`)
  }
  const elapsed = performance.now() - start
  emit({
    boot_ms: twoPlaces(booted.bootMs),
    import_ms: twoPlaces(booted.importMs),
    calls,
    calls_ms: twoPlaces(elapsed),
    calls_per_s: twoPlaces(calls / (elapsed / 1000)),
  })
}

async function serveLines(pkg, booted) {
  const { CallId } = await pkg('@deepseek-ai/dsh-llm')
  const call = makeCaller(booted.ctx, CallId)
  emit({ tools: booted.ctx.tools.schemas().filter(schema => schema.name === 'todo_write') })
  let agent = null
  for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    if (line.trim() === '') continue
    let input
    try {
      input = JSON.parse(line)
    } catch (error) {
      emit({ input_error: `invalid JSON: ${describe(error)}` })
      continue
    }
    if (input === null || typeof input !== 'object' || Array.isArray(input)) {
      emit({ input_error: 'each line must be a JSON object {"args": ..., "agent": true|false}' })
      continue
    }
    let owner
    if (input.agent !== false) owner = agent ??= await standInAgent(pkg, booted.ctx, 0)
    const { result, events } = await call(input.args, owner)
    emit({
      isError: result.isError,
      text: textOf(result),
      events,
      structured: Object.hasOwn(result, 'value') && result.value !== undefined ? result.value : null,
    })
  }
}

const options = readOptions(process.argv.slice(2))
const pkg = packageImporter(options.modules)
try {
  const booted = await bootComposition(pkg, options.config)
  if (booted.error !== undefined) {
    if (options.bench !== null) die(`the composition did not boot: ${booted.error.replaceAll('\n', ' ')}`, 1)
    emit({ boot_error: booted.error })
  } else {
    try {
      if (options.bench !== null) await bench(pkg, booted, options.bench)
      else await serveLines(pkg, booted)
    } finally {
      await booted.teardown()
    }
  }
} catch (error) {
  process.stderr.write(`reference: ${error?.stack ?? error}\n`)
  process.exitCode = 1
}
