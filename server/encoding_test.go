package server_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/pruneadvisor/pruneadvisor/server"
)

// Encoders for the tests: the standard library's where it has one (an independent
// route from the server's klauspost decoders), else the reference Go ports.
var testEncoders = map[string]func(t testing.TB, b []byte) []byte{
	"gzip": func(t testing.TB, b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		mustWrite(t, w, b)
		return buf.Bytes()
	},
	"deflate": func(t testing.TB, b []byte) []byte {
		var buf bytes.Buffer
		w := zlib.NewWriter(&buf)
		mustWrite(t, w, b)
		return buf.Bytes()
	},
	"deflate-raw": func(t testing.TB, b []byte) []byte {
		var buf bytes.Buffer
		w, _ := flate.NewWriter(&buf, flate.BestSpeed)
		mustWrite(t, w, b)
		return buf.Bytes()
	},
	"br": func(t testing.TB, b []byte) []byte {
		var buf bytes.Buffer
		w := brotli.NewWriter(&buf)
		mustWrite(t, w, b)
		return buf.Bytes()
	},
	"zstd": func(t testing.TB, b []byte) []byte {
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer enc.Close()
		return enc.EncodeAll(b, nil)
	},
}

// testDecoders undo one coding (standard library where it has one).
var testDecoders = map[string]func(r io.Reader) (io.Reader, error){
	"gzip":        func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) },
	"deflate":     func(r io.Reader) (io.Reader, error) { return zlib.NewReader(r) },
	"deflate-raw": func(r io.Reader) (io.Reader, error) { return flate.NewReader(r), nil },
	"br":          func(r io.Reader) (io.Reader, error) { return brotli.NewReader(r), nil },
	"zstd": func(r io.Reader) (io.Reader, error) {
		d, err := zstd.NewReader(r)
		return d, err
	},
}

