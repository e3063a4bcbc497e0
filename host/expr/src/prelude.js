// Set-up script for one cordis-expr context. Evaluated once, before any
// expression, as a function expression; the host calls it with the
// environment as JSON text and keeps the object it returns.
//
// Everything the helpers need is captured here, so an expression that
// overwrites a global (`JSON = 1`) cannot break later evaluations.
//
// The host loads this script compiled, from prelude.bytecode: after a
// change here, run `CORDIS_EXPR_BLESS=1 cargo test -p cordis-expr
// prelude_bytecode` and commit both files.
(function (environmentJson) {
  'use strict';
  const global = globalThis;
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const indirectEval = global.eval;
  const freeze = Object.freeze;
  const create = Object.create;
  const defineProperty = Object.defineProperty;
  const keys = Object.keys;
  const hasOwn = Object.prototype.hasOwnProperty;
  const apply = Reflect.apply;
  const reflectGet = Reflect.get;
  const ProxyCtor = Proxy;
  const ErrorCtor = Error;
  const ReferenceErrorCtor = ReferenceError;
  const SyntaxErrorCtor = SyntaxError;
  const StringCtor = String;
  const isFinite = Number.isFinite;

  // Errors raised by this prelude carry this key, so that the host can tell
  // them from errors the expression itself throws.
  const mark = Symbol('cordis-expr');

  function refusal(kind, name, message) {
    const error = new ReferenceErrorCtor(message);
    error[mark] = { kind: kind, name: name };
    return error;
  }

  function own(object, key) {
    return apply(hasOwn, object, [key]);
  }

  // A data property that the expression can neither change nor delete.
  function fixed(object, key, value) {
    defineProperty(object, key, {
      value: value, writable: false, enumerable: true, configurable: false,
    });
  }

  const environment = parse(environmentJson);

  const env = {};
  for (const name of keys(environment.vars)) fixed(env, name, environment.vars[name]);
  freeze(env);

  const cwd = environment.cwd;
  const processTarget = {};
  fixed(processTarget, 'env', env);
  fixed(processTarget, 'cwd', function cwd_() { return cwd; });
  fixed(processTarget, 'platform', environment.platform);
  fixed(processTarget, 'execPath', environment.execPath);
  freeze(processTarget);

  // `process` answers only the members above (and what every object
  // inherits); any other member is an error naming it, instead of the
  // silent `undefined` that would hide a Node-only helper.
  const process = new ProxyCtor(processTarget, {
    get(target, key, receiver) {
      if (typeof key === 'symbol' || key in target) return reflectGet(target, key, receiver);
      if (key === 'toJSON') return undefined;
      const name = 'process.' + key;
      throw refusal('unknown', name, name + ' is not defined');
    },
  });
  defineProperty(global, 'process', {
    value: process, writable: false, enumerable: false, configurable: false,
  });

  // `ctx` is rebuilt for every evaluation from the services the caller
  // injects; reading a service that is not injected is an error naming it.
  let currentCtx = undefined;
  function makeCtx(servicesJson) {
    const services = parse(servicesJson);
    const target = create(null);
    for (const name of keys(services)) target[name] = services[name];
    return new ProxyCtor(target, {
      get(t, key, receiver) {
        if (typeof key === 'symbol' || own(t, key)) return reflectGet(t, key, receiver);
        if (key === 'toJSON') return undefined;
        throw refusal('noservice', key, 'the entry does not inject a service `' + key + '`');
      },
    });
  }
  defineProperty(global, 'ctx', {
    get() { return currentCtx; }, enumerable: false, configurable: false,
  });

  function notJson(what) {
    const error = new ErrorCtor('the result has no JSON form: ' + what);
    error[mark] = { kind: 'notjson', name: what };
    return error;
  }

  function where(key) {
    return key === '' ? '' : ' (at key `' + key + '`)';
  }

  // JSON.stringify, but a function, symbol, BigInt, NaN or Infinity anywhere
  // in the value is an error instead of being dropped or turned into null.
  function replacer(key, value) {
    switch (typeof value) {
      case 'function': throw notJson('a function' + where(key));
      case 'symbol': throw notJson('a symbol' + where(key));
      case 'bigint': throw notJson('a BigInt' + where(key));
      case 'number':
        if (!isFinite(value)) throw notJson(StringCtor(value) + where(key));
        return value;
      default: return value;
    }
  }

  function toJson(value) {
    try {
      return stringify(value, replacer);
    } catch (error) {
      if (error !== null && typeof error === 'object' && error[mark]) throw error;
      if (error instanceof TypeError && /circular/i.test(StringCtor(error.message))) {
        throw notJson('a cyclic structure');
      }
      throw error;
    }
  }

  function describe(error) {
    if (error !== null && typeof error === 'object') {
      const marked = error[mark];
      if (marked) return { kind: marked.kind, name: marked.name, text: StringCtor(error.message) };
      let name = '', message = '', stack = '';
      try {
        name = StringCtor(error.name);
        message = StringCtor(error.message);
        stack = StringCtor(error.stack);
      } catch (_) { /* a hostile getter: keep what we have */ }
      // A parse error of the expression itself is thrown by `eval` before
      // any of its code runs, so its stack has no frame of the expression
      // (`<eval>`). A SyntaxError thrown while it runs (JSON.parse, a nested
      // eval) has one.
      if (error instanceof SyntaxErrorCtor && !/ at <eval> \(/.test(stack)) {
        return { kind: 'syntax', name: '', text: message };
      }
      const found = /^(\S+) is not defined$/.exec(message);
      if (error instanceof ReferenceErrorCtor && found) {
        return { kind: 'unknown', name: found[1], text: message };
      }
      if (name === 'InternalError' && /^out of memory/.test(message)) {
        return { kind: 'limit', name: 'memory', text: message };
      }
      if ((name === 'InternalError' && /^stack overflow/.test(message))
          || (name === 'RangeError' && message === 'Maximum call stack size exceeded')) {
        return { kind: 'limit', name: 'stack', text: message };
      }
      return { kind: 'thrown', name: name, text: name ? name + ': ' + message : message };
    }
    let text = '';
    try { text = StringCtor(error); } catch (_) { text = typeof error; }
    return { kind: 'thrown', name: '', text: text };
  }

  // Evaluates one expression. Returns {kind: 'ok', text: <JSON>},
  // {kind: 'undefined'}, or a description of the error (see `describe`).
  // With `truthy`, returns {kind: 'ok', text: 'true' | 'false'} instead.
  function run(source, servicesJson, truthy) {
    try {
      currentCtx = makeCtx(servicesJson);
      const value = indirectEval(source);
      if (truthy) return { kind: 'ok', name: '', text: value ? 'true' : 'false' };
      if (value === undefined) return { kind: 'undefined', name: '', text: '' };
      const text = toJson(value);
      if (text === undefined) return { kind: 'undefined', name: '', text: '' };
      return { kind: 'ok', name: '', text: text };
    } catch (error) {
      return describe(error);
    } finally {
      currentCtx = undefined;
    }
  }

  return freeze({ run: run });
})
