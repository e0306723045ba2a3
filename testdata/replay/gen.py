#!/usr/bin/env python3
"""Writes port.json, a small OpenAI chat-completions session for the replay tests.

Ten steps (assistant messages). Four tool outputs are large enough to be candidates
(>= 200 tokens): O1 read config/server.yaml (step 1), O2 ls -la /srv/app (step 2),
O3 read NOTES.md (step 3), O4 tail of the app log (step 4); O5 (step 5) reads NOTES.md
again and returns the same bytes as O3, so O3 is a duplicate. Every other output is
small. The agent writes `listen_port`, a name only O1 holds, at step 6.

Run: python3 testdata/replay/gen.py (from the repository root).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def lines(prefix, n, fmt):
    return "\n".join(fmt.format(prefix=prefix, i=i) for i in range(1, n + 1)) + "\n"


config = (
    "# server configuration\n"
    "server:\n"
    "  listen_port: 8080\n"
    "  listen_host: 0.0.0.0\n"
    "  tls_cert_path: /etc/ssl/zebra-cert.pem\n"
    + lines("upstream", 40, "  {prefix}_pool_{i}: http://10.0.{i}.7:7{i:03d} # weight {i}")
)
listing = "total 4096\n" + lines(
    "quokka", 40, "-rw-r--r-- 1 app app {i}2048 Jan {i:2d} 10:00 {prefix}_backup_20{i:02d}.tar"
)
notes = "# Notes\n" + lines(
    "kestrel", 40, "- item {i}: the {prefix} job number {i} runs nightly at 0{i}:15 and mails ops"
)
logtail = lines(
    "heron", 40, "2025-01-{i:02d}T10:00:00Z INFO {prefix}-worker-{i} processed {i}00 requests in {i}ms"
)

msgs = [
    {"role": "system", "content": "You are a coding agent working in /srv/app."},
    {"role": "user", "content": "Change the server port from 8080 to 9090 and restart the service."},
]
n = 0


def step(text, cmd=None, out=None, tool="bash", args=None):
    """One assistant message (a step), with at most one call and its output."""
    global n
    n += 1
    m = {"role": "assistant", "content": text}
    if cmd is not None or args is not None:
        cid = "call_%d" % n
        a = args if args is not None else {"command": cmd}
        m["tool_calls"] = [{"id": cid, "type": "function",
                            "function": {"name": tool, "arguments": json.dumps(a)}}]
        msgs.append(m)
        msgs.append({"role": "tool", "tool_call_id": cid, "content": out})
    else:
        msgs.append(m)


step("Let me read the config.", out=config, tool="read_file", args={"path": "config/server.yaml"})
step("Now the folder.", cmd="ls -la /srv/app", out=listing)
step("And the notes.", out=notes, tool="read_file", args={"path": "NOTES.md"})
step("Recent log lines.", cmd="tail -n 40 /var/log/app.log", out=logtail)
step("Reading the notes again.", out=notes, tool="read_file", args={"path": "NOTES.md"})
step("I will change `listen_port` now.", cmd="sed -i 's/8080/9090/' config/server.yaml", out="")
step("Restarting.", cmd="systemctl restart app", out="ok")
step("Checking it came up.", cmd="systemctl is-active app", out="active")
step("Checking the port.", cmd="ss -ltn", out="LISTEN 0 128 0.0.0.0:9090")
step("The service now listens on 9090.")

with open(os.path.join(HERE, "port.json"), "w") as f:
    json.dump(msgs, f, indent=1)
    f.write("\n")