func mustWrite(t testing.TB, w io.WriteCloser, b []byte) {
	t.Helper()
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// encodeAll applies the codings in order ("gzip", then "br" for "gzip, br").
func encodeAll(t testing.TB, b []byte, codings ...string) []byte {
	for _, c := range codings {
		b = testEncoders[c](t, b)
	}
	return b
}

// decodeAll undoes codings applied in order.
func decodeAll(t testing.TB, b []byte, codings ...string) []byte {
	t.Helper()
	for i := len(codings) - 1; i >= 0; i-- {
		r, err := testDecoders[codings[i]](bytes.NewReader(b))
		if err != nil {
			t.Fatalf("decoding %s: %v", codings[i], err)
		}
		if b, err = io.ReadAll(r); err != nil {
			t.Fatalf("decoding %s: %v", codings[i], err)
		}
	}
	return b
}

// headerOf is the Content-Encoding value for codings ("deflate-raw" is sent as
// "deflate", as the clients that send raw deflate do).
func headerOf(codings []string) string {
	return strings.ReplaceAll(strings.Join(codings, ", "), "deflate-raw", "deflate")
}

// A compressed request is advised decoded: with nothing to prune the upstream gets
// the client's compressed bytes; with prunes it gets the rewritten body encoded the
// same way, with a Content-Length that matches; either way the response is the
// upstream's.
func TestCompressedRequests(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { _, _ = w.Write([]byte(`{"id":"ok"}`)) })
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL})
	plainFew := []byte(`{"model":"gpt-4o","messages":` + openAIMessages(1) + `}`)
	plainMany := []byte(`{"model":"gpt-4o","messages":` + openAIMessages(5) + `}`)

	// The rewrite a plain request gets, for comparison.
	resp, _ := post(t, env.http.URL+"/v1/chat/completions", plainMany, map[string]string{server.HeaderSession: "plain"})
	if resp.StatusCode != 200 {
		t.Fatalf("plain request: %d", resp.StatusCode)
	}
	plainRewrite := up.body(up.count() - 1)
	if bytes.Equal(plainRewrite, plainMany) {
		t.Fatal("the plain request was not rewritten; the test needs prunes")
	}

	for _, codings := range [][]string{{"gzip"}, {"deflate"}, {"deflate-raw"}, {"br"}, {"zstd"}, {"gzip", "br"}, {"zstd", "gzip"}} {
		name := strings.Join(codings, "+")
		t.Run(name, func(t *testing.T) {
			hdr := map[string]string{"Content-Encoding": headerOf(codings), server.HeaderSession: "plain"}
			// Nothing to prune: the very bytes sent.
			sent := encodeAll(t, plainFew, codings...)
			resp, body := post(t, env.http.URL+"/v1/chat/completions", sent, map[string]string{"Content-Encoding": headerOf(codings)})
			if resp.StatusCode != 200 || string(body) != `{"id":"ok"}` {
				t.Fatalf("nothing to prune: %d %s", resp.StatusCode, body)
			}
			i := up.count() - 1
			if got := up.body(i); !bytes.Equal(got, sent) {
				t.Errorf("nothing to prune: upstream got %d bytes, not the %d compressed bytes sent", len(got), len(sent))
			}
			// Prunes: the same session as the plain request, so the same stubs.
			sent = encodeAll(t, plainMany, codings...)
			resp, body = post(t, env.http.URL+"/v1/chat/completions", sent, hdr)
			if resp.StatusCode != 200 || string(body) != `{"id":"ok"}` {
				t.Fatalf("prunes: %d %s", resp.StatusCode, body)
			}
			i = up.count() - 1
			got, h := up.body(i), up.headers[i]
			if ce := h.Get("Content-Encoding"); ce != hdr["Content-Encoding"] {
				t.Errorf("upstream Content-Encoding %q, want %q", ce, hdr["Content-Encoding"])
			}
			if cl := h.Get("Content-Length"); cl != fmt.Sprint(len(got)) {
				t.Errorf("upstream Content-Length %q for %d bytes", cl, len(got))
			}
			if bytes.Equal(got, sent) {
				t.Fatal("prunes: the compressed body went upstream unchanged")
			}
			if plain := decodeAll(t, got, codings...); !bytes.Equal(plain, plainRewrite) {
				t.Errorf("prunes: decoded upstream body (%d bytes) differs from the plain request's rewrite (%d bytes)", len(plain), len(plainRewrite))
			}
		})
	}

	// /v1/advise reads a compressed body too.
	req := fmt.Sprintf(`{"session_id":"gz","format":"openai","messages":%s}`, openAIMessages(5))
	resp, body := post(t, env.http.URL+"/v1/advise", encodeAll(t, []byte(req), "gzip"), map[string]string{"Content-Encoding": "gzip"})
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"pruned":2`) {
		t.Errorf("gzip /v1/advise: %d %.300s", resp.StatusCode, body)
	}
	_, metrics := get(t, env.http.URL+"/metrics")
	for _, series := range []string{
		`pruneadvisor_request_encodings_total{encoding="gzip",route="openai"} 2`,
		`pruneadvisor_request_encodings_total{encoding="zstd",route="openai"} 2`,
		`pruneadvisor_request_encodings_total{encoding="multiple",route="openai"} 4`,
		`pruneadvisor_request_encodings_total{encoding="identity",route="openai"} 1`,
		`pruneadvisor_request_encodings_total{encoding="gzip",route="advise"} 1`,
	} {
		if !strings.Contains(string(metrics), series) {
			t.Errorf("metrics lack %s", series)
		}
	}
}

// A body that decodes to more than --max-body is 413 (a decompression bomb costs
// at most the limit in memory); data that is not of its coding is 400; an unknown
// coding is forwarded untouched by the proxy, counted, and 415 on /v1/advise.
func TestCompressedRequestFaults(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { _, _ = w.Write([]byte(`{"id":"ok"}`)) })
	const limit = 1 << 20
	env := newProxy(t, server.Options{OpenAIUpstream: up.URL, AnthropicUpstream: up.URL, MaxBody: limit})
	zeros := bytes.Repeat([]byte{'0'}, 8*limit)
	bomb := append(append([]byte(`{"messages":[{"role":"user","content":"`), zeros...), `"}]}`...)
	for _, codings := range [][]string{{"gzip"}, {"deflate"}, {"br"}, {"zstd"}, {"gzip", "gzip"}} {
		sent := encodeAll(t, bomb, codings...)
		if len(sent) > limit/10 {
			t.Fatalf("%v bomb is %d bytes compressed; want a small one", codings, len(sent))
		}
		for _, route := range []string{"/v1/chat/completions", "/v1/messages", "/v1/advise"} {
			n := up.count()
			resp, body := post(t, env.http.URL+route, sent, map[string]string{"Content-Encoding": headerOf(codings)})
			want := fmt.Sprintf("decoded request body is over the limit of %d bytes (--max-body)", limit)
			if resp.StatusCode != 413 || !strings.Contains(string(body), want) {
				t.Errorf("%v bomb (%d bytes) on %s: %d %s; want 413 with %q", codings, len(sent), route, resp.StatusCode, body, want)
			}
			if up.count() != n {
				t.Errorf("%v bomb on %s reached the upstream", codings, route)
			}
		}
	}

	plain := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	// A zstd frame asking for a 64 MiB window (RFC 8878 section 3.1.1: magic, a
	// descriptor without single segment, window descriptor 0x80 = 2^(10+16) bytes,
	// then one raw last block holding plain): refused before any window is allocated.
	var wide bytes.Buffer
	wide.Write([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x80})
	bh := 1 | len(plain)<<3
	wide.Write([]byte{byte(bh), byte(bh >> 8), byte(bh >> 16)})
	wide.Write(plain)
	if got := decodeAll(t, wide.Bytes(), "zstd"); !bytes.Equal(got, plain) {
		t.Fatalf("hand-made zstd frame decodes to %q", got)
	}
	if resp, body := post(t, env.http.URL+"/v1/messages", wide.Bytes(), map[string]string{"Content-Encoding": "zstd"}); resp.StatusCode != 413 ||
		!strings.Contains(string(body), "the zstd data needs a window of more than 8388608 bytes") {
		t.Errorf("zstd with a 64 MiB window: %d %s", resp.StatusCode, body)
	}
	for _, c := range []string{"gzip", "deflate", "br", "zstd"} {
		resp, body := post(t, env.http.URL+"/v1/chat/completions", plain, map[string]string{"Content-Encoding": c})
		want := "request body does not decode as " + c
		if resp.StatusCode != 400 || !strings.Contains(string(body), want) {
			t.Errorf("plain JSON labelled %s: %d %s; want 400 with %q", c, resp.StatusCode, body, want)
		}
	}
	truncated := encodeAll(t, plain, "gzip")
	truncated = truncated[:len(truncated)-6]
	if resp, body := post(t, env.http.URL+"/v1/messages", truncated, map[string]string{"Content-Encoding": "gzip"}); resp.StatusCode != 400 ||
		!strings.Contains(string(body), "unexpected EOF") {
		t.Errorf("truncated gzip: %d %s", resp.StatusCode, body)
	}
	notJSON := encodeAll(t, []byte(`{"messages": [}`), "gzip")
	if resp, body := post(t, env.http.URL+"/v1/messages", notJSON, map[string]string{"Content-Encoding": "gzip"}); resp.StatusCode != 400 ||
		!strings.Contains(string(body), "invalid JSON at line 1, column 15") || !strings.Contains(string(body), "decoded from gzip") {
		t.Errorf("gzip of bad JSON: %d %s", resp.StatusCode, body)
	}

	for _, c := range []string{"compress", "x-snappy", "gzip, lz4"} {
		sent := []byte("\x1f\x9d" + c + "some compressed bytes")
		resp, body := post(t, env.http.URL+"/v1/chat/completions", sent, map[string]string{"Content-Encoding": c})
		if resp.StatusCode != 200 || string(body) != `{"id":"ok"}` {
			t.Errorf("unknown %q: %d %s; want the upstream's answer", c, resp.StatusCode, body)
		}
		i := up.count() - 1
		if !bytes.Equal(up.body(i), sent) || up.headers[i].Get("Content-Encoding") != c {
			t.Errorf("unknown %q: upstream got %q with Content-Encoding %q", c, up.body(i), up.headers[i].Get("Content-Encoding"))
		}
		resp, body = post(t, env.http.URL+"/v1/advise", sent, map[string]string{"Content-Encoding": c})
		if resp.StatusCode != 415 || !strings.Contains(string(body), "unknown Content-Encoding") {
			t.Errorf("unknown %q on /v1/advise: %d %s; want 415", c, resp.StatusCode, body)
		}
	}
	_, metrics := get(t, env.http.URL+"/metrics")
	for _, series := range []string{
		`pruneadvisor_request_encodings_total{encoding="unknown",route="openai"} 3`,
		`pruneadvisor_request_encodings_total{encoding="unknown",route="advise"} 3`,
	} {
		if !strings.Contains(string(metrics), series) {
			t.Errorf("metrics lack %s", series)
		}
	}
	if !strings.Contains(env.log.String(), `request body in an unknown encoding; forwarded unchanged" route=openai err="unknown Content-Encoding \"compress\"`) {
		t.Errorf("log:\n%s", env.log.String())
	}
}
