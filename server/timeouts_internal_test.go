package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The transport reads a body of known length once more after its last byte; by
// then net/http may have read the body's rest and closed it, because the
// response's headers went out (a fast upstream answered). That read must see the
// body's end, not http.ErrBodyReadAfterClose: the passthrough would otherwise cut
// its response short (the flake of TestSlowStreamOutlivesTimeouts, about one
// count_tokens request in 300 after an advised one on the same connection).
func TestBodyDeadlineEndOutlivesClose(t *testing.T) {
	s := &Server{bodyTimeout: time.Minute}
	const body = `{"model":"m","messages":[]}`
	type result struct {
		first, again string
		err          error
	}
	got := make(chan result, 1)
	srv := httptest.NewServer(s.bodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// What the transport does: the body up to its length, then the headers of
		// the answer go out, then the transport's read past the length.
		b, err := io.ReadAll(io.LimitReader(r.Body, r.ContentLength))
		if err != nil {
			got <- result{err: err}
			return
		}
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush() // net/http reads the body's rest and closes it
		n, err := r.Body.Read(make([]byte, 8))
		got <- result{first: string(b), again: strings.Repeat("x", n), err: err}
	})))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	r := <-got
	if r.first != body || r.again != "" || !errors.Is(r.err, io.EOF) {
		t.Errorf("read %q, then %q, %v; want the body, then nothing and io.EOF (not %v)", r.first, r.again, r.err, http.ErrBodyReadAfterClose)
	}
}
