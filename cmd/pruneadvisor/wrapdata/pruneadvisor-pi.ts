/**
 * pruneadvisor for pi (https://github.com/badlogic/pi-mono), shipped inside the
 * pruneadvisor binary: `pruneadvisor wrap pi` writes it to its cache folder and starts
 * pi with `-e <that file>`. It
 *
 *  - points pi's built-in providers at the pruneadvisor proxy: anthropic (Messages
 *    API) at $PRUNEADVISOR_URL, openai (Responses API) at $PRUNEADVISOR_URL/v1, google
 *    (Gemini API) at $PRUNEADVISOR_URL/v1beta, keeping their models, with the header
 *    X-Pruneadvisor-Recall-Tool: recall so that every stub names this tool, and
 *    X-Pruneadvisor-Agent: pi so that the hard limit is pi's compaction point;
 *  - registers the `recall` tool, which fetches a pruned output's original from the
 *    proxy (GET /v1/recall/{id}).
 *
 * Settings: PRUNEADVISOR_URL (default http://127.0.0.1:8377), PRUNEADVISOR_TOKEN
 * (when the proxy runs with --token). pi's own settings and files are not changed.
 */
import { Type } from "@mariozechner/pi-ai";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

const BASE = (process.env.PRUNEADVISOR_URL ?? "http://127.0.0.1:8377").replace(/\/+$/, "");
const TOKEN = process.env.PRUNEADVISOR_TOKEN;

export default function (pi: ExtensionAPI) {
	const headers: Record<string, string> = { "X-Pruneadvisor-Recall-Tool": "recall", "X-Pruneadvisor-Agent": "pi" };
	if (TOKEN) headers["X-Pruneadvisor-Token"] = TOKEN;
	pi.registerProvider("anthropic", { baseUrl: BASE, headers });
	pi.registerProvider("openai", { baseUrl: `${BASE}/v1`, headers });
	pi.registerProvider("google", { baseUrl: `${BASE}/v1beta`, headers });

	pi.registerTool({
		name: "recall",
		label: "Recall",
		description:
			"Get back the full original text of an earlier tool output that was pruned from this conversation " +
			'to save context. Pass the id from the stub, e.g. recall("o_754312282865").',
		parameters: Type.Object({
			id: Type.String({ pattern: "^o_([0-9]{12}|[0-9a-f]{10})$", description: "The recall id shown in the stub." }),
		}),
		async execute(_toolCallId, params, signal) {
			const h: Record<string, string> = {};
			if (TOKEN) h["X-Pruneadvisor-Token"] = TOKEN;
			const resp = await fetch(`${BASE}/v1/recall/${encodeURIComponent(params.id)}`, { headers: h, signal });
			const text = await resp.text();
			if (!resp.ok) throw new Error(`recall ${params.id}: ${resp.status} ${text}`);
			return { content: [{ type: "text", text }], details: { id: params.id, bytes: text.length } };
		},
	});
}
