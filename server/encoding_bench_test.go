package server

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/andybalholm/brotli"
)

// benchBody is about 1 MB of request JSON: a long agent history of file reads.
func benchBody() []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"gpt-4o","messages":[{"role":"user","content":"Fix the parser."}`)
	for k := 0; b.Len() < 1<<20; k++ {
		fmt.Fprintf(&b, `,{"role":"assistant","content":null,"tool_calls":[{"id":"c%d","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"pkg/f%d.go\"}"}}]}`, k, k)
		b.WriteString(`,{"role":"tool","tool_call_id":"c` + fmt.Sprint(k) + `","content":"`)
		for i := range 40 {
			fmt.Fprintf(&b, `func parseExpr%d_%d(tok Token) (*Node, error) { return nil, errEOF }\n`, k, i)
		}
		b.WriteString(`"}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// BenchmarkEncodeRewrite encodes a rewritten 1 MB body again, per coding (the cost
// a compressed request with prunes adds); br-4 and br-6 beside the level used.
func BenchmarkEncodeRewrite(b *testing.B) {
	body := benchBody()
	for _, k := range []coding{codingGzip, codingDeflate, codingBrotli, codingZstd} {
		b.Run(string(k), func(b *testing.B) {
			c := &bodyCoding{codings: []coding{k}, rawFlat: []bool{false}}
			var n int
			for b.Loop() {
				out, err := c.encode(body)
				if err != nil {
					b.Fatal(err)
				}
				n = len(out)
			}
			b.ReportMetric(float64(n)/float64(len(body)), "ratio")
		})
	}
	for _, level := range []int{4, 6} {
		b.Run(fmt.Sprintf("br-%d", level), func(b *testing.B) {
			var n int
			for b.Loop() {
				var buf bytes.Buffer
				w := brotli.NewWriterLevel(&buf, level)
				_, _ = w.Write(body)
				_ = w.Close()
				n = buf.Len()
			}
			b.ReportMetric(float64(n)/float64(len(body)), "ratio")
		})
	}
}

// BenchmarkDecodeRequest decodes a compressed 1 MB body, per coding.
func BenchmarkDecodeRequest(b *testing.B) {
	body := benchBody()
	for _, k := range []coding{codingGzip, codingDeflate, codingBrotli, codingZstd} {
		b.Run(string(k), func(b *testing.B) {
			c := &bodyCoding{codings: []coding{k}, rawFlat: []bool{false}}
			enc, err := c.encode(body)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := c.decode(enc, DefaultMaxBody); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
