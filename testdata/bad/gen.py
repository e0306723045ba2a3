#!/usr/bin/env python3
"""Generates testdata/bad/: malformed and hostile session files and request bodies of
our own making, one fault each. cmd/pruneadvisor/reliability_test.go
(TestBadInputs) runs every file through inspect, advise, replay, POST /v1/advise and
the proxy, and holds the exit code or HTTP status and the message each must give;
docs/RELIABILITY.md lists them. Large or file-system cases (a 50 MB output, 100,000
steps, 10,000 sessions, a symlink loop, a file deleted during a replay) are made by
the test at run time instead. Deterministic: run it again and the bytes are the same.

    python3 testdata/bad/gen.py    # from the repository root
"""
import json, os, random

HERE = os.path.dirname(os.path.abspath(__file__))
files = {}


def put(name, data):
    if isinstance(data, str):
        data = data.encode()
    files[name] = data


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))


# ---- Claude Code (TRANSCRIPT-FORMATS.md section 1) ----

LISTING = "\n".join("src/pkg%02d/file%02d.go  %5d bytes  rw-r--r--" % (i // 7, i, 1000 + 37 * i) for i in range(60))


class Claude:
    """Builds one Claude Code session line by line (uuid chain, one block per line)."""

    def __init__(self, sid="bad-session-0001"):
        self.sid, self.n, self.parent, self.lines, self.msg = sid, 0, None, [], 0

    def raw(self, obj, parent=None, link=True):
        self.n += 1
        u = "u%04d" % self.n
        base = {"parentUuid": self.parent if parent is None else parent, "isSidechain": False,
                "cwd": "/home/dev/app", "sessionId": self.sid, "version": "2.0.14"}
        base.update(obj)
        base["uuid"] = u
        base["timestamp"] = "2026-11-02T10:00:%02d.000Z" % (self.n % 60)
        self.lines.append(dumps(base))
        if link:
            self.parent = u
        return u

    def user(self, text):
        return self.raw({"type": "user", "message": {"role": "user", "content": text}})

    def say(self, text):
        self.msg += 1
        return self.raw({"type": "assistant", "message": {"id": "msg_%04d" % self.msg, "role": "assistant",
                                                         "content": [{"type": "text", "text": text}]}})

    def call(self, cid, name, inp):
        self.msg += 1
        return self.raw({"type": "assistant", "message": {"id": "msg_%04d" % self.msg, "role": "assistant",
                                                         "content": [{"type": "tool_use", "id": cid, "name": name, "input": inp}]}})

    def result(self, cid, content):
        return self.raw({"type": "user", "message": {"role": "user", "content": [
            {"tool_use_id": cid, "type": "tool_result", "content": content}]}})

    def text(self):
        return "\n".join(self.lines) + "\n"


def claude_base(sid="bad-session-0001", listing=LISTING):
    """A healthy 7-step session: the same `ls -l` twice (a duplicate), then small work."""
    c = Claude(sid)
    c.user("List the sources twice and then summarise them.")
    c.call("toolu_ls1", "Bash", {"command": "ls -l src", "description": "list"})
    c.result("toolu_ls1", listing)
    c.call("toolu_ls2", "Bash", {"command": "ls -l src", "description": "list"})
    c.result("toolu_ls2", listing)
    for i in range(3, 7):
        c.call("toolu_e%d" % i, "Bash", {"command": "echo %d" % i})
        c.result("toolu_e%d" % i, str(i))
    c.say("Done: sixty files under src.")
    return c


put("claude-healthy.jsonl", claude_base().text())

# The last line cut mid-object (an agent killed while writing).
t = claude_base().text().rstrip("\n")
put("claude-truncated-last-line.jsonl", t[: len(t) - 40])

# The last line cut in the middle of a 3-byte UTF-8 character.
c = claude_base()
c.say("Résumé: le répertoire contient soixante fichiers — fin €")
b = c.text().rstrip("\n").encode()
cut = b.rindex("€".encode()) + 1  # keep only the euro sign's first byte
put("claude-cut-mid-utf8.jsonl", b[:cut])

# A torn line: a process killed while it wrote a pr-link record, and the next
# writer's record (the second `ls -l` call) appended to the same line.
lines = claude_base().text().rstrip("\n").split("\n")
i = next(k for k, l in enumerate(lines) if '"toolu_ls2"' in l and '"tool_use"' in l)
pr = dumps({"type": "pr-link", "sessionId": "bad-session-0001", "prNumber": 12, "prUrl": "https://example.com/pr/12"})
lines[i] = pr[: pr.index("prNumber") + 4] + lines[i]
put("claude-torn-line.jsonl", "\n".join(lines) + "\n")

# Invalid UTF-8 inside a tool output's JSON string (raw bytes 0xff 0xfe, a lone 0xc3).
listing_bad = LISTING.replace("file07.go", "file@FF@07.go").replace("file09.go", "file@C3@09.go")
put("claude-invalid-utf8-output.jsonl", claude_base(listing=listing_bad).text().encode()
    .replace(b"@FF@", b"\xff\xfe").replace(b"@C3@", b"\xc3("))

# A raw NUL byte inside a JSON string (JSON forbids unescaped control characters) ...
put("claude-raw-nul.jsonl", claude_base().text().replace('"echo 3"', '"echo \x003"', 1))
# ... and escaped NULs (\u0000) in a tool output, which JSON allows.
put("claude-escaped-nul.jsonl", claude_base(listing=LISTING.replace("rw-r--r--", "rw\u0000r\u0000")).text())

# Terminal escape sequences and other control characters in every field a human table
# shows: the session id, a command (set-title, clear-screen, hidden text), a file path
# (NUL, a right-to-left override), a tool name (BEL) and a call id (clear-screen).
ESC_CMD = "printf '\x1b]0;pwned\x07\x1b[2J\x1b[8mhidden\x1b[0m'"
c = Claude("bad-\x1b]0;title\x07-session")
c.user("Show the banner twice, then fix the odd file.")
c.call("toolu_esc1", "Bash", {"command": ESC_CMD})
c.result("toolu_esc1", LISTING)
c.call("toolu_esc2", "Bash", {"command": ESC_CMD})
c.result("toolu_esc2", LISTING)
c.call("toolu_rd1", "Read", {"file_path": "/w/src/\x00evil\u202egnp.go"})
c.result("toolu_rd1", LISTING)
c.call("toolu_ed1", "Edit", {"file_path": "/w/src/\x00evil\u202egnp.go", "old_string": "file01.go", "new_string": "file1.go"})
c.result("toolu_ed1", "The file has been updated.")
c.call("toolu_rd2", "Read", {"file_path": "/w/src/\x00evil\u202egnp.go"})
c.result("toolu_rd2", LISTING.replace("file01.go", "file1.go"))
c.call("toolu_bell", "mcp__notes\x07ring", {"q": "x"})
c.result("toolu_bell", "noted")
c.call("toolu_\x1b[2Jclr", "Bash", {"command": "sleep 1"})
c.say("Done.")
put("claude-terminal-escapes.jsonl", c.text())

# The healthy session in other encodings and line ends: UTF-16 (little-endian with a
# byte-order mark, as Windows tools write it; big-endian without one) and UTF-32
# (little-endian with a mark); old Mac line ends (CR only); and the first line split
# in two by a CRLF at a blank (an editor wrapping a long line).
healthy = claude_base().text()
put("claude-utf16le-bom.jsonl", healthy.encode("utf-16"))
put("claude-utf16be.jsonl", healthy.encode("utf-16-be"))
put("claude-utf32le-bom.jsonl", healthy.encode("utf-32"))
put("claude-cr-only.jsonl", healthy.replace("\n", "\r"))
first, rest = healthy.split("\n", 1)
mid = first.index(" ", first.index(",") + 1)  # after the first key: {"parentUuid": null,
put("claude-first-line-split.jsonl", first[:mid] + "\r\n" + first[mid + 1:] + "\r\n" + rest.replace("\n", "\r\n"))

# A JSON array where the line's object belongs.
c = claude_base()
lines = c.text().split("\n")
lines[1] = "[" + lines[1] + "]"
put("claude-array-line.jsonl", "\n".join(lines))

# message.content an object where a string or an array of blocks belongs.
c = Claude()
c.user("hello")
c.raw({"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": {"type": "text", "text": "hi"}}})
put("claude-content-object.jsonl", c.text())

# A tool result whose call never happened.
c = claude_base()
c.result("toolu_nowhere", "orphaned output")
c.say("ok")
put("claude-result-without-call.jsonl", c.text())

# Two calls sharing one id, each with its result.
c = Claude()
c.user("Run it twice.")
c.call("toolu_same", "Bash", {"command": "date"})
c.result("toolu_same", "Mon Nov  2 10:00:00 UTC 2026")
c.call("toolu_same", "Bash", {"command": "uptime"})
c.result("toolu_same", " 10:00:01 up 3 days")
c.say("done")
put("claude-duplicate-call-id.jsonl", c.text())

# A result written before its call.
c = Claude()
c.user("Check the date.")
c.result("toolu_late", "Mon Nov  2 10:00:00 UTC 2026")
c.call("toolu_late", "Bash", {"command": "date"})
c.say("done")
put("claude-result-before-call.jsonl", c.text())

# A parentUuid cycle: u0002 -> u0004 -> u0003 -> u0002.
c = Claude()
c.user("Cycle.")
c.raw({"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": "a"}]}}, parent="u0004")
c.raw({"type": "user", "message": {"role": "user", "content": "b"}}, parent="u0002")
c.raw({"type": "assistant", "message": {"id": "m2", "role": "assistant", "content": [{"type": "text", "text": "c"}]}}, parent="u0003")
put("claude-parent-cycle.jsonl", c.text())

