// Package pgtest gives tests a PostgreSQL database of their own: a fresh schema on
// a test server, named in the URL it returns (search_path), dropped when the test
// ends. It is the PostgreSQL fixture of the store suite (storage) and of the
// commands' and the proxy's tests that run on PostgreSQL.
//
// The server is the one EnvURL names, else DefaultURL. When it does not answer the
// test is skipped with the reason, unless EnvRequired is "1" (as .ci/run sets it):
// then the test fails, so that CI cannot pass without running the PostgreSQL
// fixture.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// Environment variables read by URL.
const (
	// EnvURL is the URL of a PostgreSQL database in which the tests may create and
	// drop schemas (e.g. postgres://postgres@/postgres?host=/tmp/pg for a socket).
	EnvURL = "PRUNEADVISOR_TEST_POSTGRES"
	// EnvRequired set to "1" makes an unreachable server fail the test instead of
	// skipping it.
	EnvRequired = "PRUNEADVISOR_TEST_POSTGRES_REQUIRED"
)

// DefaultURL is the server tried when EnvURL is unset: a local server on the
// standard port, as its superuser.
const DefaultURL = "postgres://postgres@localhost:5432/postgres"

// connectTimeout bounds the one connection attempt per test process.
const connectTimeout = 5 * time.Second

var (
	once    sync.Once
	baseURL string
	admin   *sql.DB // on baseURL, for CREATE and DROP SCHEMA
	downErr error   // why the server cannot be used, when it cannot
)

// Base returns the URL of the test server (EnvURL or DefaultURL) and a connection
// pool on it, connecting once per process; it skips t (fails it with EnvRequired=1)
// when the server does not answer.
func Base(t testing.TB) (string, *sql.DB) {
	t.Helper()
	once.Do(connect)
	if downErr != nil {
		if os.Getenv(EnvRequired) == "1" {
			t.Fatalf("PostgreSQL fixture required (%s=1) but unusable: %v", EnvRequired, downErr)
		}
		t.Skipf("PostgreSQL fixture skipped: %v (set %s to the URL of a server where tests may create schemas; %s=1 makes this a failure)", downErr, EnvURL, EnvRequired)
	}
	return baseURL, admin
}

// connect opens and pings the test server once.
func connect() {
	baseURL = os.Getenv(EnvURL)
	if baseURL == "" {
		baseURL = DefaultURL
	}
	db, err := sql.Open("pgx", baseURL)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		err = db.PingContext(ctx)
	}
	if err != nil {
		downErr = fmt.Errorf("no PostgreSQL server answered at %s: %w", redact(baseURL), err)
		return
	}
	admin = db
}

// URL returns the URL of an empty schema of its own on the test server (the base
// URL with search_path set to it), dropped with everything in it when t ends. It
// skips or fails t as Base does.
func URL(t testing.TB) string {
	t.Helper()
	base, db := Base(t)
	suffix := make([]byte, 6)
	_, _ = rand.Read(suffix)
	schema := "pa_test_" + hex.EncodeToString(suffix)
	if _, err := db.ExecContext(context.Background(), `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		if _, err := db.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	u, err := WithParam(base, "search_path", schema)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// WithParam returns the URL rawURL with the query parameter key set to value.
func WithParam(rawURL, key, value string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("pgtest: %s: %w", redact(rawURL), err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// redact drops the password of a URL for messages.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(a URL that does not parse)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	return u.String()
}
