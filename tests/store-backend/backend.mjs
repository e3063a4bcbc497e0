// Runs one operation of the harness's published JSONL session store
// (@deepseek-ai/dsh-session-persistence-jsonl) on a store root, so the tests
// can check what that backend writes and reads against ours.
//
//   node backend.mjs write --root DIR [--compression zstd|none] [--batch N] [--cwd DIR]
//       reads a log on stdin (a `{"type":"session",...}` header line, then one
//       event or packed chunk row per line), creates the session and appends
//       its events, N per append call (all in one call by default); prints the
//       path of the file the backend wrote. Events without a seq are numbered
//       in order, events without a time get 0, and `{{cwd}}` in the input is
//       replaced by --cwd (default /project), as the harness's own fixture
//       loaders prepare their sessions.
//   node backend.mjs read --root DIR --id ID [--compression zstd|none] [--inspect]
//       loads one session as a resuming harness does: `load` may repair the
//       file (drop a torn tail, close an open turn); `--inspect` reads without
//       writing. Prints the header line and then each expanded event. A log
//       the backend refuses prints {"error": ..., "cause"?: ...} and exits 1.
//   node backend.mjs list --root DIR [--compression zstd|none]
//       prints one header line per session the backend finds.
//   node backend.mjs history --root DIR --id ID [--compression zstd|none]
//       reads one session without writing and prints the history the
//       harness derives from it for a model: one message per line, the
//       surface folded (replacements applied) and each node projected.
//
// Every run also takes --modules DIR, the node_modules folder setup.sh filled.
// Run it with the Node that setup.sh installs there (see tests/support).
import { createRequire } from 'node:module'
import { existsSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { text } from 'node:stream/consumers'

const PACKED_TYPES = new Set(['text-chunks', 'reasoning-chunks', 'tool-call-chunks'])

function fail(message) {
  process.stderr.write(`backend.mjs: ${message}\n` +
    'usage: backend.mjs write|read|list|history --modules DIR --root DIR [--compression zstd|none] ' +
    '[--batch N] [--cwd DIR] [--id ID] [--inspect]\n')
  process.exit(2)
}

function parseArguments(argv) {
  const [operation, ...flags] = argv
  const options = { operation, compression: 'zstd', batch: Infinity, cwd: '/project', inspect: false }
  const takesValue = { '--root': 'root', '--id': 'id', '--compression': 'compression', '--batch': 'batch', '--cwd': 'cwd', '--modules': 'modules' }
  for (let i = 0; i < flags.length; i++) {
    const flag = flags[i]
    if (flag === '--inspect') { options.inspect = true; continue }
    const key = takesValue[flag]
    if (!key) fail(`unknown argument ${flag}`)
    if (i + 1 >= flags.length) fail(`${flag} needs a value`)
    options[key] = flags[++i]
  }
  if (!['write', 'read', 'list', 'history'].includes(operation)) fail('the operation is write, read, list or history')
  if (!options.root) fail('--root is required')
  if (!options.modules) fail('--modules is required')
  if ((operation === 'read' || operation === 'history') && options.id === undefined) fail(`${operation} needs --id`)
  if (!['zstd', 'none'].includes(options.compression)) fail('--compression is zstd or none')
  if (options.batch !== Infinity) {
    const n = Number(options.batch)
    if (!Number.isInteger(n) || n < 1) fail('--batch takes a whole number above 0')
    options.batch = n
  }
  return options
}

const options = parseArguments(process.argv.slice(2))

// ES modules ignore NODE_PATH: resolve each package inside --modules and import it by URL.
const resolver = createRequire(join(resolve(options.modules), '..', 'package.json'))
const importPackage = name => import(pathToFileURL(resolver.resolve(name)).href)
const { Context } = await importPackage('@deepseek-ai/cordis')
const { SessionStore, decodeStorageRecord, foldSurface, deriveEventMessage } = await importPackage('@deepseek-ai/dsh-session')
const { JsonlSessionPersistence } = await importPackage('@deepseek-ai/dsh-session-persistence-jsonl')

const emit = value => process.stdout.write(`${JSON.stringify(value)}\n`)
const header = meta => ({ type: 'session', ...meta })

/** The header's fields and the expanded events of a log given as text. */
function readInputLog(source) {
  const lines = source.replaceAll('{{cwd}}', options.cwd).split(/\r?\n/).filter(line => line.trim() !== '')
  if (lines.length === 0) throw new Error('the input log is empty')
  const first = JSON.parse(lines[0])
  if (first.type !== 'session') throw new Error('the first line is not a {"type":"session"} header')
  const { type: _header, ...meta } = first
  const events = []
  for (const line of lines.slice(1)) {
    const row = JSON.parse(line)
    const packed = PACKED_TYPES.has(row.type)
    // Defaults first, in the harness's key order (type, seq, time), so the
    // row's own fields win and keep their place after them.
    const defaults = packed
      ? { type: row.type, seq0: events.length, time0: 0 }
      : { type: row.type, seq: events.length, time: 0 }
    for (const event of decodeStorageRecord({ ...defaults, ...row })) events.push(event)
  }
  return { meta, events }
}

// The backend is a plugin of the harness's loader: mount the session store
// it builds on, then the backend with the root; disposing it drains writes.
const context = new Context()
await context.plugin(SessionStore)
const backend = await context.plugin(JsonlSessionPersistence, { root: resolve(options.root), compression: options.compression })
const persistence = context.sessionPersistence

async function run() {
  switch (options.operation) {
    case 'write': {
      const { meta, events } = readInputLog(await text(process.stdin))
      await persistence.create(meta)
      for (let from = 0; from < events.length; from += options.batch) {
        await persistence.append(meta.id, events.slice(from, from + options.batch))
      }
      await backend.dispose()
      const { path } = persistence.locate(meta)
      // The file is made by the first append, not by create.
      if (!existsSync(path)) throw new Error('the backend wrote no file (a log with no events)')
      process.stdout.write(`${path}\n`)
      return
    }
    case 'read': {
      const view = options.inspect ? await persistence.inspect(options.id) : await persistence.load(options.id)
      emit(header(view.meta))
      for (const event of view.events) emit(event)
      await backend.dispose()
      return
    }
    case 'history': {
      const view = await persistence.inspect(options.id)
      const bySeq = new Map(view.events.map(event => [event.seq, event]))
      for (const seq of foldSurface(view.events).nodes) {
        const message = deriveEventMessage(bySeq.get(seq))
        if (message !== null) emit(message)
      }
      await backend.dispose()
      return
    }
    case 'list': {
      for (const meta of await persistence.list()) emit(header(meta))
      await backend.dispose()
    }
  }
}

try {
  await run()
} catch (error) {
  const report = { error: error instanceof Error ? error.message : String(error) }
  if (error?.cause instanceof Error) report.cause = error.cause.message
  emit(report)
  await backend.dispose().catch(() => {})
  process.exitCode = 1
}