# Empty and blank files.
put("empty.jsonl", b"")
put("blank.jsonl", "\n  \n\t\r\n\n")

# Numbers as strings (the structured Read result), and ids as numbers.
c = Claude()
c.user("Read main.go.")
c.call("toolu_r1", "Read", {"file_path": "/home/dev/app/main.go", "offset": "10", "limit": "5"})
c.raw({"type": "user", "message": {"role": "user", "content": [{"tool_use_id": "toolu_r1", "type": "tool_result", "content": "10\tpackage main"}]},
       "toolUseResult": {"type": "text", "file": {"filePath": "/home/dev/app/main.go", "numLines": "5", "startLine": "10", "totalLines": "99"}}})
c.say("done")
put("claude-numbers-as-strings.jsonl", c.text())

c = Claude()
c.user("Ids as numbers.")
c.raw({"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": 42, "name": "Bash", "input": {"command": "date"}}]}})
c.raw({"type": "user", "message": {"role": "user", "content": [{"tool_use_id": 42, "type": "tool_result", "content": "x"}]}})
put("claude-ids-as-numbers.jsonl", c.text())

# A user line without content, and one with content null.
c = Claude()
c.user("hello")
c.raw({"type": "assistant", "message": {"id": "m1", "role": "assistant"}})
put("claude-missing-content.jsonl", c.text())
c = Claude()
c.user("hello")
c.raw({"type": "assistant", "message": {"id": "m1", "role": "assistant", "content": None}})
put("claude-content-null.jsonl", c.text())

