// The interpreter order (Python extension, setting, workspace .venv, PATH) and the messages of a failed probe.
import assert from "node:assert/strict";
import { test } from "node:test";
import { chooseInterpreter, explainProbe } from "../src/interpreter";

const none = (): boolean => false;

test("the Python extension's interpreter comes first, then the setting", () => {
  const both = chooseInterpreter({ fromPythonExtension: "/env/bin/python", setting: "/opt/py", folders: ["/ws"], exists: () => true });
  assert.deepEqual(both, { path: "/env/bin/python", source: "python extension" });
  const setting = chooseInterpreter({ setting: "/opt/py", folders: ["/ws"], exists: () => true });
  assert.deepEqual(setting, { path: "/opt/py", source: "evoteam.python setting" });
});

test("without either, a workspace .venv that exists, else python3 on PATH", () => {
  const seen: string[] = [];
  const venv = chooseInterpreter({
    setting: null,
    folders: ["/a/", "/b"],
    exists: (p) => {
      seen.push(p);
      return p === "/b/.venv/bin/python";
    },
  });
  assert.deepEqual(venv, { path: "/b/.venv/bin/python", source: "workspace .venv" });
  assert.deepEqual(seen, ["/a/.venv/bin/python", "/b/.venv/bin/python"]);
  assert.deepEqual(chooseInterpreter({ folders: ["/a"], exists: none }), { path: "python3", source: "PATH" });
});

test("a missing interpreter, a missing package and another failure each say what to do", () => {
  const python = { path: "/nope/python", source: "evoteam.python setting" as const };
  assert.deepEqual(explainProbe(python, 0, ""), { ok: true });
  const missing = explainProbe(python, "ENOENT", "");
  assert.equal(missing.ok, false);
  assert.match(missing.message ?? "", /no Python interpreter at \/nope\/python \(from the evoteam.python setting\).*Set evoteam.python/);
  const notInstalled = explainProbe(python, 1, "Traceback...\nModuleNotFoundError: No module named 'evoteam'\n");
  assert.match(notInstalled.message ?? "", /evoteam package is not installed for \/nope\/python/);
  const other = explainProbe(python, 1, "Traceback...\nImportError: libfoo.so: cannot open\n");
  assert.match(other.message ?? "", /cannot start with .*ImportError: libfoo.so: cannot open$/);
  assert.match(explainProbe(python, "EACCES", "").message ?? "", /permission denied/);
});
