/**
 * pruneadvisor for pi (https://github.com/badlogic/pi-mono): before every model call,
 * pi's `context` event hands this extension the messages it is about to send; the
 * extension posts them to the pruneadvisor sidecar (`pruneadvisor serve`,
 * POST /v1/advise) and swaps the text of each pruned tool result for its stub. It
 * also registers a `recall` tool that fetches an original back (GET /v1/recall/{id}),
 * so the stubs' `recall("o_...")` works. Start the sidecar with the default
 * `--recall-tool recall`.
 *
 * Install: copy to ~/.pi/agent/extensions/pruneadvisor.ts (or run `pi -e ./pruneadvisor-pi.ts`).
 * Settings: PRUNEADVISOR_URL (default http://127.0.0.1:8377), PRUNEADVISOR_TOKEN
 * (when serve runs with --token), PRUNEADVISOR_BUDGET (tokens; default: the server's).
 *
 * Fail open: if the sidecar is down, slow (2 s) or answers an error, pi's messages go
 * to the model unchanged.
 *
 * Status: written against the types of @mariozechner/pi-coding-agent 0.73.1 and
 * type-checked with tsc; not run inside pi (see docs/INTEGRATIONS.md).
 */
import { Type } from "@mariozechner/pi-ai";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

const BASE = process.env.PRUNEADVISOR_URL ?? "http://127.0.0.1:8377";
const TOKEN = process.env.PRUNEADVISOR_TOKEN;
const BUDGET = Number(process.env.PRUNEADVISOR_BUDGET ?? 0);
const TIMEOUT_MS = 2000;

function headers(): Record<string, string> {
	const h: Record<string, string> = { "Content-Type": "application/json" };
	if (TOKEN) h["X-Pruneadvisor-Token"] = TOKEN;
	return h;
}

type Block = { type: string; text?: string; id?: string; name?: string; arguments?: unknown };
type PiMessage = { role: string; content?: unknown; toolCallId?: string; toolName?: string };

/** Text of a pi content value (string or blocks), text blocks joined by newlines. */
function textOf(content: unknown): string {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return "";
	return (content as Block[])
		.filter((b) => b.type === "text" && typeof b.text === "string")
		.map((b) => b.text)
		.join("\n");
}

/**
 * pi's messages as OpenAI Chat Completions messages, the shape /v1/advise reads:
 * tool calls keep pi's ids, so the plan's keys name pi's toolResult messages.
 * Custom (extension) messages are left out: the advisor only prunes tool results.
 */
function toOpenAI(messages: PiMessage[]): unknown[] {
	const out: unknown[] = [];
	for (const m of messages) {
		switch (m.role) {
			case "user":
				out.push({ role: "user", content: textOf(m.content) });
				break;
			case "assistant": {
				const blocks = Array.isArray(m.content) ? (m.content as Block[]) : [];
				const calls = blocks
					.filter((b) => b.type === "toolCall")
					.map((b) => ({
						id: b.id,
						type: "function",
						function: { name: b.name, arguments: JSON.stringify(b.arguments ?? {}) },
					}));
				const msg: Record<string, unknown> = { role: "assistant", content: textOf(blocks) };
				if (calls.length > 0) msg.tool_calls = calls;
				out.push(msg);
				break;
			}
			case "toolResult":
				out.push({ role: "tool", tool_call_id: m.toolCallId, content: textOf(m.content) });
				break;
		}
	}
	return out;
}

interface PlanItem {
	key: string; // tool call id, "#2", "#3" appended when an id repeats
	decision: string;
	stub?: string;
}

export default function (pi: ExtensionAPI) {
	pi.on("context", async (event, ctx) => {
		const messages = event.messages as unknown as PiMessage[];
		const body: Record<string, unknown> = {
			session_id: "pi-" + ctx.sessionManager.getSessionId(),
			format: "openai",
			messages: toOpenAI(messages),
		};
		if (BUDGET > 0) body.budget = BUDGET;
		let items: PlanItem[];
		try {
			const resp = await fetch(`${BASE}/v1/advise`, {
				method: "POST",
				headers: headers(),
				body: JSON.stringify(body),
				signal: AbortSignal.timeout(TIMEOUT_MS),
			});
			if (!resp.ok) return undefined; // fail open
			items = ((await resp.json()) as { plan: { items: PlanItem[] } }).plan.items ?? [];
		} catch {
			return undefined; // sidecar down or slow: send pi's messages unchanged
		}
		const stubs = new Map<string, string>();
		for (const it of items) {
			if (it.decision === "pruned" && it.stub) stubs.set(it.key, it.stub);
		}
		if (stubs.size === 0) return undefined;

		// Replace the text of each pruned tool result with its stub; images stay.
		const seen = new Map<string, number>();
		const changed = messages.map((m) => {
			if (m.role !== "toolResult" || !m.toolCallId) return m;
			const n = (seen.get(m.toolCallId) ?? 0) + 1;
			seen.set(m.toolCallId, n);
			const stub = stubs.get(n === 1 ? m.toolCallId : `${m.toolCallId}#${n}`);
			if (stub === undefined) return m;
			const blocks = Array.isArray(m.content) ? (m.content as Block[]) : [];
			const kept = blocks.filter((b) => b.type !== "text");
			return { ...m, content: [{ type: "text", text: stub }, ...kept] };
		});
		return { messages: changed as unknown as typeof event.messages };
	});

	pi.registerTool({
		name: "recall",
		label: "Recall",
		description:
			"Get back the full original text of an earlier tool output that was pruned from this conversation " +
			'to save context. Pass the id from the stub, e.g. recall("o_7f3a9c01b2").',
		parameters: Type.Object({
			id: Type.String({ pattern: "^o_[0-9a-f]{10}$", description: "The recall id shown in the stub." }),
		}),
		async execute(_toolCallId, params, signal) {
			const resp = await fetch(`${BASE}/v1/recall/${encodeURIComponent(params.id)}`, { headers: headers(), signal });
			const text = await resp.text();
			if (!resp.ok) throw new Error(`recall ${params.id}: ${resp.status} ${text}`);
			return { content: [{ type: "text", text }], details: { id: params.id, bytes: text.length } };
		},
	});
}
