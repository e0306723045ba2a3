#!/usr/bin/env python3
"""Generates testdata/sessions/fix-port.jsonl: a small Claude Code session of our own
making (format as in ../shared/docs/TRANSCRIPT-FORMATS.md section 1). The agent fixes a
server that ignores $PORT: it reads files, edits config.go, re-reads it (so the first
read is superseded), runs tests twice with identical output (a duplicate), and greps.
The second test run takes six minutes, long enough for the prompt cache to expire.
Deterministic: run it again and the bytes are the same."""
import json, os

CWD = "/home/dev/shopapi"
SID = "0b5e7c1e-2f4a-4c1b-9a57-5d1f0c3a9e10"
out = []
n = [0]

def uid():
    n[0] += 1
    return "00000000-0000-4000-8000-%012d" % n[0]

parent = [None]
clock = [0]

def ts():
    clock[0] += 7
    return "2026-11-02T10:%02d:%02d.000Z" % (clock[0] // 60 % 60, clock[0] % 60)

def line(obj):
    u = uid()
    base = {"parentUuid": parent[0], "isSidechain": False, "userType": "external", "cwd": CWD,
            "sessionId": SID, "version": "2.0.14", "gitBranch": "main"}
    base.update(obj)
    base["uuid"] = u
    base["timestamp"] = ts()
    out.append(json.dumps(base, ensure_ascii=False))
    parent[0] = u

def user(text):
    line({"type": "user", "message": {"role": "user", "content": text}})

msgn = [0]
def assistant(text=None, calls=()):
    msgn[0] += 1
    mid = "msg_01FixPort%04d" % msgn[0]
    blocks = []
    if text:
        blocks.append({"type": "text", "text": text})
    for c in calls:
        blocks.append({"type": "tool_use", "id": c[0], "name": c[1], "input": c[2]})
    # Claude Code writes each content block on its own line sharing message.id
    for b in blocks:
        line({"type": "assistant", "requestId": "req_%04d" % msgn[0],
              "message": {"id": mid, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                          "content": [b], "stop_reason": "tool_use" if calls else "end_turn",
                          "usage": {"input_tokens": 100, "output_tokens": 50}}})

def result(cid, text, structured=None, is_error=False):
    r = {"tool_use_id": cid, "type": "tool_result", "content": text}
    if is_error:
        r["is_error"] = True
    obj = {"type": "user", "message": {"role": "user", "content": [r]}}
    if structured is not None:
        obj["toolUseResult"] = structured
    line(obj)

def catn(content, start=1):
    return "\n".join("%6d\u2192%s" % (i + start, l) for i, l in enumerate(content.split("\n")))

def gofile(pkg, name, funcs):
    body = ["package %s" % pkg, "", "import (", '\t"fmt"', '\t"os"', '\t"strconv"', ")", ""]
    for f in range(funcs):
        body += ["// %s%d handles the %s step %d of the request pipeline." % (name, f, name, f),
                 "func %s%d(w Writer, r *Request) error {" % (name, f),
                 "\tif r == nil {", '\t\treturn fmt.Errorf("%s%d: nil request")' % (name, f), "\t}",
                 '\tv := os.Getenv("SHOP_%s_%d")' % (name.upper(), f),
                 "\tn, err := strconv.Atoi(v)", "\tif err != nil {", "\t\tn = %d" % (f * 10 + 3), "\t}",
                 '\tw.Header().Set("X-%s-%d", strconv.Itoa(n))' % (name, f), "\treturn nil", "}", ""]
    return "\n".join(body)

config_old = "\n".join([
    "package config", "", "import (", '\t"encoding/json"', '\t"os"', ")", "",
    "// Config is the server configuration read from config.json.",
    "type Config struct {", '\tPort     int    `json:"port"`', '\tDBURL    string `json:"db_url"`',
    '\tLogLevel string `json:"log_level"`', "}", "",
    "// Load reads path and returns the configuration.",
    "func Load(path string) (*Config, error) {", "\tdata, err := os.ReadFile(path)",
    "\tif err != nil {", "\t\treturn nil, err", "\t}", "\tc := &Config{Port: 8080, LogLevel: \"info\"}",
    "\tif err := json.Unmarshal(data, c); err != nil {", "\t\treturn nil, err", "\t}", "\treturn c, nil", "}",
] + [""] + ["var defaultsNote%d = \"the port defaults to 8080 unless config.json sets it; this note is long on purpose %d\"" % (i, i) for i in range(40)])
config_new = config_old.replace("\treturn c, nil\n}", "\tif p := os.Getenv(\"PORT\"); p != \"\" {\n\t\tif n, err := strconv.Atoi(p); err == nil {\n\t\t\tc.Port = n\n\t\t}\n\t}\n\treturn c, nil\n}", 1).replace('\t"os"\n)', '\t"os"\n\t"strconv"\n)', 1)

handlers = gofile("server", "handler", 9)
router = gofile("server", "route", 7)
readme = "\n".join(["# shopapi", "", "A small shop API used in the pruneadvisor tests."] +
                   ["- endpoint /v1/items/%d returns item %d with its price and stock level" % (i, i) for i in range(60)])
test_out = "\n".join(["=== RUN   TestHandler%d\n--- PASS: TestHandler%d (0.00s)" % (i, i) for i in range(45)] +
                     ["=== RUN   TestLoadPortFromEnv", "    config_test.go:31: port = 8080, want 9090",
                      "--- FAIL: TestLoadPortFromEnv (0.00s)", "FAIL", "FAIL\tgithub.com/dev/shopapi/config\t0.012s", "FAIL"])
test_pass = "\n".join(["=== RUN   TestHandler%d\n--- PASS: TestHandler%d (0.00s)" % (i, i) for i in range(45)] +
                      ["=== RUN   TestLoadPortFromEnv", "--- PASS: TestLoadPortFromEnv (0.00s)", "PASS",
                       "ok  \tgithub.com/dev/shopapi/config\t0.011s"])
grep_out = "\n".join(["server/handler.go:%d:\tv := os.Getenv(\"SHOP_HANDLER_%d\")" % (14 + 13 * i, i) for i in range(9)] +
                     ["server/route.go:%d:\tv := os.Getenv(\"SHOP_ROUTE_%d\")" % (14 + 13 * i, i) for i in range(7)] +
                     ["config/config.go:99:\t// PORT is read by the deploy scripts, not by the server (bug #42)"] +
                     ["deploy/run.sh:%d:export SHOP_VAR_%d=%d" % (i, i, i * 7) for i in range(30)])

def read(cid, rel, content, text_override=None):
    path = os.path.join(CWD, rel)
    lines = content.split("\n")
    return (cid, "Read", {"file_path": path}), (cid, text_override or catn(content),
            {"type": "text", "file": {"filePath": path, "content": content, "numLines": len(lines), "startLine": 1, "totalLines": len(lines)}})

user("The server ignores the PORT environment variable. Make config.Load honour $PORT, keep config.json as the fallback, and add a test.")
assistant("I'll start by looking at the project layout and the config loader.",
          [("toolu_01Ls", "Bash", {"command": "ls -R", "description": "List files"})])
result("toolu_01Ls", ".:\nREADME.md\nconfig\ndeploy\ngo.mod\nmain.go\nserver\n\n./config:\nconfig.go\nconfig_test.go\n\n./deploy:\nrun.sh\n\n./server:\nhandler.go\nroute.go",
       {"stdout": "...", "stderr": "", "interrupted": False, "isImage": False})
c1, r1 = read("toolu_02Readme", "README.md", readme)
c2, r2 = read("toolu_03Cfg", "config/config.go", config_old)
assistant("Reading the README and the config loader in parallel.", [c1, c2])
result(*r1); result(*r2)
c3, r3 = read("toolu_04Hdl", "server/handler.go", handlers)
assistant("Config.Load never looks at the environment. Let me check how handlers read env vars.", [c3])
result(*r3)
assistant(None, [("toolu_05Grep", "Grep", {"pattern": "Getenv|PORT", "path": CWD, "output_mode": "content", "-n": True})])
result("toolu_05Grep", grep_out)
changelog = "\n".join(["# Changelog", ""] + ["## v0.%d.0 (2025-%02d-14)\n- Improved catalogue pagination for warehouse %d\n- Fixed currency rounding in invoice export batch %d\n- Bumped golang.org/x/text to v0.%d.0" % (i, i % 12 + 1, i * 3, i * 11, i + 10) for i in range(40, 0, -1)])
assistant("Let me check the changelog for any earlier mention of this.",
          [("toolu_05bLog", "Bash", {"command": "cat CHANGELOG.md", "description": "Show changelog"})])
result("toolu_05bLog", changelog, {"stdout": changelog, "stderr": "", "interrupted": False, "isImage": False})
goenv = "\n".join("%s='%s'" % (k, v) for k, v in [("AR", "ar"), ("CC", "gcc"), ("CGO_CFLAGS", "-O2 -g"), ("CGO_ENABLED", "1"), ("CXX", "g++"), ("GCCGO", "gccgo"), ("GOAMD64", "v1"), ("GOARCH", "amd64"), ("GOCACHE", "/home/dev/.cache/go-build"), ("GOMODCACHE", "/home/dev/go/pkg/mod"), ("GOOS", "linux"), ("GOPATH", "/home/dev/go"), ("GOPROXY", "https://proxy.golang.org,direct"), ("GOROOT", "/usr/local/go"), ("GOSUMDB", "sum.golang.org"), ("GOTOOLCHAIN", "auto"), ("GOVERSION", "go1.26.8")] + [("GOEXPERIMENT_%d" % i, "x%07d" % (i * 7919)) for i in range(260)])
assistant("Nothing there. Checking the toolchain in case the build uses an old Go.",
          [("toolu_05cEnv", "Bash", {"command": "go env", "description": "Go environment"})])
result("toolu_05cEnv", goenv, {"stdout": goenv, "stderr": "", "interrupted": False, "isImage": False})
c4, r4 = read("toolu_06Route", "server/route.go", router)
assistant("The routes use the same Getenv pattern. Checking route.go before I change anything.", [c4])
result(*r4)
assistant("Running the tests to see the current failure.",
          [("toolu_07Test", "Bash", {"command": "go test ./...", "description": "Run tests"})])
result("toolu_07Test", test_out, {"stdout": test_out, "stderr": "", "interrupted": False, "isImage": False}, is_error=True)
assistant("TestLoadPortFromEnv fails as expected. An edit with the wrong anchor first:",
          [("toolu_08EditBad", "Edit", {"file_path": CWD + "/config/config.go", "old_string": "return cfg, nil", "new_string": "return cfg, nil // port"})])
result("toolu_08EditBad", "<tool_use_error>String to replace not found in file.\nString: return cfg, nil</tool_use_error>",
       "Error: String to replace not found in file.\nString: return cfg, nil", is_error=True)
assistant("Wrong variable name; the function returns c. Adding the $PORT override now.",
          [("toolu_09Edit", "Edit", {"file_path": CWD + "/config/config.go", "old_string": "\treturn c, nil\n}",
                                      "new_string": "\tif p := os.Getenv(\"PORT\"); p != \"\" {\n\t\tif n, err := strconv.Atoi(p); err == nil {\n\t\t\tc.Port = n\n\t\t}\n\t}\n\treturn c, nil\n}"})])
result("toolu_09Edit", "The file %s/config/config.go has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n    24\t\tif p := os.Getenv(\"PORT\"); p != \"\" {" % CWD,
       {"filePath": CWD + "/config/config.go", "oldString": "\treturn c, nil\n}", "newString": "...", "originalFile": config_old,
        "structuredPatch": [{"oldStart": 24, "oldLines": 2, "newStart": 24, "newLines": 7, "lines": ["+\tif p := os.Getenv(\"PORT\")"]}],
        "userModified": False, "replaceAll": False})
assistant("Adding the strconv import.",
          [("toolu_10Edit", "Edit", {"file_path": CWD + "/config/config.go", "old_string": "\t\"os\"\n)", "new_string": "\t\"os\"\n\t\"strconv\"\n)"})])
result("toolu_10Edit", "The file %s/config/config.go has been updated." % CWD,
       {"filePath": CWD + "/config/config.go", "oldString": "\t\"os\"\n)", "newString": "\t\"os\"\n\t\"strconv\"\n)", "originalFile": config_old,
        "structuredPatch": [], "userModified": False, "replaceAll": False})
c5, r5 = read("toolu_11Cfg2", "config/config.go", config_new)
assistant("Re-reading config.go to check both edits landed.", [c5])
result(*r5)
assistant("Both edits are in. Running the tests again.",
          [("toolu_12Test", "Bash", {"command": "go test ./...", "description": "Run tests"})])
result("toolu_12Test", test_pass, {"stdout": test_pass, "stderr": "", "interrupted": False, "isImage": False})
assistant("All green. Running them once more with the race detector off to be sure the result is stable.",
          [("toolu_13Test", "Bash", {"command": "go test ./...", "description": "Run tests"})])
# The second clean run takes six minutes (the developer steps away meanwhile): the
# next model call finds the prompt cache expired (5-minute TTL), so the pending
# prunes go in a free rewrite there (DESIGN.md step 6a).
clock[0] += 360
result("toolu_13Test", test_pass, {"stdout": test_pass, "stderr": "", "interrupted": False, "isImage": False})
assistant(None, [("toolu_14Deploy", "Bash", {"command": "cat deploy/run.sh", "description": "Show deploy script"})])
deploy = "#!/bin/sh\n" + "\n".join("export SHOP_VAR_%d=%d" % (i, i * 7) for i in range(30)) + "\nexec ./shopapi -config config.json\n"
result("toolu_14Deploy", deploy, {"stdout": deploy, "stderr": "", "interrupted": False, "isImage": False})
assistant("The deploy script does not set PORT, so the default stays 8080 there. Updating the README to document $PORT.",
          [("toolu_15Edit", "Edit", {"file_path": CWD + "/README.md", "old_string": "A small shop API used in the pruneadvisor tests.",
                                      "new_string": "A small shop API used in the pruneadvisor tests. Set $PORT to override the port in config.json."})])
result("toolu_15Edit", "The file %s/README.md has been updated." % CWD,
       {"filePath": CWD + "/README.md", "oldString": "x", "newString": "y", "originalFile": readme, "structuredPatch": [], "userModified": False, "replaceAll": False})
assistant(None, [("toolu_16Vet", "Bash", {"command": "go vet ./...", "description": "Vet"})])
result("toolu_16Vet", "", {"stdout": "", "stderr": "", "interrupted": False, "isImage": False})
assistant(None, [("toolu_17Diff", "Bash", {"command": "git diff --stat", "description": "Diff stat"})])
result("toolu_17Diff", " README.md        | 2 +-\n config/config.go | 8 +++++++-\n 2 files changed, 8 insertions(+), 2 deletions(-)",
       {"stdout": "...", "stderr": "", "interrupted": False, "isImage": False})
assistant("Done: config.Load now honours $PORT (falling back to config.json and then 8080), the test passes, and the README documents it.")

here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "fix-port.jsonl"), "w") as f:
    f.write("\n".join(out) + "\n")