# Block types no reader knows, in a message and inside a tool result.
c = claude_base()
c.raw({"type": "assistant", "message": {"id": "m99", "role": "assistant", "content": [
    {"type": "hologram", "frames": [1, 2, 3]}, {"type": "text", "text": "see above"}]}})
c.raw({"type": "user", "message": {"role": "user", "content": [
    {"tool_use_id": "toolu_e6", "type": "tool_result", "content": [{"type": "smell", "odour": "burnt"}, {"type": "text", "text": "6 again"}]}]}})
put("claude-unknown-blocks.jsonl", c.text())

# A tool input nested 10,000 levels deep, and a bare document nested 10,000 levels.
deep = '{"a":' * 10000 + "1" + "}" * 10000
c = Claude()
c.user("Deep.")
c.lines.append('{"parentUuid": "u0001", "type": "assistant", "sessionId": "bad-session-0001", "uuid": "u0002", '
               '"message": {"id": "m1", "role": "assistant", "content": [{"type": "tool_use", "id": "toolu_deep", '
               '"name": "Bash", "input": ' + deep + '}]}}')
c.n = 2
c.parent = "u0002"
c.result("toolu_deep", "deep")
put("claude-deep-input.jsonl", c.text())
put("deep-array.json", "[" * 10000 + "]" * 10000)

