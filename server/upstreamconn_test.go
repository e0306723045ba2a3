package server

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// bodyDialer's connections write a heldBuffers body of known length in one writev
// (counted) and every other body as net.TCPConn does; the upstream gets the same
// bytes either way, and a body longer than its Content-Length still fails the
// transport's way. The count also fails this test if net/http stops handing the
// connection the body's reader (transfer.go writeBody), which would leave the
// proxy correct but slower.
func TestBodyConnWritev(t *testing.T) {
	// What the upstream read, and its error: a body cut short (the last case)
	// may end in a closed connection, which only that case may see.
	type read struct {
		b   []byte
		err error
	}
	got := make(chan read, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		got <- read{b, err}
	}))
	defer up.Close()
	d := newBodyDialer()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = d.DialContext
	defer tr.CloseIdleConnections()

	rng := rand.New(rand.NewPCG(1, 2))
	parts := make([][]byte, 3)
	for i, n := range []int{200_000, 37, 650_000} {
		parts[i] = make([]byte, n)
		for j := range parts[i] {
			parts[i][j] = byte('a' + rng.IntN(26))
		}
	}
	whole := bytes.Join(parts, nil)
	for _, c := range []struct {
		name       string
		body       func() io.ReadCloser
		length     int64
		wantWritev int64 // d.writev after the request
		wantErr    string
	}{
		{"parts", func() io.ReadCloser { return newHeldBuffers(parts, nil) }, int64(len(whole)), 1, ""},
		{"plain reader", func() io.ReadCloser { return io.NopCloser(bytes.NewReader(whole)) }, int64(len(whole)), 1, ""},
		{"parts past their length", func() io.ReadCloser { return newHeldBuffers(parts, nil) }, int64(len(whole)) - 1, 1, "ContentLength"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, up.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Body, req.ContentLength = c.body(), c.length
			resp, err := tr.RoundTrip(req)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("RoundTrip error %v; want one naming %q", err, c.wantErr)
				}
				select {
				case <-got: // the upstream saw a cut body
				default:
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				r := <-got
				if r.err != nil {
					t.Errorf("upstream read: %v", r.err)
				}
				if !bytes.Equal(r.b, whole) {
					t.Errorf("upstream got %d bytes, want the %d sent (equal: %v)", len(r.b), len(whole), bytes.Equal(r.b, whole))
				}
			}
			if n := d.writev.Load(); n != c.wantWritev {
				t.Errorf("%d bodies written in one writev so far, want %d", n, c.wantWritev)
			}
		})
	}
}
