package storage

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

// The recall secret is 32 bytes, made once per database: the same from a second
// handle, after a reopen and read-only; two first uses at once agree; another
// database gets another secret.
func TestRecallSecret(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db := openDB(t, dsn)
		other, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		got := make([][]byte, 2)
		errs := make([]error, 2)
		for i, h := range []*DB{db, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = h.RecallSecret(ctx)
			}()
		}
		wg.Wait()
		for i := range got {
			if errs[i] != nil {
				t.Fatalf("RecallSecret on handle %d: %v", i, errs[i])
			}
		}
		if len(got[0]) != RecallSecretBytes || !bytes.Equal(got[0], got[1]) {
			t.Fatalf("secrets %x and %x; want one %d-byte secret", got[0], got[1], RecallSecretBytes)
		}
		if bytes.Equal(got[0], make([]byte, RecallSecretBytes)) {
			t.Fatal("secret is all zero")
		}
		if n := count(t, db, "secrets"); n != 1 {
			t.Errorf("%d secrets rows, want 1", n)
		}
		other.Close()

		ro, err := OpenWith(ctx, dsn, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		again, err := ro.RecallSecret(ctx)
		if err != nil || !bytes.Equal(again, got[0]) {
			t.Errorf("read-only RecallSecret = %x, %v; want %x", again, err, got[0])
		}

		db2 := openDB(t, freshLike(t, dsn))
		s2, err := db2.RecallSecret(ctx)
		if err != nil || bytes.Equal(s2, got[0]) {
			t.Errorf("second database's secret = %x, %v; want another secret", s2, err)
		}
	})
}

// A read-only database without a secret says so; it does not make one.
func TestRecallSecretReadOnlyNone(t *testing.T) {
	eachBackend(t, func(t *testing.T, dsn string) {
		ctx := t.Context()
		db, err := Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		ro, err := OpenWith(ctx, dsn, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer ro.Close()
		if s, err := ro.RecallSecret(ctx); !errors.Is(err, ErrReadOnly) {
			t.Errorf("RecallSecret = %x, %v; want ErrReadOnly", s, err)
		}
	})
}