# A line that is a JSON string, and one that is a number.
c = claude_base()
lines = c.text().split("\n")
lines.insert(3, '"hello"')
lines.insert(5, "42")
put("claude-scalar-lines.jsonl", "\n".join(lines))

# A tool input that is a string instead of an object.
c = Claude()
c.user("Run ls.")
c.call("toolu_s", "Bash", "ls -l")
c.result("toolu_s", "total 0")
c.say("empty")
put("claude-input-string.jsonl", c.text())

# Byte-order mark and CRLF line ends: readable.
put("claude-bom-crlf.jsonl", "\ufeff" + claude_base().text().replace("\n", "\r\n"))

# Garbage and prose.
rnd = random.Random(6)
put("binary-garbage.bin", bytes(rnd.randrange(256) for _ in range(4096)))
put("prose.txt", "Dear reader,\nthis file is a letter, not a session.\n")

# ---- OpenAI chat-completions messages (section 8) ----

put("openai-healthy.json", dumps([
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "List the sources."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls -l src\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": LISTING},
    {"role": "assistant", "content": "Sixty files."},
]))
put("openai-messages-object.json", dumps({"messages": {"role": "user", "content": "hi"}}))
put("openai-args-not-json.json", dumps([
    {"role": "user", "content": "x"},
    {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{not json"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "y"}]))
put("openai-tool-without-id.json", dumps([
    {"role": "user", "content": "x"},
    {"role": "assistant", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
    {"role": "tool", "content": "y"}]))
put("openai-content-number.json", dumps([{"role": "user", "content": "x"}, {"role": "assistant", "content": 42}]))
put("openai-trailing-garbage.json", dumps([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]) + "}garbage")
put("openai-duplicate-keys.json", '[{"role": "user", "role": "assistant", "content": "x"}, {"role": "assistant", "content": "y", "content": "z"}]')
put("openai-lone-surrogate.json", '[{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", '
    '"function": {"name": "bash", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "half \\ud800 a pair"}]')
put("openai-nested-array.json", dumps([[{"role": "user", "content": "x"}]]))
put("openai-role-unknown.json", dumps([{"role": "user", "content": "x"}, {"role": "wizard", "content": "y"}]))

# ---- Anthropic Messages request bodies (section 1's API shape) ----

def anth(msgs):
    return dumps({"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": msgs})

put("anthropic-healthy.json", anth([
    {"role": "user", "content": "List the sources."},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls -l src"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": LISTING}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Sixty files."}]}]))
put("anthropic-result-content-number.json", anth([
    {"role": "user", "content": "x"},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": 12345}]}]))
put("anthropic-messages-null.json", dumps({"model": "claude-sonnet-4-5", "max_tokens": 1, "messages": None}))
put("anthropic-unknown-blocks.json", anth([
    {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "hologram", "frames": 3}]},
    {"role": "assistant", "content": [{"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"q": "x"}},
                                      {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "text", "text": "a.txt"}, {"type": "smell", "odour": "burnt"}]}]}]))
t = anth([{"role": "user", "content": "List the sources."},
          {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls -l src"}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": LISTING}]}])
put("anthropic-truncated.json", t[: len(t) // 2])
put("anthropic-result-without-call.json", anth([
    {"role": "user", "content": "x"},
    {"role": "assistant", "content": [{"type": "text", "text": "y"}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nowhere", "content": "z"}]}]))

# ---- Codex, Gemini, pi, OpenHands, SWE-agent (sections 2-7) ----

codex = [
    {"timestamp": "2026-11-02T10:00:00.000Z", "type": "session_meta", "payload": {"id": "0199aaaa-0000-7000-8000-000000000001", "cwd": "/w", "originator": "codex_cli_rs", "cli_version": "0.50.0"}},
    {"timestamp": "2026-11-02T10:00:01.000Z", "type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]}},
    {"timestamp": "2026-11-02T10:00:02.000Z", "type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_1"}},
    {"timestamp": "2026-11-02T10:00:03.000Z", "type": "response_item", "payload": {"type": "function_call_output", "call_id": "call_1", "output": "{\"output\":\"a\\nb\\n\",\"metadata\":{\"exit_code\":0}}"}},
]
t = "\n".join(dumps(x) for x in codex)
put("codex-truncated.jsonl", t[: len(t) - 30])
codex_bad = [dict(x) for x in codex]
codex_bad[2] = {"timestamp": "2026-11-02T10:00:02.000Z", "type": "response_item", "payload": {"type": "function_call", "name": "shell", "arguments": {"command": ["ls"]}, "call_id": 7}}
put("codex-wrong-types.jsonl", "\n".join(dumps(x) for x in codex_bad) + "\n")

put("gemini-messages-null.json", dumps({"sessionId": "g1", "projectHash": "abc", "startTime": "2026-11-02T10:00:00Z", "messages": None}))
put("gemini-toolcalls-string.json", dumps({"sessionId": "g1", "projectHash": "abc", "startTime": "2026-11-02T10:00:00Z", "messages": [
    {"id": "1", "type": "user", "content": "x"}, {"id": "2", "type": "gemini", "content": "y", "toolCalls": "read_file"}]}))

put("pi-header-only.jsonl", dumps({"type": "session", "id": "p1", "timestamp": "2026-11-02T10:00:00.000Z", "cwd": "/w"}) + "\n")
put("pi-bad-message.jsonl", "\n".join([
    dumps({"type": "session", "id": "p1", "timestamp": "2026-11-02T10:00:00.000Z", "cwd": "/w"}),
    dumps({"type": "message", "timestamp": "2026-11-02T10:00:01.000Z", "message": {"role": "user", "content": "x"}}),
    dumps({"type": "message", "timestamp": "2026-11-02T10:00:02.000Z", "message": "not an object"}),
    dumps({"type": "message", "timestamp": "2026-11-02T10:00:03.000Z", "message": {"role": "toolResult", "toolCallId": "nowhere", "content": [{"type": "text", "text": "z"}]}}),
]) + "\n")

put("openhands-wrong-types.json", dumps([
    {"id": 0, "source": "user", "action": "message", "args": {"content": "list files"}},
    {"id": "1", "source": "agent", "action": "run", "args": {"command": 5}},
    {"id": 2, "source": "environment", "observation": "run", "cause": "1", "content": ["a", "b"], "extras": None}]))

put("swe-agent-history-object.traj", dumps({"trajectory": [], "history": {"role": "user", "content": "x"}, "info": {}}))

# ---- write ----

os.makedirs(HERE, exist_ok=True)
for name in sorted(files):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(files[name])
print("wrote %d files" % len(files))
