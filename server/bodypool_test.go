package server

import (
	"io"
	"testing"
)

func TestBodyClass(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want int // -1: not kept
	}{
		{1, -1}, {32 << 10, -1}, // small bodies are allocated
		{32<<10 + 1, 0}, {64 << 10, 0}, // up to 64 KiB: the first class
		{64<<10 + 1, 1}, {128 << 10, 1},
		{844_000, 4}, // the 200k-token body: a 1 MiB buffer
		{32 << 20, bodyPoolMaxShift - bodyPoolMinShift}, {32<<20 + 1, -1},
	} {
		if got := bodyClass(c.n); got != c.want {
			t.Errorf("bodyClass(%d) = %d; want %d", c.n, got, c.want)
		}
		if c.want >= 0 && 1<<(c.want+bodyPoolMinShift) < c.n {
			t.Errorf("class %d is too small for %d bytes", c.want, c.n)
		}
	}
}

// A buffer goes back to the pool only once the handler and every reader the
// transport was given let go of it; until then a later request gets another one.
func TestBodyBufHeldUntilClosed(t *testing.T) {
	var p bodyPool
	a := p.get(100_000)
	if len(a.b) != 100_000 || cap(a.b) != 128<<10 {
		t.Fatalf("get(100000): len %d cap %d; want 100000, %d", len(a.b), cap(a.b), 128<<10)
	}
	body := newHeldBuffers([][]byte{a.b[:10], a.b[10:]}, a)
	retry := newHeldBuffers([][]byte{a.b}, a) // GetBody called again by the transport
	a.release()                               // the handler is done
	for range 3 {
		if b := p.get(100_000); b == a {
			t.Fatal("a buffer still held by the transport's readers was handed out again")
		}
	}
	if n, err := io.Copy(io.Discard, body); n != 100_000 || err != nil {
		t.Fatalf("read %d bytes, %v; want 100000", n, err)
	}
	body.Close()
	body.Close() // a second Close lets go of nothing more
	if got := a.refs.Load(); got != 1 {
		t.Fatalf("holders after the first reader's two Closes: %d; want 1 (the retry's)", got)
	}
	retry.Close()
	if got := a.refs.Load(); got != 0 {
		t.Fatalf("holders after every Close: %d; want 0", got)
	}
	var nilBuf *bodyBuf
	nilBuf.release() // a body not from the pool (chunked): nothing to do
	newHeldBuffers(nil, nil).Close()
}
