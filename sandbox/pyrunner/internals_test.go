package pyrunner

import (
	"os/exec"
	"strings"
	"testing"
)

// internalsCheck loads the runner's functions without running it and
// compares the stand-ins it has for modules it does not import (os.path,
// json, ast.walk, opcode) with the real ones, on inputs chosen to break
// them. It prints "ok" or what differed.
const internalsCheck = `
import ast, json, opcode, os, sys, tempfile
g = {"__name__": "nsbox_runner_test"}
exec(compile(sys.stdin.read(), "runner.py", "exec"), g)
bad = []
def same(what, got, want):
    if got != want:
        bad.append("%s: got %r, want %r" % (what, got, want))

same("IMPORT_NAME", g["IMPORT_NAME"], opcode.opmap["IMPORT_NAME"])

d = tempfile.mkdtemp()
os.chdir(d)
os.makedirs("a/b/c")
os.symlink("a/b", "rel")                  # relative link
os.symlink(d + "/a/b/c", "abs")            # absolute link
os.symlink("rel/c/../..", "dots")          # .. after a link
os.symlink("loop1", "loop2"); os.symlink("loop2", "loop1")
os.symlink("missing/x", "dangling")
os.symlink("/", "root")
for p in ["rel", "rel/c", "abs", "abs/..", "dots", "dots/b", "loop1", "loop1/x",
          "dangling", "dangling/y", "root", "root/..", "/", "//x//y/", "./a/./b/",
          "a/../../..", "nowhere/../a", "rel/../abs/../rel/c", "/proc/self/fd/0",
          d + "/rel/c/nothing/..", ""]:
    same("realpath(%r)" % p, g["_realpath"](p), os.path.realpath(p))
    if p:
        same("abspath(%r)" % p, g["_abspath"](p), os.path.normpath(os.path.abspath(p)).replace("//", "/", 1) if p.startswith("//") else os.path.abspath(p))

for s in ["", "plain", 'q"uote\\back', "\x00\x01\x1f\x7f", "\n\r\t\b\f", "caf\xe9 \u20ac",
          "\U0001f600 emoji", "\udcff lone surrogate", "\u2028\u2029"]:
    same("_esc(%r)" % s, g["_esc"](s), json.encoder.encode_basestring_ascii(s))

for doc in ['{"mode":"run","allow":null,"deny_builtins":["eval"],"strict_attrs":false,"report_fd":3,"filename":"<program>"}',
            '{"a":[1,-2,3.5,true,false,null,{"b":"\\u00e9\\n\\"x\\""}],"c":{}}',
            '[]', '"s"', '-7']:
    tree = compile(doc, "<config>", "eval", ast.PyCF_ONLY_AST).body
    same("_json_value(%s)" % doc, g["_json_value"](tree), json.loads(doc))
for doc in ['{1: 2}', 'x', '[1, y]', 'f"x"', 'b"x"', 'True', '1+2', '{"a": None}']:
    tree = compile(doc, "<config>", "eval", ast.PyCF_ONLY_AST).body
    try:
        g["_json_value"](tree)
        bad.append("_json_value(%s) accepted" % doc)
    except ValueError:
        pass

src = open(ast.__file__).read()
tree = ast.parse(src)
same("_walk(ast.py)", [type(n).__name__ + str(getattr(n, "lineno", "")) for n in g["_walk"](tree)],
     [type(n).__name__ + str(getattr(n, "lineno", "")) for n in ast.walk(tree)])

for b in [b"x = 1\n", b"\xef\xbb\xbfx = '\xc3\xa9'\n", b"# -*- coding: latin-1 -*-\nx = '\xe9'\n",
          b"\n# vim: set fileencoding=cp1252 :\nx = '\x80'\n", b"x = 1\n# coding: latin-1\ny = '\xc3\xa9'\n",
          b"# coding: nonsense\nx = 1\n"]:
    import io, tokenize
    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(b).readline)
        want = b.decode(enc)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        want = b.decode("utf-8", "replace")
    same("_decode(%r)" % b, g["_decode"](b), want)

print("\n".join(bad) or "ok")
`

// TestRunnerInternals checks the runner's own versions of os.path,
// json, ast.walk and tokenize's encoding detection against the stdlib.
func TestRunnerInternals(t *testing.T) {
	requirePython(t)
	cmd := exec.Command(python, "-I", "-c", internalsCheck)
	cmd.Stdin = strings.NewReader(Source)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Errorf("%v\n%s", err, out)
	}
}
