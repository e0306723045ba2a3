package advisor_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/pruneadvisor/pruneadvisor/advisor"
	"github.com/pruneadvisor/pruneadvisor/transcript"
)

// The advisor keeps no piece of an output's text: after advising every real session
// step by step (ten messages a step), no string anywhere in its state (the store
// aside, which keeps originals on purpose) has its bytes inside an output's text. A
// piece kept keeps the whole text alive: a term counted again by a map assignment
// (the assignment stores the new key) and an SWE-agent call's path sliced from the
// model's text did, until copied.
func TestAdvisorKeepsNoText(t *testing.T) {
	for _, file := range realSessions(t) {
		s, err := transcript.ReadFile(file, transcript.Options{Lenient: true})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		a, err := advisor.New(advisor.DefaultConfig(), nil, advisor.NewMemoryStore())
		if err != nil {
			t.Fatal(err)
		}
		s.ID = "s"
		full := s.Messages
		for n := 10; n < len(full)+10; n += 10 {
			s.Messages = full[:min(n, len(full))]
			if _, err := a.Advise(context.Background(), s); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
		}
		var texts []span
		for _, m := range full {
			for _, o := range m.Outputs {
				if len(o.Text) > 0 {
					p := uintptr(unsafe.Pointer(unsafe.StringData(o.Text)))
					texts = append(texts, span{p, p + uintptr(len(o.Text))})
				}
			}
		}
		w := &textWalk{texts: texts, seen: map[uintptr]bool{}}
		w.walk(reflect.ValueOf(a).Elem(), "Advisor")
		for _, path := range w.found[:min(len(w.found), 5)] {
			t.Errorf("%s: a piece of an output's text is kept at %s", file, path)
		}
	}
}

type span struct{ lo, hi uintptr }

// textWalk visits every string reachable from a value (unexported fields included)
// and notes the paths of those whose bytes lie inside one of texts.
type textWalk struct {
	texts []span
	seen  map[uintptr]bool
	found []string
}

func (w *textWalk) walk(v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.String:
		if v.Len() == 0 {
			return
		}
		p := uintptr(unsafe.Pointer(unsafe.StringData(v.String())))
		for _, s := range w.texts {
			if p >= s.lo && p < s.hi {
				w.found = append(w.found, fmt.Sprintf("%s (%d bytes)", path, v.Len()))
				return
			}
		}
	case reflect.Pointer:
		if v.IsNil() || w.seen[v.Pointer()] {
			return
		}
		w.seen[v.Pointer()] = true
		w.walk(v.Elem(), path)
	case reflect.Interface:
		if !v.IsNil() {
			w.walk(v.Elem(), path)
		}
	case reflect.Struct:
		if !v.CanAddr() {
			c := reflect.New(v.Type()).Elem()
			c.Set(v)
			v = c
		}
		for i := range v.NumField() {
			name := v.Type().Field(i).Name
			if path == "Advisor" && name == "Store" {
				continue // keeps originals on purpose
			}
			f := v.Field(i)
			w.walk(reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), path+"."+name)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			w.walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			w.walk(it.Key(), path+"{key}")
			w.walk(it.Value(), fmt.Sprintf("%s{%v}", path, it.Key()))
		}
	}
}
